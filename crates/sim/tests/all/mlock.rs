//! mlock in task programs (docs/model §29.1): `locked = true` on mmap (MAP_LOCKED), the
//! `mlock` and `munlock` steps, and munmap of a locked mapping.

fn run(steps: &str) -> fraglab_spec::result::RunResult {
    let text = format!(
        "[machine]\nmemory = \"256MiB\"\ncpus = 1\n[workload]\nduration = \"2s\"\n[[workload.task]]\nname = \"locker\"\nsteps = [{steps}]\n"
    );
    let spec = fraglab_spec::parse_spec(&text, "mlock.toml").unwrap();
    fraglab_sim::timed::run_workload(&spec).unwrap()
}

fn d(r: &fraglab_spec::result::RunResult, k: &str) -> i64 {
    r.vmstat_delta[k]
}

/// MAP_LOCKED populates and mlocks at mmap; mlock of a half-touched mapping mlocks what is
/// present and faults the rest; both count as faults and stay mlocked while the task holds
/// them (the task sleeps past the end of the run).
#[test]
fn s29_1_2_locked_mmap_and_mlock_step_populate_and_mlock() {
    let r = run(
        "{ mmap = \"a\", size = \"16MiB\", locked = true }, { mmap = \"b\", size = \"8MiB\" }, \
         { dontneed = \"b\", offset = 0, length = \"4MiB\" }, { mlock = \"b\" }, { sleep = \"10s\" }",
    );
    let pages = (24 << 20) / 4096;
    assert_eq!(d(&r, "nr_mlock"), pages);
    assert_eq!(d(&r, "nr_unevictable"), pages);
    assert_eq!(d(&r, "unevictable_pgs_mlocked"), pages);
    assert_eq!(d(&r, "unevictable_pgs_culled"), pages);
    assert_eq!(d(&r, "unevictable_pgs_munlocked"), 0);
    assert_eq!(d(&r, "nr_inactive_anon") + d(&r, "nr_active_anon"), 0);
    assert_eq!(d(&r, "nr_anon_pages"), pages);
    // Without the step, b is never populated.
    let r = run("{ mmap = \"a\", size = \"16MiB\", locked = true }, { mmap = \"b\", size = \"8MiB\" }, { sleep = \"10s\" }");
    assert_eq!(d(&r, "nr_anon_pages"), 4096);
}

/// munlock and munmap of a locked mapping munlock and rescue every page (§29.1.5).
#[test]
fn s29_1_5_munlock_and_munmap_munlock() {
    let r = run(
        "{ mmap = \"a\", size = \"16MiB\", locked = true }, { mmap = \"b\", size = \"8MiB\", locked = true }, \
         { munlock = \"b\" }, { munmap = \"a\" }, { sleep = \"10s\" }",
    );
    assert_eq!(d(&r, "unevictable_pgs_mlocked"), 6144);
    assert_eq!(d(&r, "unevictable_pgs_munlocked"), 6144);
    assert_eq!(d(&r, "unevictable_pgs_rescued"), 6144);
    assert_eq!(d(&r, "nr_mlock"), 0);
    assert_eq!(d(&r, "nr_unevictable"), 0);
    assert_eq!(d(&r, "nr_anon_pages"), 2048, "b is still mapped, evictable");
}
