//! `[host]`: settings of the host engine only (issue 19, item 5). The key is declared and parsed
//! like every spec key, with the usual one-line errors, and the simulator does not read it: a
//! spec gives the same result JSON with and without it. The host side (DAMON turned off for a
//! run and back on, also after a SIGKILL) is tested live in `tests/live.rs`.

use fraglab_spec::parse_spec;

const BODY: &str = r#"[machine]
memory = "256MiB"
cpus = 2
[workload]
duration = "2s"
[[workload.task]]
steps = [{ mmap = "a", size = "16MiB" }, { touch = "a" }, { sleep = "1s" }]
"#;

#[test]
fn host_table_damon_keep_or_off() {
    let s = parse_spec(BODY, "spec.toml").unwrap();
    assert!(!s.host.damon_off, "default: DAMON left as it is");
    let keep = parse_spec(&format!("[host]\ndamon = \"keep\"\n{BODY}"), "spec.toml").unwrap();
    assert!(!keep.host.damon_off);
    let off = parse_spec(&format!("[host]\ndamon = \"off\"\n{BODY}"), "spec.toml").unwrap();
    assert!(off.host.damon_off);
}

#[test]
fn host_table_bad_input_names_file_line_and_key() {
    let e = parse_spec(&format!("{BODY}[host]\ndamon = \"of\"\n"), "spec.toml").unwrap_err();
    assert_eq!(
        e.to_string(),
        "spec.toml:9: key host.damon: \"of\" is not keep or off"
    );
    let e = parse_spec(&format!("{BODY}[host]\ndamon = 0\n"), "spec.toml").unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (9, Some("host.damon")));
    let e = parse_spec(&format!("{BODY}[host]\ndamom = \"off\"\n"), "spec.toml").unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (9, Some("host.damom")));
    assert!(e.message.contains("damon"), "{}", e.message);
}

/// Declared, not read by the model: the simulator's result is byte-identical with the key.
#[test]
fn host_table_is_ignored_by_the_simulator() {
    let run = |text: &str| {
        let r = fraglab_sim::timed::run_workload(&parse_spec(text, "spec.toml").unwrap()).unwrap();
        serde_json::to_string(&r).unwrap()
    };
    let plain = run(BODY);
    assert_eq!(plain, run(&format!("[host]\ndamon = \"off\"\n{BODY}")));
    assert!(!plain.contains("confounders"));
}
