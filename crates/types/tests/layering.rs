//! The crate layering (docs/architecture.md), checked on the manifests and sources: `types` is at
//! the bottom; `mm` (the model) and `spec` (the spec language) build on `types` only, so the
//! model never sees a spec and a spec never links the model; `sim` joins them; `host` and
//! `report` read specs and results without the model; `cli` is the top.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Which fraglab crates each crate may depend on (normal and dev dependencies alike).
const ALLOWED: &[(&str, &[&str])] = &[
    ("types", &[]),
    ("state", &["types"]),
    ("mm", &["types"]),
    // Policy plug-ins implement mm's Policy trait (issue 37).
    ("policies", &["types", "mm"]),
    ("spec", &["types"]),
    ("sim", &["types", "state", "mm", "policies", "spec"]),
    ("report", &["types", "spec", "sim"]),
    ("host", &["types", "state", "spec", "sim"]),
    (
        "cli",
        &[
            "types", "state", "mm", "policies", "spec", "sim", "report", "host",
        ],
    ),
    // The Python package's extension: the simulator and the spec, as the binary's run and
    // compare use them, and mm's Policy trait with the registry for policies written in
    // Python; not the live-kernel engine (validate runs the binary).
    ("py", &["mm", "policies", "spec", "sim"]),
];

/// Crates that a crate's *library* (its `[dependencies]`, not its tests) must not use: the
/// report and host libraries stay free of the model and the simulator (their tests may run the
/// simulator to produce results).
const LIB_FORBIDDEN: &[(&str, &[&str])] = &[
    ("report", &["mm", "sim"]),
    ("host", &["mm", "sim"]),
    ("spec", &["mm", "sim", "host", "report"]),
    ("mm", &["spec", "sim", "host", "report", "state"]),
    ("state", &["mm", "spec", "sim", "host", "report"]),
];

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The fraglab crates named in each `[*dependencies]` section of a manifest, by section.
fn fraglab_deps(manifest: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut section = String::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line.trim_matches(|c| c == '[' || c == ']').to_string();
            continue;
        }
        if !section.ends_with("dependencies") {
            continue;
        }
        if let Some(name) = line.split(['=', '.', ' ']).next() {
            if let Some(dep) = name.strip_prefix("fraglab-") {
                out.entry(section.clone()).or_default().push(dep.to_string());
            }
        }
    }
    out
}

#[test]
fn every_crate_depends_only_on_the_layers_below_it() {
    let mut seen = 0;
    for (krate, allowed) in ALLOWED {
        let manifest = std::fs::read_to_string(crates_dir().join(krate).join("Cargo.toml"))
            .unwrap_or_else(|e| panic!("crates/{krate}/Cargo.toml: {e}"));
        for (section, deps) in fraglab_deps(&manifest) {
            for dep in deps {
                assert!(
                    allowed.contains(&dep.as_str()),
                    "crates/{krate}/Cargo.toml [{section}] depends on fraglab-{dep}, which the layering forbids"
                );
                let lib_forbidden = LIB_FORBIDDEN
                    .iter()
                    .find(|(k, _)| k == krate)
                    .map_or(&[][..], |(_, f)| f);
                assert!(
                    !(section == "dependencies" && lib_forbidden.contains(&dep.as_str())),
                    "the fraglab-{krate} library depends on fraglab-{dep}"
                );
            }
        }
        seen += 1;
    }
    // Every crate directory is in the table.
    let dirs = std::fs::read_dir(crates_dir())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().join("Cargo.toml").exists())
        .count();
    assert_eq!(dirs, seen, "a crate is missing from ALLOWED");
}

/// mm's sources name nothing of the crates above it (a dev-dependency could smuggle one into
/// its tests or benches).
#[test]
fn mm_imports_nothing_from_sim_spec_host_or_report() {
    let mut stack = vec![crates_dir().join("mm")];
    let mut files = 0;
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files += 1;
                let text = std::fs::read_to_string(&p).unwrap();
                // Code, not comments: a doc comment may say who builds an mm type.
                for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
                    for upper in ["fraglab_sim", "fraglab_spec", "fraglab_host", "fraglab_report"] {
                        assert!(!line.contains(upper), "{} names {upper}: {line}", p.display());
                    }
                }
            }
        }
    }
    assert!(files > 20, "found only {files} source files under crates/mm");
}

#[test]
fn the_manifest_reader_sees_fraglab_dependencies() {
    let deps = fraglab_deps(
        "[dependencies]\nfraglab-mm.workspace = true\nserde = \"1\"\n[dev-dependencies]\nfraglab-sim = { path = \"x\" }\n",
    );
    assert_eq!(deps["dependencies"], ["mm"]);
    assert_eq!(deps["dev-dependencies"], ["sim"]);
}
