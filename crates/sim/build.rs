//! Computes `FRAGLAB_CHECKPOINT_LAYOUT`: a hash of the sources whose types a checkpoint's
//! encoding follows (`src/checkpoint/mod.rs`), so that a checkpoint is read only by a
//! build from the same sources.

use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn main() {
    let here = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let crates = here.parent().expect("crates/sim").to_path_buf();
    let mut all = Vec::new();
    for c in ["types", "spec", "mm", "policies", "sim"] {
        let src = crates.join(c).join("src");
        println!("cargo:rerun-if-changed={}", src.display());
        files(&src, &mut all);
    }
    all.sort();
    // FNV-1a, 64 bits, over each file's path (relative) and bytes.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: &[u8]| {
        for &x in b {
            h ^= x as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for p in &all {
        eat(p.strip_prefix(&crates).unwrap_or(p).to_string_lossy().as_bytes());
        eat(&[0]);
        eat(&std::fs::read(p).unwrap_or_default());
        eat(&[0]);
    }
    println!("cargo:rustc-env=FRAGLAB_CHECKPOINT_LAYOUT={h:016x}");
}
