//! Every "§N.M" cited anywhere in the repository (code, tests, docs, experiments, tools) is a
//! heading of the model reference in docs/model/, and nothing points at a model reference
//! outside the repository.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The files to scan: sources and docs under the repository, without build output, vendored
/// code and the model reference itself.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if p.is_dir() {
            if !matches!(
                name.as_str(),
                "target" | ".git" | "vendor" | "node_modules" | "corpus"
            ) && !p.ends_with("docs/model")
            {
                files(&p, out);
            }
        } else if ["rs", "md", "py", "toml", "sh", "ipynb"]
            .iter()
            .any(|x| name.ends_with(&format!(".{x}")))
        {
            out.push(p);
        }
    }
}

/// The section numbers in `text` ("§9.8.5" gives "9.8.5"; a trailing dot is punctuation).
fn cited(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices('§') {
        let rest = &text[i + '§'.len_utf8()..];
        let n: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let n = n.trim_end_matches('.');
        if !n.is_empty() {
            out.push(n.to_string());
        }
    }
    out
}

/// The section numbers that are headings in docs/model ("## §9.8 ..." gives "9.8").
fn headings() -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    for e in std::fs::read_dir(root().join("docs/model")).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        for line in text.lines() {
            let h = line.trim_start_matches('#');
            if h.len() < line.len() {
                if let Some(n) = cited(h.trim_start()).first() {
                    if h.trim_start().starts_with('§') {
                        set.insert(n.clone());
                    }
                }
            }
        }
    }
    set
}

#[test]
fn every_cited_section_is_a_heading_of_the_model_reference() {
    let have = headings();
    assert!(have.contains("9.8.5") && have.contains("34"), "{have:?}");
    let mut fs = Vec::new();
    files(&root(), &mut fs);
    assert!(fs.len() > 100, "{} files scanned", fs.len());
    let mut missing = Vec::new();
    let mut outside = Vec::new();
    for f in &fs {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        let rel = f.strip_prefix(root()).unwrap_or(f).display().to_string();
        for (ln, line) in text.lines().enumerate() {
            for n in cited(line) {
                if !have.contains(&n) {
                    missing.push(format!("{rel}:{}: §{n}", ln + 1));
                }
            }
            // Spelt in two parts so that this file does not name them itself.
            let names = [
                concat!("kernel", "-model"),
                concat!("shared", "/reference"),
                concat!("published", "-results"),
                concat!("live-kernel", "-notes"),
            ];
            if names.iter().any(|n| line.contains(n)) {
                outside.push(format!("{rel}:{}", ln + 1));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "sections cited but not in docs/model:\n{}",
        missing.join("\n")
    );
    assert!(
        outside.is_empty(),
        "a model reference outside the repository named at:\n{}",
        outside.join("\n")
    );
}
