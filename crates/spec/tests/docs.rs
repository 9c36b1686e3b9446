//! docs/knobs.md is generated from the knob, switch and key declarations
//! (`fraglab_spec::docs::knobs_markdown`): this test fails when the file is stale.
//! `FRAGLAB_BLESS=1 cargo test -p fraglab-spec --test docs` rewrites it.

use std::path::Path;

#[test]
fn docs_knobs_md_is_generated_from_the_declarations() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/knobs.md");
    let want = fraglab_spec::docs::knobs_markdown();
    if std::env::var_os("FRAGLAB_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/knobs.md is stale: regenerate it with `FRAGLAB_BLESS=1 cargo test -p fraglab-spec \
         --test docs` (or `fraglab knobs --markdown > docs/knobs.md`)"
    );
}

#[test]
fn every_knob_and_switch_has_a_row() {
    let doc = fraglab_spec::docs::knobs_markdown();
    for k in fraglab_spec::KNOBS {
        assert!(doc.contains(&format!("`{}`", k.name)), "{}", k.name);
    }
    for s in fraglab_spec::MODEL_SWITCHES {
        assert!(doc.contains(&format!("`[model] {}`", s.name)), "{}", s.name);
    }
}
