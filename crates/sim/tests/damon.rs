//! `[damon]` in a timed run (kernel-model.md §27.3–§27.4): S2's scheme frees idle page cache
//! once its regions have aged 60 s; without the table nothing changes.

use fraglab_sim::timed::run_workload;
use fraglab_spec::parse_spec;

fn spec(damon: &str) -> String {
    format!(
        r#"
[machine]
memory = "512MiB"
cpus = 2

[workload]
duration = "120s"

[[workload.task]]
name = "reader"
steps = [
  {{ read = "big", length = "256MiB", file_size = "256MiB", mapping = "large_folios" }},
  {{ sleep = "115s" }},
]
{damon}
"#
    )
}

#[test]
fn section_27_4_s2_scheme_frees_idle_page_cache_in_a_timed_run() {
    let off = run_workload(&parse_spec(&spec(""), "off.toml").unwrap()).unwrap();
    let on = run_workload(
        &parse_spec(
            &spec("[damon]\npreset = \"s2\"\nmin_nr_regions = 64\nmax_nr_regions = 512\n"),
            "s2.toml",
        )
        .unwrap(),
    )
    .unwrap();
    let v = |r: &fraglab_spec::result::RunResult, k: &str| r.vmstat_delta[k];
    // Without DAMON the page cache stays; with it, most of it is freed without pgscan/pgsteal.
    assert_eq!(v(&off, "nr_file_pages"), 65_536);
    assert!(
        v(&on, "nr_file_pages") < 65_536 / 4,
        "{}",
        v(&on, "nr_file_pages")
    );
    assert!(v(&on, "pgfree") > 3 * 65_536 / 4);
    for k in [
        "pgscan_kswapd",
        "pgscan_direct",
        "pgsteal_kswapd",
        "pgsteal_direct",
    ] {
        assert_eq!(v(&on, k), 0, "{k}");
    }
    // Same spec and seed: the same result.
    let again = run_workload(
        &parse_spec(
            &spec("[damon]\npreset = \"s2\"\nmin_nr_regions = 64\nmax_nr_regions = 512\n"),
            "s2.toml",
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        serde_json::to_string(&on).unwrap(),
        serde_json::to_string(&again).unwrap()
    );
}
