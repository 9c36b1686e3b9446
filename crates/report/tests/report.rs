//! `fraglab report`: the page holds every plot with its series (each configuration overlaid),
//! the summary table, escapes text, loads nothing from the network, downsamples wide pageblock
//! maps, is deterministic, and renders in headless Chromium with every plot drawn — checked on
//! a screenshot, pixel by pixel, in each plot area (skipped, with the reason printed, where no
//! Chromium is installed; `.ci/run` installs Debian's `chromium`).

mod browser;

use fraglab_report::{config_label, render_html, MAX_MAP_COLUMNS, MAX_MAP_ROWS, PALETTE, PLOTLY_JS};
use fraglab_spec::result::{CompareReport, CompareRow, PageblockMap, RunResult};
use serde_json::Value;

const SPEC: &str = r#"name = "report-test"
[machine]
memory = "256MiB"
cpus = 2
[knobs]
"transparent_hugepage/enabled" = "madvise"
[run]
seed = 3
[workload]
duration = "6s"
[[workload.thp_burst]]
interval = "1s"
size = "32MiB"
hold = "500ms"
bursts = 5
[[workload.task]]
name = "frag"
steps = [{ mmap = "a", size = "96MiB" }, { touch = "a", pattern = "random" }, { dontneed = "a", offset = "0", length = "48MiB" }, { slab = 3000 }, { sleep = "4s" }]
"#;

/// The base configuration's label and the patched one's (text that must be escaped).
const PATCHED: &str = "thp <always> & co";

fn result(thp: &str, seed: u64) -> RunResult {
    let text = SPEC
        .replace("\"madvise\"", &format!("\"{thp}\""))
        .replace("seed = 3", &format!("seed = {seed}"));
    let spec = fraglab_spec::parse_spec(&text, "report-test.toml").unwrap();
    fraglab_sim::timed::run_workload(&spec).unwrap()
}

/// Two runs of the baseline (as `compare --results-dir` names them) and one of the patched
/// configuration.
fn runs() -> Vec<(String, RunResult)> {
    vec![
        ("base-run1".into(), result("madvise", 3)),
        ("base-run2".into(), result("madvise", 4)),
        (format!("{PATCHED}-run1"), result("always", 3)),
    ]
}

fn compare() -> CompareReport {
    CompareReport {
        configs: vec!["base".into(), "new <x>".into()],
        runs: 3,
        rows: vec![CompareRow {
            metric: "THP fault alloc".into(),
            stat: "Amean".into(),
            values: vec![100.0, 150.0],
            change_pct: vec![None, Some(50.0)],
            significant: vec![false, true],
            per_run: vec![],
            unmeasured: vec![],
        }],
        scale: vec![],
    }
}

/// The figures the page's script draws, as the page holds them.
fn figures(html: &str) -> Vec<Value> {
    let at = html.find("const FIGS = ").expect("the figures") + "const FIGS = ".len();
    let line = &html[at..at + html[at..].find('\n').unwrap()];
    serde_json::from_str::<Value>(line.trim_end_matches(';'))
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn kinds(figs: &[Value]) -> Vec<&str> {
    figs.iter().map(|f| f["kind"].as_str().unwrap()).collect()
}

/// The non-null y values of a trace.
fn drawn_points(trace: &Value) -> usize {
    trace["y"]
        .as_array()
        .map_or(0, |y| y.iter().filter(|v| !v.is_null()).count())
}

#[test]
fn configurations_are_labels_without_the_run_number() {
    assert_eq!(config_label("base-run12"), "base");
    assert_eq!(config_label("dm-1-run3"), "dm-1");
    assert_eq!(config_label("kbuild"), "kbuild");
    assert_eq!(config_label("x-run"), "x-run");
    assert_eq!(config_label("-run1"), "-run1");
    assert_eq!(config_label("a-run1b"), "a-run1b");
}

#[test]
fn every_plot_is_present_with_every_configuration_overlaid() {
    let runs = runs();
    let html = render_html(&runs, Some(&compare()));
    assert!(html.starts_with("<!DOCTYPE html>") && html.ends_with("</html>\n"));
    // Self-contained: the plotting library is inlined once, and nothing but it mentions a URL;
    // no element loads anything.
    assert_eq!(html.matches(PLOTLY_JS).count(), 1);
    let own = html.replace(PLOTLY_JS, "");
    assert!(
        !own.contains("http://") && !own.contains("https://"),
        "a URL in the page"
    );
    assert!(!own.contains(" src=") && !own.contains(" href=") && !own.contains("<link"));
    let figs = figures(&html);
    assert_eq!(
        kinds(&figs),
        [
            "free-by-order",
            "thp-faults",
            "thp-success-per-burst",
            "hugealloc-time",
            "latency",
            "block-counts",
            "pageblocks",
            "pageblocks"
        ]
    );
    let fig = |k: &str| figs.iter().find(|f| f["kind"] == k).unwrap();
    let traces = |k: &str| fig(k)["data"].as_array().unwrap().clone();
    // Free memory by order: 11 panels, both configurations in each, log axes; the baseline's
    // line is the mean of its two runs.
    let free = traces("free-by-order");
    assert_eq!(free.len(), 22);
    assert_eq!(free[0]["name"], "base (mean of 2 runs)");
    assert_eq!(
        free[1]["name"], PATCHED,
        "labels go to plotly as text (it escapes them)"
    );
    assert_eq!(
        (free[20]["xaxis"].as_str(), free[21]["yaxis"].as_str()),
        (Some("x11"), Some("y11"))
    );
    for k in ["yaxis", "yaxis11"] {
        assert_eq!(fig("free-by-order")["layout"][k]["type"], "log");
    }
    assert!(
        free.iter().filter(|t| drawn_points(t) > 0).count() >= 12,
        "most orders have free pages"
    );
    assert_eq!(free[0]["line"]["color"], PALETTE[0]);
    assert_eq!(free[1]["line"]["color"], PALETTE[1]);
    // Every line chart has a series per configuration with points.
    for k in [
        "thp-faults",
        "thp-success-per-burst",
        "hugealloc-time",
        "block-counts",
    ] {
        let t = traces(k);
        for colour in &PALETTE[..2] {
            assert!(
                t.iter()
                    .any(|s| s["line"]["color"] == *colour && drawn_points(s) > 0),
                "{k}: no drawn series in {colour}"
            );
        }
    }
    // Latency CDFs: per (configuration, order, path) a line from 0 to 100 % and its p50/p99
    // markers; a log axis in µs with ticks named in ns/µs/ms.
    let lat = traces("latency");
    let lines: Vec<&Value> = lat.iter().filter(|t| t["mode"] == "lines").collect();
    let marks: Vec<&Value> = lat.iter().filter(|t| t["mode"] == "markers").collect();
    assert_eq!(lines.len(), marks.len());
    let expected: usize = [&runs[..2], &runs[2..]]
        .iter()
        .map(|rs| {
            let mut seen: Vec<(u32, String)> = rs
                .iter()
                .flat_map(|(_, r)| r.fault_latency.iter())
                .filter(|h| h.count > 0)
                .map(|h| (h.order, h.path.clone()))
                .collect();
            seen.sort();
            seen.dedup();
            seen.len()
        })
        .sum();
    assert_eq!(lines.len(), expected);
    for l in &lines {
        let y = l["y"].as_array().unwrap();
        assert_eq!(y.first().unwrap().as_f64(), Some(0.0));
        assert_eq!(y.last().unwrap().as_f64(), Some(100.0));
    }
    for m in &marks {
        let y: Vec<f64> = m["y"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert!(
            y[0] >= 50.0 && y[1] >= 99.0 && y[0] <= y[1],
            "p50/p99 marks on the CDF: {y:?}"
        );
    }
    let lx = &fig("latency")["layout"]["xaxis"];
    assert_eq!(lx["type"], "log");
    assert!(lx["ticktext"].as_array().unwrap().iter().any(|t| t == "1 µs"));
    assert!(lx["ticktext"].as_array().unwrap().iter().any(|t| t == "1 ms"));
    // The pageblock maps: one per configuration, a row per snapshot of its first run, a column
    // per block; the tooltips are built by the page's script.
    let maps: Vec<&Value> = figs.iter().filter(|f| f["kind"] == "pageblocks").collect();
    for (m, r) in maps.iter().zip([&runs[0].1, &runs[2].1]) {
        let pb = &m["pageblocks"];
        assert_eq!(pb["types"].as_array().unwrap().len(), r.pageblock_maps.len());
        assert_eq!(pb["types"][0].as_str().unwrap(), r.pageblock_maps[0].types);
        assert_eq!(pb["fill"][0].as_str().unwrap(), r.pageblock_maps[0].fill);
        assert_eq!(pb["per_col"], 1);
        assert_eq!(m["data"][0]["type"], "heatmap");
        assert_eq!(
            m["data"][0]["y"].as_array().unwrap().len(),
            r.pageblock_maps.len()
        );
    }
    // Enough snapshots to see change: maps between whole seconds (a map every 100 ms of
    // simulated time that has events), not only the 7 of whole seconds.
    let maps_t: Vec<u64> = runs[0].1.pageblock_maps.iter().map(|m| m.t_ns).collect();
    assert!(
        maps_t.len() > 7 && maps_t.iter().any(|t| t % 1_000_000_000 != 0),
        "{maps_t:?}"
    );
    // The summary table: a row per configuration, with THP success and latency quantiles.
    let summary = &html[html.find("<table class=\"summary\"").unwrap()..];
    let summary = &summary[..summary.find("</table>").unwrap()];
    assert_eq!(summary.matches("<tr>").count(), 3);
    assert!(summary.contains("THP success %") && summary.contains("order-0 fault p99"));
    assert!(summary.contains("base</td><td>2</td>"));
    // Escaping: the labels are text, not markup, in the page and in the script's data.
    assert!(html.contains("thp &lt;always&gt; &amp; co") && html.contains("new &lt;x&gt;"));
    assert!(!own.contains("<always>") && !own.contains("<x>"));
    // The compare table marks the significant cell.
    assert!(html.contains("<td class=\"sig\">150.00 *+50.00%*</td>"));
    // Deterministic.
    assert_eq!(html, render_html(&runs, Some(&compare())));
}

#[test]
fn wide_maps_are_downsampled_and_long_runs_thinned() {
    let blocks = 4 * MAX_MAP_COLUMNS + 37;
    let maps: Vec<PageblockMap> = (0..MAX_MAP_ROWS as u64 * 2 + 5)
        .map(|i| PageblockMap {
            t_ns: i * 1_000_000_000,
            types: (0..blocks).map(|b| if b % 5 == 0 { 'u' } else { 'M' }).collect(),
            fill: (0..blocks)
                .map(|b| char::from_digit((b % 10) as u32, 10).unwrap())
                .collect(),
            zones: vec![("DMA32".into(), 0), ("Normal".into(), 2000)],
        })
        .collect();
    let r = RunResult {
        pageblock_maps: maps,
        ..Default::default()
    };
    let html = render_html(&[("big".into(), r)], None);
    let figs = figures(&html);
    let m = figs.iter().find(|f| f["kind"] == "pageblocks").unwrap();
    let pb = &m["pageblocks"];
    assert_eq!(pb["per_col"], 5);
    let rows = pb["types"].as_array().unwrap();
    assert_eq!(rows.len(), MAX_MAP_ROWS);
    let cols = blocks.div_ceil(5);
    assert!(cols <= MAX_MAP_COLUMNS);
    for r in rows {
        let r = r.as_str().unwrap();
        assert_eq!(r.len(), cols);
        // Every column of five holds a mixed Unmovable block: mixed, majority Movable; the last
        // (blocks 4035 and 4036) one of each, a tie the lower migratetype wins.
        assert!(r[..cols - 1].chars().all(|c| c == 'm'), "{r}");
        assert!(r.ends_with('u'));
    }
    // The first and last snapshots are kept.
    let y = m["data"][0]["y"].as_array().unwrap();
    assert_eq!(
        (y[0].as_f64(), y[y.len() - 1].as_f64()),
        (Some(0.0), Some(MAX_MAP_ROWS as f64 * 2.0 + 4.0))
    );
    // Mean fill of blocks 0..5 is (0+1+2+3+4)/5 = 2, of 5..10 is 7.
    assert!(pb["fill"][0].as_str().unwrap().starts_with("27"));
    // The zone boundary at block 2000 is drawn at column 400.
    assert_eq!(m["layout"]["shapes"][0]["x0"].as_f64(), Some(399.5));
}

#[test]
fn renders_in_headless_chromium_with_every_plot_drawn() {
    let Some(bin) = browser::chromium() else {
        eprintln!("SKIPPED renders_in_headless_chromium_with_every_plot_drawn: no chromium binary (apt-get install chromium)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("fraglab-report-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("report.html");
    let runs = runs();
    let html = render_html(&runs, Some(&compare()));
    std::fs::write(&page, &html).unwrap();
    let figs = figures(&html);
    let (dom, plots, shot) = browser::render(&bin, &page);
    // The browser drew every figure, with one trace per series (the heat maps one each).
    assert_eq!(plots.len(), figs.len());
    for (p, f) in plots.iter().zip(&figs) {
        assert_eq!(p.kind, f["kind"].as_str().unwrap());
        assert_eq!(
            p.traces,
            f["data"].as_array().unwrap().len(),
            "{}: traces drawn",
            p.kind
        );
    }
    // Nothing in the drawn page loads from the network (the scripts' text aside: the library
    // holds a link it would draw only with its logo, which the page turns off).
    let mut elements = String::new();
    let mut rest = dom.as_str();
    while let Some(at) = rest.find("<script") {
        elements.push_str(&rest[..at]);
        rest = &rest[at + rest[at..].find("</script>").unwrap() + "</script>".len()..];
    }
    elements.push_str(rest);
    assert!(elements.contains("class=\"main-svg\""), "plotly drew its SVG");
    for attr in ["src=\"http", "href=\"http", "url(http"] {
        assert!(!elements.contains(attr), "the DOM has {attr}");
    }
    // Every plot area shows drawn colour, and the panels of free memory by order with data.
    for (p, f) in plots.iter().zip(&figs) {
        for (i, a) in p.subplots.iter().enumerate() {
            let has_data = f["data"].as_array().unwrap().iter().any(|t| {
                let axis = t["xaxis"].as_str().unwrap_or("x");
                let k = if i == 0 {
                    "x".to_string()
                } else {
                    format!("x{}", i + 1)
                };
                (axis == k || p.kind == "pageblocks") && (drawn_points(t) > 0 || t["type"] == "heatmap")
            });
            let n = shot.coloured(a);
            if has_data {
                assert!(
                    n >= 100,
                    "{} subplot {}: {n} coloured pixels in {a:?}",
                    p.kind,
                    a.id
                );
            }
        }
    }
    // Baseline and patched on the same axes: both colours in the overlaid plots.
    for kind in ["free-by-order", "thp-faults", "latency", "block-counts"] {
        let p = plots.iter().find(|p| p.kind == kind).unwrap();
        for colour in &PALETTE[..2] {
            let n: usize = p.subplots.iter().map(|a| shot.near(a, colour)).sum();
            assert!(n >= 50, "{kind}: {n} pixels of {colour}");
        }
    }
    // The heat maps fill their plot areas, and the script built a tooltip per cell from the
    // map's letters: block, zone, type, fill, time.
    for (p, r) in plots
        .iter()
        .filter(|p| p.kind == "pageblocks")
        .zip([&runs[0].1, &runs[2].1])
    {
        let m = &r.pageblock_maps[0];
        let (mt, mixed) =
            fraglab_spec::result::pageblock::decode_type_char(m.types.chars().next().unwrap()).unwrap();
        let name = ["Unmovable", "Movable", "Reclaimable", "HighAtomic", "Isolate"][mt];
        let fill = m.fill.chars().next().unwrap();
        let tip = p.tip.as_deref().unwrap_or_else(|| panic!("{}: no tooltip", p.id));
        assert!(
            tip.starts_with(&format!("block 0 ({}, pfn ≈ 0–511)<br>{name}", m.zones[0].0)),
            "{tip}"
        );
        assert_eq!(tip.contains("mixed"), mixed, "{tip}");
        assert!(
            tip.contains(&format!("fill {fill}/10")) && tip.ends_with("t = 0 s"),
            "{tip}"
        );
        let a = &p.subplots[0];
        assert!(
            shot.non_white(a) * 10 > a.w * a.h * 9,
            "{}: heat map mostly blank",
            p.id
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn results_without_series_give_a_page_without_plots() {
    // A host result without samples, latencies or maps, and no results at all.
    let host = RunResult {
        engine: "host".into(),
        ..Default::default()
    };
    let html = render_html(&[("host".into(), host)], None);
    assert!(figures(&html).is_empty());
    assert_eq!(html.matches("Nothing to plot in these results.").count(), 4);
    assert!(html.contains("<table class=\"summary\""));
    let none = render_html(&[], None);
    assert!(none.contains("0 run(s) of 0 configuration(s)") && figures(&none).is_empty());
}
