//! Issue 23 item 6: `fraglab soak`, short (the ≥ 10^8-operation soak is a bench, README).

use std::process::Command;

fn soak(args: &[&str]) -> (bool, serde_json::Value, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_fraglab"))
        .arg("soak")
        .args(args)
        .output()
        .unwrap();
    let out = String::from_utf8(o.stdout).unwrap();
    let last = out.lines().last().unwrap_or("null").to_string();
    (
        o.status.success(),
        serde_json::from_str(&last).unwrap(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn ten_thousand_checked_operations_of_every_kind_break_nothing() {
    let (ok, j, err) = soak(&["--ops", "10000", "--check-every", "100", "--seed", "7"]);
    assert!(ok, "{err}\n{j}");
    assert_eq!(j["operations"], 10000);
    // Every 100 operations; the last check is the 10,000th operation's.
    assert_eq!(j["checks"], 100);
    assert_eq!(j["violations"], 0);
    assert!(j["violation"].is_null());
    for kind in [
        "alloc",
        "free",
        "fault",
        "dontneed",
        "munmap",
        "read",
        "write",
        "truncate",
        "kswapd",
        "compact",
        "kcompactd",
        "compact_memory",
        "writeback",
        "drain",
        "decay",
        "drop_caches",
    ] {
        assert!(j["counts"][kind].as_u64().unwrap_or(0) > 0, "no {kind}: {j}");
    }
    // Deterministic: the same options give the same operations.
    let (_, again, _) = soak(&["--ops", "10000", "--check-every", "100", "--seed", "7"]);
    assert_eq!(again["counts"], j["counts"]);
    assert_eq!(again["failed_allocations"], j["failed_allocations"]);
    assert_eq!(again["live_folios_at_end"], j["live_folios_at_end"]);
}

#[test]
fn a_corrupted_model_is_caught_at_the_next_check() {
    let (ok, j, err) = soak(&["--ops", "10000", "--check-every", "100", "--corrupt-at", "1234"]);
    assert!(!ok);
    assert_eq!(j["violations"], 1);
    // The check after operation 1,300 finds it, and the soak stops there.
    assert_eq!(j["operations"], 1300);
    assert_eq!(j["checks"], 13);
    let v = j["violation"].as_str().unwrap();
    assert!(
        v.starts_with("after operation 1300 ") && v.contains("nr_free_highatomic"),
        "{v}"
    );
    assert!(
        err.contains("soak: invariant violated after operation 1300"),
        "{err}"
    );
}

#[test]
fn zero_operations_is_refused() {
    let o = Command::new(env!("CARGO_BIN_EXE_fraglab"))
        .args(["soak", "--ops", "0"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--ops and --check-every must be at least 1"));
}
