//! `[damon]` in a timed run (docs/model §27.3–§27.4): S2's scheme frees idle page cache
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

/// §27.3: `[damon] regions` (the kernel's `targets/0/regions`, which `validate` carries over)
/// are the kdamond's monitored ranges in pfns; without them the s2 preset monitors S2's
/// [16 MiB, 3 GiB) and [4 GiB, end).
#[test]
fn s27_damon_regions_key_sets_the_monitored_ranges() {
    let s = parse_spec(
        "[machine]\nmemory = \"5GiB\"\n[damon]\npreset = \"s2\"\nregions = \"32MiB-1GiB, 4GiB-25GiB\"\n",
        "r.toml",
    )
    .unwrap();
    let c = fraglab_sim::boot::damon_config(&s).unwrap();
    assert_eq!(c.regions, [(8192, 262_144), (1 << 20, 25 << 18)]);
    let s = parse_spec(
        "[machine]\nmemory = \"5GiB\"\n[damon]\npreset = \"s2\"\n",
        "r.toml",
    )
    .unwrap();
    let c = fraglab_sim::boot::damon_config(&s).unwrap();
    assert_eq!(c.regions, [(4096, 3 << 18), (1 << 20, u32::MAX)]);
    // Clipped to the machine: the kdamond's regions end at the end of memory.
    let mm = fraglab_sim::boot(&s).unwrap();
    let kd = fraglab_mm::damon::Kdamond::new(c, &mm, 1);
    assert_eq!(kd.regions.last().unwrap().end, mm.end_pfn());
}
