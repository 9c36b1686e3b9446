//! `apply_overrides`: the keys `fraglab compare` accepts after `SPEC@`.

use fraglab_spec::{apply_overrides, parse_spec};

const SPEC: &str = r#"
name = "o"
[machine]
memory = "512MiB"
cpus = 2
[workload]
duration = "10s"
[[workload.thp_burst]]
interval = "2s"
size = "64MiB"
hold = "1s"
[[workload.thp_burst]]
interval = "3s"
size = "32MiB"
hold = "1s"
"#;

fn set(k: &str, v: &str) -> Result<String, String> {
    apply_overrides(SPEC, &[(k.to_string(), v.to_string())])
}

#[test]
fn a_nested_key_sets_every_entry_of_an_array_of_tables() {
    let s = parse_spec(&set("workload.thp_burst.size", "128MiB").unwrap(), "o").unwrap();
    let w = s.workload.unwrap();
    let sizes: Vec<u64> = w.thp_burst.iter().map(|b| b.size_bytes).collect();
    assert_eq!(sizes, vec![128 << 20, 128 << 20]);
}

#[test]
fn an_index_sets_one_entry() {
    let out = set("workload.thp_burst[1].size", "128MiB").unwrap();
    assert!(out.contains("size = \"64MiB\""), "{out}");
    assert!(
        out.contains("size = 128MiB") || out.contains("size = \"128MiB\""),
        "{out}"
    );
    assert!(!out.contains("32MiB"), "{out}");
    parse_spec(&out, "o").unwrap();
}

#[test]
fn scalar_and_knob_keys_still_work() {
    let out = apply_overrides(
        SPEC,
        &[
            ("machine.cpus".into(), "4".into()),
            ("vm.defrag_mode".into(), "1".into()),
            ("model.defrag_stage".into(), "kswapd_assist".into()),
        ],
    )
    .unwrap();
    let s = parse_spec(&out, "o").unwrap();
    assert_eq!(s.machine.cpus, 4);
    assert!(out.contains("\"vm.defrag_mode\" = 1"), "{out}");
}

#[test]
fn bad_paths_are_errors_that_name_the_key() {
    let e = set("workload.kbuild.jobs", "3").unwrap_err();
    assert!(
        e.contains("workload.kbuild.jobs") && e.contains("no `kbuild`"),
        "{e}"
    );
    let e = set("workload.thp_burst[5].size", "1MiB").unwrap_err();
    assert!(e.contains("2 entries"), "{e}");
    let e = set("workload.thp_burst[x].size", "1MiB").unwrap_err();
    assert!(e.contains("name[N]"), "{e}");
    let e = set("workload.thp_burst", "1").unwrap_err();
    assert!(e.contains("is a table"), "{e}");
    let e = set("workload..size", "1").unwrap_err();
    assert!(e.contains("empty key"), "{e}");
}

/// A relative `machine.snapshot` stays relative to the spec file's directory when overrides
/// are given, even an override whose key holds a '/' (the display name carries it).
#[test]
fn a_snapshot_path_is_resolved_from_the_real_file_with_overrides() {
    let dir = std::env::temp_dir().join(format!("fraglab-ovr-snap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("w.toml");
    std::fs::write(
        &file,
        "name = \"w\"\n[machine]\nsnapshot = \"s.fsnap\"\n[workload]\nduration = \"1s\"\n[[workload.task]]\nname = \"t\"\nsteps = [{ sleep = \"1s\" }]\n",
    )
    .unwrap();
    let ovr = [("transparent_hugepage/enabled".to_string(), "never".to_string())];
    let s = fraglab_spec::load_spec_with(&file, &ovr).unwrap();
    assert_eq!(s.machine.snapshot.unwrap().resolved, dir.join("s.fsnap"));
    std::fs::remove_dir_all(&dir).unwrap();
}
