//! `fraglab report`: the page holds every plot with its series (each configuration overlaid, a
//! configuration of several runs as their mean in a min–max band with hidden per-run lines, the
//! THP faults beside their difference from the baseline), the summary table with min–max and
//! log-linear latency quantiles, reads results of an older fraglab (power-of-two buckets),
//! escapes text, loads nothing from the network, downsamples wide pageblock maps, is
//! deterministic, and renders in headless Chromium with every plot drawn at the window's width,
//! the bands filled and the toggle showing the runs instead — checked on screenshots, pixel by
//! pixel, in each plot area (skipped, with the reason printed, where no Chromium is installed;
//! `.ci/run` installs Debian's `chromium`).

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

fn result(thp: &str, seed: u64, burst: &str) -> RunResult {
    let text = SPEC
        .replace("\"madvise\"", &format!("\"{thp}\""))
        .replace("seed = 3", &format!("seed = {seed}"))
        .replace("size = \"32MiB\"", &format!("size = \"{burst}\""));
    let spec = fraglab_spec::parse_spec(&text, "report-test.toml").unwrap();
    fraglab_sim::timed::run_workload(&spec).unwrap()
}

/// Two runs of the baseline (as `compare --results-dir` names them) and one of the patched
/// configuration. The baseline's second run bursts 48 MiB instead of 32: runs of one spec and
/// another seed differ too little in so short a run for their band to show.
fn runs() -> Vec<(String, RunResult)> {
    vec![
        ("base-run1".into(), result("madvise", 3, "32MiB")),
        ("base-run2".into(), result("madvise", 4, "48MiB")),
        (format!("{PATCHED}-run1"), result("always", 3, "32MiB")),
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

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap_or(f64::NAN))
        .collect()
}

fn xs(t: &Value) -> Vec<f64> {
    floats(&t["x"])
}

fn ys(t: &Value) -> Vec<f64> {
    floats(&t["y"])
}

/// Each configuration's line of each series: the runs' mean (in its band) or a one-run
/// configuration's line.
fn centre_lines(traces: &[Value]) -> Vec<&Value> {
    traces
        .iter()
        .filter(|t| t["mode"] != "markers" && (t["meta"] == "mean" || t["meta"] == "both"))
        .collect()
}

/// The baseline's (two runs) series of figure `kind` come as a band (a pair of traces per
/// stretch without a gap: its lower edge, then its upper edge filled down to it), the mean line,
/// then the two runs' lines, hidden; the band holds the runs' values (and the mean where it is
/// their mean); the patched configuration's (one run) as one line.
fn check_bands(kind: &str, t: &[Value]) {
    let (mut bands, mut runs_seen) = (0, 0);
    let mut segs: Vec<(Vec<f64>, Vec<f64>, Vec<f64>)> = Vec::new();
    let inside = |segs: &[(Vec<f64>, Vec<f64>, Vec<f64>)], x: f64, y: f64| {
        segs.iter().any(|(sx, lo, hi)| {
            sx.iter().zip(lo.iter().zip(hi)).any(|(&sx, (&lo, &hi))| {
                // (a configuration's runs end a few ms apart: the band's last x is the first
                // run's) A log axis's band: its lower edge may be null, a run's value 0 (null).
                (sx - x).abs() <= 0.01 * x.abs()
                    && (lo.is_nan() || lo <= y * (1.0 + 1e-9))
                    && y <= hi * (1.0 + 1e-9)
            })
        })
    };
    for (i, tr) in t.iter().enumerate() {
        if tr["mode"] == "markers" {
            // the latency CDFs' p50/p99 marks, shown with the line they mark
            assert!(matches!(tr["meta"].as_str(), Some("mean" | "both")));
            continue;
        }
        match tr["meta"].as_str().unwrap() {
            "band" if tr["fill"] == "tonexty" => {
                bands += 1;
                let lower = &t[i - 1];
                assert_eq!(
                    (lower["meta"].as_str(), lower["fill"].as_str()),
                    (Some("band"), None)
                );
                assert_eq!(tr["legendgroup"], lower["legendgroup"]);
                assert_eq!(xs(tr), xs(lower));
                assert_eq!(
                    tr["fillcolor"], "rgba(31,119,180,0.2)",
                    "{kind}: the baseline's blue"
                );
                let (lo, hi) = (ys(lower), ys(tr));
                assert!(lo.iter().zip(&hi).all(|(l, h)| l <= h), "{kind}: {lo:?} {hi:?}");
                segs.push((xs(tr), lo, hi));
            }
            "band" => assert_eq!(t[i + 1]["fill"], "tonexty", "{kind}: a lower edge alone"),
            "mean" => {
                assert!(!segs.is_empty(), "{kind}: a mean without a band");
                assert_eq!(t[i - 1]["meta"], "band");
                // (the latency CDF's middle line is all the faults', not a mean of the runs')
                if kind != "latency" {
                    for (x, y) in xs(tr).into_iter().zip(ys(tr)).filter(|p| p.1.is_finite()) {
                        assert!(inside(&segs, x, y), "{kind}: mean ({x}, {y}) outside the band");
                    }
                }
                let runs: Vec<&Value> = t[i + 1..].iter().take_while(|r| r["meta"] == "run").collect();
                assert_eq!(runs.len(), 2, "{kind}: the baseline's runs after its mean");
                for r in runs {
                    runs_seen += 1;
                    assert_eq!(r["visible"], false);
                    for (x, y) in xs(r).into_iter().zip(ys(r)).filter(|p| p.1.is_finite()) {
                        assert!(inside(&segs, x, y), "{kind}: run ({x}, {y}) outside the band");
                    }
                }
                segs.clear();
            }
            // (a latency path only one of the baseline's runs took is that run's line)
            "both" if kind != "latency" => {
                assert_ne!(tr["line"]["color"], PALETTE[0], "{kind}: the baseline has 2 runs")
            }
            "both" | "run" => {}
            m => panic!("{kind}: role {m}"),
        }
    }
    assert!(bands > 0, "{kind}: no band");
    assert!(runs_seen > 0, "{kind}: no per-run line");
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
    // line is the mean of its two runs, in their min–max band, with a hidden line per run.
    let free = traces("free-by-order");
    let free_lines = centre_lines(&free);
    assert_eq!(free_lines.len(), 22);
    assert_eq!(free.iter().filter(|t| t["meta"] == "run").count(), 22);
    assert_eq!(free_lines[0]["name"], "base (mean of 2 runs; band: min–max)");
    assert_eq!(
        free_lines[1]["name"], PATCHED,
        "labels go to plotly as text (it escapes them)"
    );
    assert_eq!(
        (free_lines[20]["xaxis"].as_str(), free_lines[21]["yaxis"].as_str()),
        (Some("x11"), Some("y11"))
    );
    for k in ["yaxis", "yaxis11"] {
        assert_eq!(fig("free-by-order")["layout"][k]["type"], "log");
    }
    assert!(
        free_lines.iter().filter(|t| drawn_points(t) > 0).count() >= 12,
        "most orders have free pages"
    );
    assert_eq!(free_lines[0]["line"]["color"], PALETTE[0]);
    assert_eq!(free_lines[1]["line"]["color"], PALETTE[1]);
    // Every line chart has a series per configuration with points, the baseline's in a band.
    for k in [
        "free-by-order",
        "thp-faults",
        "thp-success-per-burst",
        "hugealloc-time",
        "block-counts",
        "latency",
    ] {
        let t = traces(k);
        for colour in &PALETTE[..2] {
            assert!(
                centre_lines(&t)
                    .iter()
                    .any(|s| s["line"]["color"] == *colour && drawn_points(s) > 0),
                "{k}: no drawn series in {colour}"
            );
        }
        check_bands(k, &t);
    }
    // The per-run lines are the runs' own values: the baseline's THP faults so far, run by run.
    let thp = traces("thp-faults");
    let run_lines: Vec<&Value> = thp
        .iter()
        .filter(|t| t["meta"] == "run" && t["xaxis"].is_null())
        .collect();
    assert_eq!(run_lines.len(), 4, "2 runs × 2 series of the baseline");
    for (t, r) in run_lines.iter().zip([&runs[0].1, &runs[1].1]) {
        let want: Vec<f64> = r.samples.iter().map(|s| s.thp_fault_alloc as f64).collect();
        assert_eq!(ys(t), want, "{}", t["name"]);
        assert_eq!(t["visible"], false);
    }
    // Beside it, the patched configuration minus the baseline's mean, sample by sample.
    let diff: Vec<&Value> = thp
        .iter()
        .filter(|t| t["xaxis"] == "x2" && t["yaxis"] == "y2")
        .collect();
    assert_eq!(diff.len(), 2, "one run: one line per series");
    let base_mean = |j: usize, f: fn(&fraglab_spec::result::Sample) -> u64| {
        (f(&runs[0].1.samples[j]) + f(&runs[1].1.samples[j])) as f64 / 2.0
    };
    let mut nonzero = 0;
    for (t, f) in diff.iter().zip([
        (|s: &fraglab_spec::result::Sample| s.thp_fault_alloc) as fn(&_) -> u64,
        |s| s.thp_fault_fallback,
    ]) {
        assert_eq!(t["line"]["color"], PALETTE[1]);
        for (j, y) in ys(t).into_iter().enumerate() {
            let want = f(&runs[2].1.samples[j]) as f64 - base_mean(j, f);
            assert!((y - want).abs() <= 1e-3 * want.abs(), "sample {j}: {y} != {want}");
            nonzero += (want != 0.0) as usize;
        }
    }
    assert!(nonzero > 0, "madvise and always differ");
    let tl = &fig("thp-faults")["layout"];
    assert_eq!(tl["xaxis2"]["matches"], "x");
    // Counts have integer ticks: faults, pageblocks.
    for k in ["thp-faults", "block-counts"] {
        let y = &fig(k)["layout"]["yaxis"];
        let d = y["dtick"].as_f64().unwrap();
        assert!(
            d >= 1.0 && d.fract() == 0.0 && y["tickformat"] == ",d",
            "{k}: {y}"
        );
    }
    // Latency CDFs: per (configuration, order, path) a line from 0 to 100 % and its p50/p99
    // markers; a log axis in µs with ticks named in ns/µs/ms.
    let lat = traces("latency");
    let lines = centre_lines(&lat);
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
    for l in lat.iter().filter(|t| t["mode"] == "lines" && t["meta"] != "band") {
        let y = l["y"].as_array().unwrap();
        assert_eq!(y.first().unwrap().as_f64(), Some(0.0));
        assert_eq!(y.last().unwrap().as_f64(), Some(100.0));
    }
    // The CDF's steps are the log-linear buckets: finer than a power of two where the faults
    // spread over one.
    assert!(
        lines.iter().any(|l| xs(l).windows(2).any(|w| w[1] / w[0] < 1.1)),
        "no CDF step finer than a power of two"
    );
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
    // Full width: no plot has a fixed width.
    for f in &figs {
        assert!(f["layout"]["width"].is_null() && f["layout"]["autosize"] == true);
    }
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
    // With spread: the baseline's row (two runs) gives min–max, the patched one's (one run) not.
    let rows: Vec<&str> = summary.split("<tr>").skip(2).collect();
    assert!(rows[0].matches("class=\"range\"").count() >= 8, "{}", rows[0]);
    // (but for the hugealloc time, over its run's five bursts)
    let header: Vec<&str> = summary
        .split("<tr>")
        .nth(1)
        .unwrap()
        .split("<th>")
        .skip(1)
        .collect();
    let hugealloc = header.iter().position(|h| h.starts_with("Hugealloc")).unwrap();
    let cells: Vec<&str> = rows[1].split("<td").skip(1).collect();
    assert_eq!(cells.len(), header.len());
    for (i, c) in cells.iter().enumerate() {
        assert_eq!(
            c.contains("class=\"range\""),
            i == hugealloc,
            "{}: {c}",
            header[i]
        );
    }
    // The toggle between the mean and the runs' lines.
    assert!(html.contains("id=\"per-run\"") && !html.contains("id=\"per-run\" disabled"));
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
    let (dom, drawn, shot) = browser::render(&bin, &page, browser::WINDOW_WIDTH);
    let plots = &drawn.plots;
    let role_count = |f: &Value, role: &str| {
        f["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["meta"] == role)
            .count()
    };
    // The browser drew every figure, with one trace per shown series (the heat maps one each;
    // the per-run lines hidden): the bands, the means and the one-run lines.
    assert_eq!(plots.len(), figs.len());
    for (p, f) in plots.iter().zip(&figs) {
        assert_eq!(p.kind, f["kind"].as_str().unwrap());
        let shown = f["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["visible"] != false)
            .count();
        assert_eq!(p.traces, shown, "{}: traces drawn", p.kind);
        let (band, mean, run) = (role_count(f, "band"), role_count(f, "mean"), role_count(f, "run"));
        assert_eq!(
            (p.roles.band, p.roles.mean, p.roles.run),
            (band, mean, 0),
            "{}: shown by role",
            p.kind
        );
        // Each band's filled area is drawn (plotly's fill path of its upper edge).
        assert!(
            p.fills >= band / 2,
            "{}: {} fills for {band} band edges",
            p.kind,
            p.fills
        );
        if p.kind != "pageblocks" {
            assert!(band > 0 && run > 0, "{}: no band or runs", p.kind);
        }
    }
    // Full width: at a 1600 px window the page's content and every plot span at least 95 % of
    // it (no fixed 1,100 px plots in a 1,140 px body).
    assert_eq!(drawn.viewport, 1600);
    assert!(
        drawn.main * 100 >= 95 * 1600,
        "main content {} px of 1600",
        drawn.main
    );
    for p in plots {
        for w in [p.div.w, p.svg] {
            assert!(w * 100 >= 95 * 1600 && w <= 1600, "{}: {w} px of 1600", p.kind);
        }
        // The plot areas reach across it: to the right margin where the legend is on top,
        // to the legend where it is on the right.
        let right = p.subplots.iter().map(|a| a.x + a.w).max().unwrap();
        let least = match p.kind.as_str() {
            "free-by-order" | "thp-faults" | "pageblocks" => 95,
            _ => 70,
        };
        assert!(right * 100 >= least * 1600, "{}: plots end at {right} px", p.kind);
    }
    // The THP plot and, beside it, the difference plot share the row.
    let thp = plots.iter().find(|p| p.kind == "thp-faults").unwrap();
    assert_eq!(thp.subplots.len(), 2);
    let (a, b) = (&thp.subplots[0], &thp.subplots[1]);
    assert!(
        a.y.abs_diff(b.y) < 5 && b.x > a.x + a.w,
        "side by side: {a:?} {b:?}"
    );
    // The bands are drawn: the baseline's light blue fills parts of the plots.
    let light = "#d2e4f0"; // #1f77b4 at 0.2 over white
    let band_pixels = |shot: &browser::Shot, plots: &[browser::Plot]| -> usize {
        plots
            .iter()
            .filter(|p| p.kind != "pageblocks")
            .flat_map(|p| p.subplots.iter())
            .map(|a| shot.filled_within(a, light, 6))
            .sum()
    };
    let n = band_pixels(&shot, plots);
    assert!(n >= 10_000, "{n} pixels of the baseline's band");
    // Integer ticks on the counts' axes.
    for (kind, ax) in [("thp-faults", "yaxis"), ("block-counts", "yaxis")] {
        let p = plots.iter().find(|p| p.kind == kind).unwrap();
        let t = &p.ticks[ax];
        assert!(
            t.len() >= 2 && t.iter().all(|v| v.fract() == 0.0),
            "{kind} {ax}: {t:?}"
        );
    }
    // The toggle: opened as #per-run the page clicks it; then the runs' lines show and the
    // bands and means do not.
    let (_, per) = browser::draw(&bin, &page, browser::WINDOW_WIDTH, "per-run");
    let (checked, after) = per.per_run.expect("the page recorded the toggle");
    assert!(checked);
    for (sh, f) in after.iter().zip(&figs) {
        let (kind, r) = (&sh.kind, &sh.roles);
        assert_eq!(
            (r.band, r.mean, r.run, r.both),
            (0, 0, role_count(f, "run"), role_count(f, "both")),
            "{kind}: shown by role with the toggle on"
        );
        assert_eq!(sh.fills, 0, "{kind}: a band drawn with the toggle on");
        if kind != "pageblocks" {
            assert!(sh.traces >= 2, "{kind}: {} traces", sh.traces);
        }
    }
    // ... and the page shows no band colour then.
    let per_shot = browser::screenshot(&bin, &page, browser::WINDOW_WIDTH, drawn.height, "per-run");
    let m = band_pixels(&per_shot, plots);
    eprintln!("band pixels: {n} with the bands, {m} with the toggle on");
    assert!(
        m * 20 < n,
        "{m} pixels of the band's colour with the toggle on, {n} without"
    );
    // Responsive: in a 1000 px window the plots are narrower, still the page's width.
    let (_, narrow) = browser::draw(&bin, &page, 1000, "");
    for p in &narrow.plots {
        for w in [p.div.w, p.svg] {
            assert!(w <= 1000 && w * 100 >= 95 * 1000, "{}: {w} px of 1000", p.kind);
        }
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

/// A result of fault latencies only: `n` faults of order 0 on the fast path from `lo` ns up by
/// `step` ns each.
fn latency_result(seed: u64, lo: u64, step: u64, n: u64) -> RunResult {
    let mut h = fraglab_spec::result::Histogram::default();
    for i in 0..n {
        h.record(lo + i * step);
    }
    RunResult {
        engine: "sim".into(),
        seed,
        fault_latency: vec![h.to_latency(0, "fast")],
        ..Default::default()
    }
}

/// The summary table's p50 and p99 cells of each configuration.
fn quantile_cells(html: &str) -> Vec<Vec<String>> {
    let summary = &html[html.find("<table class=\"summary\"").unwrap()..];
    let summary = &summary[..summary.find("</table>").unwrap()];
    summary
        .split("<tr>")
        .skip(2)
        .map(|row| {
            row.split("<td>")
                .filter(|c| c.starts_with('≤'))
                .map(|c| c.trim_end_matches("</tr>").trim_end_matches("</td>").to_string())
                .collect()
        })
        .collect()
}

#[test]
fn latency_quantiles_differ_within_a_power_of_two() {
    // Both configurations' faults lie in [131, 262) µs: one power of two, where the old
    // summary said "≤ 262 µs" for both. Two runs each (the second 5 µs slower).
    let runs = vec![
        ("a-run1".to_string(), latency_result(1, 140_000, 100, 200)),
        ("a-run2".to_string(), latency_result(2, 145_000, 100, 200)),
        ("b-run1".to_string(), latency_result(1, 200_000, 100, 200)),
        ("b-run2".to_string(), latency_result(2, 205_000, 100, 200)),
    ];
    let html = render_html(&runs, None);
    let cells = quantile_cells(&html);
    assert_eq!(cells.len(), 2);
    // p50: a's faults at 140.0–165.0 µs, median ≈ 152.5 µs; b's ≈ 212.5 µs; each within 1/16.
    let p50 = |c: &str| -> f64 {
        let v = c.trim_start_matches("≤ ").split(' ').next().unwrap();
        v.parse().unwrap()
    };
    let (a, b) = (p50(&cells[0][0]), p50(&cells[1][0]));
    assert!((152.0..=152.5 * 17.0 / 16.0).contains(&a), "{}", cells[0][0]);
    assert!((212.0..=212.5 * 17.0 / 16.0).contains(&b), "{}", cells[1][0]);
    assert_ne!(cells[0][0], cells[1][0]);
    assert_ne!(cells[0][1], cells[1][1], "p99");
    // The runs' own quantiles in brackets: a-run1's p50 ≈ 150 µs, a-run2's ≈ 155 µs.
    assert!(cells[0][0].contains("class=\"range\">("), "{}", cells[0][0]);
    assert!(!html.contains("power-of-two buckets: a result of an older fraglab"));
}

#[test]
fn results_of_an_older_fraglab_render_with_power_of_two_buckets() {
    // Results as fraglab before issue 36 wrote them: no log-linear buckets.
    let old = |mut r: RunResult| {
        let mut v = serde_json::to_value(&r).unwrap();
        for h in v["fault_latency"].as_array_mut().unwrap() {
            h.as_object_mut().unwrap().remove("log_linear_buckets");
        }
        r = serde_json::from_value(v).unwrap();
        assert!(r.fault_latency.iter().all(|h| h.log_linear_buckets.is_none()));
        r
    };
    let a = latency_result(1, 140_000, 100, 200);
    let b = latency_result(1, 200_000, 100, 200);
    let runs = vec![
        ("a".to_string(), old(a.clone())),
        ("b".to_string(), old(b.clone())),
    ];
    let html = render_html(&runs, None);
    let cells = quantile_cells(&html);
    // The power-of-two bucket's upper end (262 µs) capped at the largest value: the same
    // bucket [131, 262) µs for every quantile of both.
    assert_eq!(cells[0], ["≤ 160 µs", "≤ 160 µs"]);
    assert_eq!(cells[1], ["≤ 220 µs", "≤ 220 µs"]);
    assert!(html.contains("power-of-two buckets: a result of an older fraglab"));
    let figs = figures(&html);
    let lat = figs.iter().find(|f| f["kind"] == "latency").unwrap();
    let lines = centre_lines(lat["data"].as_array().unwrap());
    assert_eq!(lines.len(), 2);
    for l in &lines {
        // One power-of-two bucket: from the smallest value to just above the largest.
        assert_eq!(ys(l), [0.0, 100.0]);
    }
    // An old and a new run of one configuration merge at the coarser resolution; a new
    // configuration beside it keeps its fine buckets.
    let mixed = vec![
        ("a-run1".to_string(), old(a.clone())),
        ("a-run2".to_string(), a),
        ("b-run1".to_string(), b),
    ];
    let html = render_html(&mixed, None);
    let cells = quantile_cells(&html);
    assert!(cells[0][0].starts_with("≤ 160 µs"), "{:?}", cells[0]);
    assert!(cells[1][0].starts_with("≤ 21"), "{:?}", cells[1]);
}

#[test]
fn build_axes_count_in_integers() {
    let build = |alloc: i64| fraglab_spec::result::BuildResult {
        vmstat_delta: [("thp_fault_alloc".to_string(), alloc)].into_iter().collect(),
        ..Default::default()
    };
    let runs: Vec<(String, RunResult)> = (0..2)
        .map(|k| {
            (
                format!("k-run{}", k + 1),
                RunResult {
                    seed: k,
                    builds: vec![build(3 + k as i64), build(2), build(4)],
                    ..Default::default()
                },
            )
        })
        .collect();
    let figs = figures(&render_html(&runs, None));
    let b = figs.iter().find(|f| f["kind"] == "builds").unwrap();
    for ax in ["xaxis", "yaxis"] {
        let a = &b["layout"][ax];
        assert_eq!(
            (a["dtick"].as_f64(), a["tickformat"].as_str()),
            (Some(1.0), Some(",d")),
            "{ax}"
        );
    }
    let t = b["data"].as_array().unwrap();
    check_bands("builds", t);
    // The first build: runs 3 and 4 faults, mean 3.5.
    let mean = centre_lines(t)[0];
    assert_eq!((xs(mean)[0], ys(mean)[0]), (1.0, 3.5));
}

/// A blame section of one run: (source, mixed blocks, steals).
fn blamed(sources: &[(&str, u64, u64)]) -> RunResult {
    use fraglab_spec::result::BlameSource;
    RunResult {
        engine: "sim".into(),
        blame: Some(
            sources
                .iter()
                .map(|&(source, mixed, steal)| BlameSource {
                    source: source.into(),
                    events: [("steal".to_string(), steal)].into(),
                    mixed_blocks: mixed,
                    ..Default::default()
                })
                .collect(),
        ),
        ..Default::default()
    }
}

/// Runs with blame (issue 37) get "Who polluted the pageblocks?": per configuration, the
/// sources ranked by the blocks they made mixed, each cell the mean over the runs with their
/// min–max; sources that did nothing are left out; runs without blame get no table.
#[test]
fn blame_ranks_the_sources_per_configuration() {
    let html = render_html(
        &[
            (
                "dm0-run1".into(),
                blamed(&[("boot", 0, 0), ("thp_burst thp", 4, 0), ("kbuild cc1", 100, 700)]),
            ),
            (
                "dm0-run2".into(),
                blamed(&[("boot", 0, 0), ("thp_burst thp", 6, 0), ("kbuild cc1", 120, 800)]),
            ),
            ("plain-run1".into(), RunResult::default()),
        ],
        None,
    );
    assert_eq!(
        html.matches("Who polluted the pageblocks?").count(),
        1,
        "only dm0 has blame"
    );
    let table = &html[html.find("<table class=\"blame\"").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    let cc1 = table.find("<td>kbuild cc1</td>").expect("kbuild ranked");
    let thp = table.find("<td>thp_burst thp</td>").expect("thp ranked");
    assert!(cc1 < thp, "the source that mixed more blocks first: {table}");
    assert!(
        !table.contains("<td>boot</td>"),
        "a source that did nothing is left out"
    );
    assert!(
        table.contains("<td>110 <span class=\"range\">(100–120)</span></td>"),
        "{table}"
    );
    assert!(
        table.contains("<td>750 <span class=\"range\">(700–800)</span></td>"),
        "{table}"
    );
    assert!(table.contains("mean over 2 run(s)"), "{table}");
}
