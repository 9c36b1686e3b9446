//! `fraglab snapshot info` and `fraglab host snapshot --pages` on the command line (issue 21
//! item 1, docs/model §30), with the S2 fixture of crates/state/tests/data.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fraglab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fraglab"))
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../state/tests/data/s2-snapshot.fsnap")
}

/// §30.5: `snapshot info` prints the machine, the pages by class and the match table.
#[test]
fn section_30_5_snapshot_info_prints_the_match() {
    let out = fraglab()
        .arg("snapshot")
        .arg("info")
        .arg(fixture())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("6553600 pfns"), "{text}");
    assert!(text.contains("Normal blocks Unmovable"), "{text}");
    assert!(text.contains("block-type fit:"), "{text}");
    let no_fit = fraglab()
        .args(["snapshot", "info", "--no-fit"])
        .arg(fixture())
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&no_fit.stdout).contains("block-type fit"));
}

/// A truncated snapshot gives one error naming the file and the byte offset.
#[test]
fn section_30_1_snapshot_info_truncated_file() {
    let bytes = std::fs::read(fixture()).unwrap();
    let p = std::env::temp_dir().join(format!("fraglab-cli-cut-{}.fsnap", std::process::id()));
    std::fs::write(&p, &bytes[..bytes.len() / 3]).unwrap();
    let out = fraglab().arg("snapshot").arg("info").arg(&p).output().unwrap();
    std::fs::remove_file(&p).unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("fraglab-cli-cut-") && err.contains("byte offset"),
        "{err}"
    );
}

/// `host snapshot --pages` needs `-o STATE`.
#[test]
fn section_30_1_host_snapshot_pages_needs_output() {
    let out = fraglab().args(["host", "snapshot", "--pages"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("-o STATE"));
}
