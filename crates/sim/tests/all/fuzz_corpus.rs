//! Every file of the fuzz corpus (fuzz/corpus/spec_run: the examples' and experiments' specs,
//! small-machine variants of them, issue 23's hostile specs) through the fuzz target's own
//! run (fuzz/src/short.rs): parsed, and the small ones booted and run briefly, with no panic
//! and in bounded time. The stable half of the fuzzing, run by `cargo test`.

use std::time::{Duration, Instant};

include!("../../../../fuzz/src/short.rs");

#[test]
fn every_corpus_file_parses_or_is_refused_and_runs_briefly() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/spec_run");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(files.len() >= 60, "the corpus has {} files", files.len());
    let (mut ran, mut refused) = (0, 0);
    let t0 = Instant::now();
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        let Ok(text) = std::str::from_utf8(&bytes) else {
            continue;
        };
        let t = Instant::now();
        match short_run(text) {
            Short::Ran => ran += 1,
            Short::Refused => refused += 1,
            Short::ParsedOnly => {}
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{}: {:?} for one short run",
            f.display(),
            t.elapsed()
        );
    }
    // The hostile refusals, and runs of the small-machine seeds.
    assert!(refused >= 6, "{refused} refused");
    assert!(ran >= 20, "{ran} ran");
    assert!(
        t0.elapsed() < Duration::from_secs(120),
        "{:?} in all",
        t0.elapsed()
    );
}
