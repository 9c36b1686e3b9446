//! FRAGLAB_SNAPSHOT_BUDGET sets the memory budget of `Snapshot::read` (a test binary of its
//! own: it sets the variable for its process).

mod common;

use fraglab_state::snapshot::{Snapshot, BUDGET_ENV};

#[test]
fn the_budget_variable_lowers_and_raises_the_budget() {
    let dir = common::tmp("budget-env");
    let p = dir.join("s.fsnap");
    let s = common::machine(8192, 2);
    s.write(&p).unwrap();
    // SAFETY: the only test of this binary; nothing else reads the environment meanwhile.
    unsafe { std::env::set_var(BUDGET_ENV, "64K") };
    let e = Snapshot::read(&p).unwrap_err().to_string();
    assert!(
        e.contains("above the memory budget of 64.0 KiB (FRAGLAB_SNAPSHOT_BUDGET=64K)"),
        "{e}"
    );
    unsafe { std::env::set_var(BUDGET_ENV, "1M") };
    assert_eq!(Snapshot::read(&p).unwrap(), s);
    unsafe { std::env::set_var(BUDGET_ENV, "plenty") };
    let e = Snapshot::read(&p).unwrap_err().to_string();
    assert!(
        e.contains("FRAGLAB_SNAPSHOT_BUDGET=\"plenty\" is not a size"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
