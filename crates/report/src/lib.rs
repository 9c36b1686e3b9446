//! `fraglab report`: one self-contained HTML page from run results
//! (`fraglab_spec::result::RunResult`) and, optionally, a compare table (`CompareReport`).
//!
//! The plots are drawn by plotly.js (its cartesian bundle, vendored in `vendor/plotly/` with its
//! licence and version) inlined into the page at build time: the page fetches nothing when it
//! opens. Results are grouped into configurations by label (`LABEL-runN`, as `fraglab compare
//! --results-dir` names them, belongs to `LABEL`), and every plot overlays the configurations
//! on the same axes, the first (the baseline) in blue: a summary table (THP success,
//! compaction and reclaim work, fault latency p50/p99, from the rows of
//! `fraglab_spec::result::rows`), the compare table, free memory by order (log axes, one panel
//! per order), THP faults over time and per burst, fault latency CDFs (log time axis, p50 and
//! p99 marked), mixed and unmovable pageblocks over time, a time × pfn heat map of every
//! configuration's pageblocks (a tooltip per cell: block, type, fill), and the workloads' own
//! series. Deterministic: the same inputs give the same bytes.

use std::fmt::Write as _;

use fraglab_spec::result::hist::Histogram;
use fraglab_spec::result::pageblock::{decode_type_char, PAGEBLOCK_PAGES};
use fraglab_spec::result::rows::{amean, samples_of, values, vmstat_row};
use fraglab_spec::result::{CompareReport, RunResult};
use serde_json::{json, Value};

/// plotly.js's minified cartesian bundle, inlined into every page.
pub const PLOTLY_JS: &str = include_str!("../vendor/plotly/plotly-cartesian.min.js");
/// Its version (vendor/plotly/package.json).
pub const PLOTLY_VERSION: &str = "4.1.1";

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Configuration colours, in order (the first is the baseline's).
pub const PALETTE: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
    "#17becf",
];

fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Line width of configuration `i`: the baseline's wider, so that where another configuration
/// draws the same values on top of it the baseline still shows as an outline.
fn width(i: usize) -> f64 {
    if i == 0 {
        4.0
    } else {
        2.0
    }
}

/// A linear y axis from 0 with a margin below and above the data (a series of zeros is not
/// hidden under the x axis).
fn zero_based(y_label: &str, data: &[Value]) -> Value {
    let max = data
        .iter()
        .flat_map(|t| t["y"].as_array().into_iter().flatten())
        .filter_map(Value::as_f64)
        .fold(0.0, f64::max);
    let m = if max > 0.0 { max } else { 1.0 };
    axis(y_label, json!({"range": [-0.04 * m, 1.06 * m]}))
}

/// Colours of the pageblock map's cells by migratetype (in the kernel's order, as
/// `fraglab_spec::result::pageblock::MIGRATETYPE_LETTERS`) and of mixed blocks.
pub const MT_COLOURS: [(&str, &str); 6] = [
    ("#d62728", "Unmovable"),
    ("#2ca02c", "Movable"),
    ("#1f77b4", "Reclaimable"),
    ("#9467bd", "HighAtomic"),
    ("#7f7f7f", "Isolate"),
    ("#ff7f0e", "mixed"),
];

/// Width of every plot, in CSS pixels.
const WIDTH: u32 = 1100;
/// At most this many columns in a pageblock map: wider maps merge neighbouring blocks.
pub const MAX_MAP_COLUMNS: usize = 1000;
/// At most this many snapshots (rows) in a pageblock map: more are thinned evenly.
pub const MAX_MAP_ROWS: usize = 240;

/// The configuration a result labelled `label` belongs to: `LABEL-runN` (as `fraglab compare
/// --results-dir` writes) belongs to `LABEL`, any other label is its own.
pub fn config_label(label: &str) -> &str {
    if let Some((base, n)) = label.rsplit_once("-run") {
        if !base.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) {
            return base;
        }
    }
    label
}

/// One configuration: its label and its runs, in the order given.
pub struct Config<'a> {
    pub label: String,
    pub runs: Vec<&'a RunResult>,
}

/// The runs grouped by [`config_label`], configurations in order of first appearance.
pub fn group(runs: &[(String, RunResult)]) -> Vec<Config<'_>> {
    let mut out: Vec<Config> = Vec::new();
    for (label, r) in runs {
        let c = config_label(label);
        match out.iter_mut().find(|g| g.label == c) {
            Some(g) => g.runs.push(r),
            None => out.push(Config {
                label: c.to_string(),
                runs: vec![r],
            }),
        }
    }
    out
}

/// One plotly figure: a `<div>` and the data and layout `Plotly.newPlot` draws in it.
struct Figure {
    /// What it shows (the div's `data-plot`, stable for tests).
    kind: String,
    data: Vec<Value>,
    layout: Value,
    /// A pageblock map, built into a heat map by the page's script.
    pageblocks: Option<Value>,
}

/// A layout with the common settings: fixed size, white background, legend right of the plot.
fn layout(title: &str, height: u32, extra: Value) -> Value {
    let mut l = json!({
        "title": {"text": title, "x": 0.0, "xanchor": "left", "font": {"size": 15}},
        "width": WIDTH,
        "height": height,
        "autosize": false,
        "margin": {"l": 70, "r": 20, "t": 50, "b": 55},
        "font": {"family": "sans-serif", "size": 12},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "hovermode": "closest",
        "legend": {"font": {"size": 11}, "tracegroupgap": 4},
    });
    if let (Value::Object(m), Value::Object(e)) = (&mut l, extra) {
        m.extend(e);
    }
    l
}

/// An axis with rounded ticks and light grid lines.
fn axis(title: &str, extra: Value) -> Value {
    let mut a = json!({
        "title": {"text": title},
        "showline": true,
        "linecolor": "#444",
        "gridcolor": "#e6e6e6",
        "zeroline": false,
        "ticks": "outside",
        "automargin": true,
        "nticks": 8,
    });
    if let (Value::Object(m), Value::Object(e)) = (&mut a, extra) {
        m.extend(e);
    }
    a
}

/// Rounded ticks for a log axis over the positive values of `data`'s traces on `yaxis`
/// (all traces when `None`): powers of ten over wide ranges, 1-3, 1-2-5 or finer steps over
/// narrow ones, so that every panel has a few labelled ticks and none crowds.
fn log_ticks(data: &[Value], yaxis: Option<&str>) -> Value {
    let ys = data
        .iter()
        .filter(|t| yaxis.is_none_or(|a| t["yaxis"].as_str().unwrap_or("y") == a))
        .flat_map(|t| t["y"].as_array().into_iter().flatten())
        .filter_map(Value::as_f64)
        .filter(|v| *v > 0.0);
    let (lo, hi) = ys.fold((f64::INFINITY, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if !lo.is_finite() {
        return json!({});
    }
    let d = (hi / lo).log10();
    let mantissas: &[f64] = if d >= 2.5 {
        &[1.0]
    } else if d >= 1.0 {
        &[1.0, 3.0]
    } else if d >= 0.4 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0]
    };
    let mut vals = Vec::new();
    for k in (lo.log10().floor() as i32)..=(hi.log10().ceil() as i32) {
        for m in mantissas {
            let v = r4(m * 10f64.powi(k));
            if v >= lo * 0.98 && v <= hi * 1.02 {
                vals.push(v);
            }
        }
    }
    let text: Vec<String> = vals.iter().map(|v| format!("{v}")).collect();
    json!({"tickmode": "array", "tickvals": vals, "ticktext": text})
}

/// Rounds to 4 significant digits (smaller pages, same plots).
fn r4(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return if v.is_finite() { v } else { 0.0 };
    }
    let mag = 10f64.powi(3 - v.abs().log10().floor() as i32);
    (v * mag).round() / mag
}

/// The mean over runs, point by point, of one series per run (runs of one configuration share
/// their sample times; a point missing from a shorter run is averaged over the runs that have
/// it). `None` values are skipped.
fn mean_series(
    runs: &[&RunResult],
    f: impl Fn(&RunResult) -> Vec<(f64, Option<f64>)>,
) -> Vec<(f64, Option<f64>)> {
    let per: Vec<Vec<(f64, Option<f64>)>> = runs.iter().map(|r| f(r)).collect();
    let n = per.iter().map(Vec::len).max().unwrap_or(0);
    (0..n)
        .map(|j| {
            let x = per.iter().find_map(|p| p.get(j).map(|q| q.0)).unwrap_or(0.0);
            let ys: Vec<f64> = per.iter().filter_map(|p| p.get(j).and_then(|q| q.1)).collect();
            (x, if ys.is_empty() { None } else { Some(amean(&ys)) })
        })
        .collect()
}

fn xy(points: &[(f64, Option<f64>)], positive_only: bool) -> (Vec<Value>, Vec<Value>) {
    let xs = points.iter().map(|p| json!(r4(p.0))).collect();
    let ys = points
        .iter()
        .map(|p| match p.1 {
            Some(y) if !positive_only || y > 0.0 => json!(r4(y)),
            _ => Value::Null,
        })
        .collect();
    (xs, ys)
}

fn runs_note(c: &Config) -> String {
    if c.runs.len() == 1 {
        String::new()
    } else {
        format!(" (mean of {} runs)", c.runs.len())
    }
}

/// Free memory by order: one panel per order, log y axes (an order with nothing free leaves a
/// gap), every configuration a line in every panel.
fn free_by_order(cfgs: &[Config]) -> Option<Figure> {
    let orders = cfgs
        .iter()
        .flat_map(|c| c.runs.iter())
        .filter_map(|r| r.samples.first().map(|s| s.free_by_order.len()))
        .max()
        .filter(|&n| n > 0)?;
    let cols = 4;
    let rows = orders.div_ceil(cols);
    let mut data = Vec::new();
    let mut extra = serde_json::Map::new();
    let mut notes = Vec::new();
    for o in 0..orders {
        let k = o + 1;
        let (xa, ya) = if k == 1 {
            ("x".to_string(), "y".to_string())
        } else {
            (format!("x{k}"), format!("y{k}"))
        };
        for (i, c) in cfgs.iter().enumerate() {
            let pts = mean_series(&c.runs, |r| {
                r.samples
                    .iter()
                    .map(|s| {
                        (
                            s.t_ns as f64 / 1e9,
                            s.free_by_order
                                .get(o)
                                .map(|&p| p as f64 * 4096.0 / (1u64 << 20) as f64),
                        )
                    })
                    .collect()
            });
            let (x, y) = xy(&pts, true);
            data.push(json!({
                "type": "scatter", "mode": "lines", "x": x, "y": y,
                "xaxis": xa, "yaxis": ya,
                "name": format!("{}{}", c.label, runs_note(c)),
                "legendgroup": c.label, "showlegend": o == 0,
                "line": {"color": colour(i), "width": width(i) * 0.8},
                "hovertemplate": format!("{} · order {o}<br>%{{x}} s: %{{y}} MiB<extra></extra>", esc(&c.label)),
            }));
        }
        let suffix = if k == 1 { String::new() } else { k.to_string() };
        let row = o / cols;
        extra.insert(
            format!("xaxis{suffix}"),
            axis(
                if row == rows - 1 || o + cols >= orders {
                    "simulated time (s)"
                } else {
                    ""
                },
                json!({"anchor": format!("y{suffix}"), "nticks": 5}),
            ),
        );
        let mut y = axis(
            if o % cols == 0 { "free (MiB)" } else { "" },
            json!({"type": "log", "anchor": format!("x{suffix}")}),
        );
        if let (Value::Object(m), Value::Object(t)) = (&mut y, log_ticks(&data, Some(&ya))) {
            m.extend(t);
        }
        extra.insert(format!("yaxis{suffix}"), y);
        notes.push(json!({
            "text": format!("<b>order {o}</b> ({} KiB)", 4u64 << o),
            "xref": format!("x{suffix} domain"), "yref": format!("y{suffix} domain"),
            "x": 0.5, "y": 1.0, "xanchor": "center", "yanchor": "bottom", "showarrow": false,
            "font": {"size": 12},
        }));
    }
    extra.insert(
        "grid".into(),
        json!({"rows": rows, "columns": cols, "pattern": "independent", "xgap": 0.28, "ygap": 0.42}),
    );
    extra.insert("annotations".into(), Value::Array(notes));
    extra.insert(
        "legend".into(),
        json!({"orientation": "h", "x": 0.0, "y": 1.0, "yanchor": "bottom", "yref": "container", "font": {"size": 12}}),
    );
    let mut l = layout(
        "Free memory by order (MiB, log scale; a gap = none free)",
        220 * rows as u32 + 110,
        Value::Object(extra),
    );
    l["margin"] = json!({"l": 70, "r": 20, "t": 90, "b": 50});
    l["title"]["y"] = json!(0.985);
    l["title"]["yanchor"] = json!("top");
    Some(Figure {
        kind: "free-by-order".into(),
        data,
        layout: l,
        pageblocks: None,
    })
}

/// A line chart (title, x label, y label) of one series per configuration.
fn overlay(
    kind: &str,
    [title, x_label, y_label]: [&str; 3],
    cfgs: &[Config],
    log_y: bool,
    markers: bool,
    f: impl Fn(&RunResult) -> Vec<(f64, Option<f64>)>,
) -> Option<Figure> {
    let mut data = Vec::new();
    for (i, c) in cfgs.iter().enumerate() {
        let pts = mean_series(&c.runs, &f);
        if pts.iter().all(|p| p.1.is_none()) {
            continue;
        }
        let (x, y) = xy(&pts, log_y);
        data.push(json!({
            "type": "scatter", "mode": if markers { "lines+markers" } else { "lines" },
            "x": x, "y": y, "name": format!("{}{}", c.label, runs_note(c)),
            "line": {"color": colour(i), "width": width(i)}, "marker": {"size": if i == 0 { 9 } else { 6 }},
            "hovertemplate": format!("{}<br>%{{x}}: %{{y}}<extra></extra>", esc(&c.label)),
        }));
    }
    if data.is_empty() {
        return None;
    }
    let y = if log_y {
        let mut y = axis(y_label, json!({"type": "log"}));
        if let (Value::Object(m), Value::Object(t)) = (&mut y, log_ticks(&data, None)) {
            m.extend(t);
        }
        y
    } else {
        zero_based(y_label, &data)
    };
    Some(Figure {
        kind: kind.into(),
        data,
        layout: layout(title, 340, json!({"xaxis": axis(x_label, json!({})), "yaxis": y})),
        pageblocks: None,
    })
}

/// Two sample series per configuration on one time axis, the first solid and the second
/// dashed (`what`: their names; `value(sample, k)`: series k's value), the runs' mean;
/// `y_label` titles the y axis, `unit` follows the name in the hover text.
fn two_series_over_time(
    cfgs: &[Config],
    kind: &str,
    title: &str,
    what: [&str; 2],
    y_label: &str,
    unit: &str,
    value: impl Fn(&fraglab_spec::result::Sample, usize) -> u64,
) -> Option<Figure> {
    let mut data = Vec::new();
    for (i, c) in cfgs.iter().enumerate() {
        for (k, (name, dash)) in what.iter().zip(["solid", "dash"]).enumerate() {
            let pts = mean_series(&c.runs, |r| {
                r.samples
                    .iter()
                    .map(|s| (s.t_ns as f64 / 1e9, Some(value(s, k) as f64)))
                    .collect()
            });
            if pts.is_empty() {
                continue;
            }
            let (x, y) = xy(&pts, false);
            data.push(json!({
                "type": "scatter", "mode": "lines", "x": x, "y": y,
                "name": format!("{} {name}{}", c.label, runs_note(c)),
                "legendgroup": c.label,
                "line": {"color": colour(i), "width": width(i), "dash": dash},
                "hovertemplate": format!("{} {name}{unit}<br>%{{x}} s: %{{y}}<extra></extra>", esc(&c.label)),
            }));
        }
    }
    if data.is_empty() {
        return None;
    }
    let y = zero_based(y_label, &data);
    Some(Figure {
        kind: kind.into(),
        data,
        layout: layout(
            title,
            340,
            json!({"xaxis": axis("simulated time (s)", json!({})), "yaxis": y}),
        ),
        pageblocks: None,
    })
}

/// THP faults so far: allocated (solid) and fallen back (dashed), per configuration.
fn thp_faults(cfgs: &[Config]) -> Option<Figure> {
    two_series_over_time(
        cfgs,
        "thp-faults",
        "THP faults so far (solid: thp_fault_alloc, dashed: thp_fault_fallback)",
        ["thp_fault_alloc", "thp_fault_fallback"],
        "faults",
        "",
        |s, k| {
            if k == 0 {
                s.thp_fault_alloc
            } else {
                s.thp_fault_fallback
            }
        },
    )
}

/// The tick values and labels of a log time axis in µs: 1 ns to 100 s by decades.
fn time_ticks() -> (Vec<Value>, Vec<Value>) {
    let labels = [
        "1 ns", "10 ns", "100 ns", "1 µs", "10 µs", "100 µs", "1 ms", "10 ms", "100 ms", "1 s", "10 s",
        "100 s",
    ];
    let vals = (0..labels.len())
        .map(|i| json!(10f64.powi(i as i32 - 3)))
        .collect();
    (vals, labels.iter().map(|l| json!(l)).collect())
}

/// A latency histogram of the result schema as the spec's [`Histogram`] (to merge runs and
/// take quantiles the one way the project defines them), at its power-of-two resolution (what
/// this page draws; the log-linear buckets newer results also hold are not used yet).
fn hist_of(h: &fraglab_spec::result::LatencyHistogram) -> Histogram {
    let h = h.histogram();
    Histogram {
        buckets: h.log2_buckets(),
        sub_bits: 0,
        ..h
    }
}

/// A configuration's fault latencies merged over its runs, by (order, path).
fn merged_latency(c: &Config) -> Vec<(u32, String, Histogram)> {
    let mut out: Vec<(u32, String, Histogram)> = Vec::new();
    for r in &c.runs {
        for h in &r.fault_latency {
            match out.iter_mut().find(|(o, p, _)| *o == h.order && *p == h.path) {
                Some((_, _, m)) => m.merge(&hist_of(h)),
                None => out.push((h.order, h.path.clone(), hist_of(h))),
            }
        }
    }
    out.retain(|(_, _, h)| h.count > 0);
    out.sort_by_key(|a| (a.0, path_rank(&a.1)));
    out
}

/// A configuration's fault latencies of `order` over every path, merged over its runs.
fn order_latency(c: &Config, order: u32) -> Histogram {
    let mut h = Histogram::default();
    for (_, _, m) in merged_latency(c).iter().filter(|(o, _, _)| *o == order) {
        h.merge(m);
    }
    h
}

const PATHS: [&str; 4] = ["fast", "after_kswapd", "direct_compaction", "direct_reclaim"];
const DASHES: [&str; 5] = ["solid", "dot", "dash", "dashdot", "longdash"];

fn path_rank(p: &str) -> usize {
    PATHS.iter().position(|q| *q == p).unwrap_or(PATHS.len())
}

/// Fault latency CDFs: one panel per folio order, a line per (configuration, path) — colour by
/// configuration, dash by path — on a log time axis, p50 (circle) and p99 (diamond) marked
/// where each line first reaches them (`Histogram::quantile_ns`, a bucket's upper bound).
fn latency(cfgs: &[Config]) -> Option<Figure> {
    let merged: Vec<Vec<(u32, String, Histogram)>> = cfgs.iter().map(merged_latency).collect();
    let mut orders: Vec<u32> = merged.iter().flatten().map(|m| m.0).collect();
    orders.sort_unstable();
    orders.dedup();
    if orders.is_empty() {
        return None;
    }
    let n = orders.len();
    let mut data = Vec::new();
    let mut extra = serde_json::Map::new();
    let mut notes = Vec::new();
    let mut shapes = Vec::new();
    let (tv, tt) = time_ticks();
    let (mut lo, mut hi) = (f64::INFINITY, 0f64);
    for (pi, &order) in orders.iter().enumerate() {
        let k = pi + 1;
        let suffix = if k == 1 { String::new() } else { k.to_string() };
        for (ci, c) in cfgs.iter().enumerate() {
            for (_, path, h) in merged[ci].iter().filter(|m| m.0 == order) {
                let first = h.buckets.iter().position(|&b| b > 0).unwrap_or(0);
                let last = h.buckets.iter().rposition(|&b| b > 0).unwrap_or(0);
                let (mut x, mut y) = (vec![json!(r4((1u64 << first) as f64 / 1e3))], vec![json!(0.0)]);
                lo = lo.min((1u64 << first) as f64 / 1e3);
                hi = hi.max((1u64 << (last + 1)) as f64 / 1e3);
                let mut seen = 0u64;
                for b in first..=last {
                    seen += h.buckets[b];
                    x.push(json!(r4((1u64 << (b + 1)) as f64 / 1e3)));
                    y.push(json!(r4(seen as f64 * 100.0 / h.count as f64)));
                }
                let name = format!("{} · order {order} {path} ({} faults)", c.label, h.count);
                let dash = DASHES[path_rank(path).min(DASHES.len() - 1)];
                data.push(json!({
                    "type": "scatter", "mode": "lines", "x": x, "y": y, "name": name,
                    "xaxis": format!("x{suffix}"), "yaxis": format!("y{suffix}"),
                    "legendgroup": format!("{}·{order}·{path}", c.label),
                    "line": {"color": colour(ci), "width": width(ci), "dash": dash},
                    "hovertemplate": format!("{}<br>≤ %{{x}} µs: %{{y}} %<extra></extra>", esc(&name)),
                }));
                // The quantile markers, on the line's vertices.
                let mut mx = Vec::new();
                let mut my = Vec::new();
                let mut mt = Vec::new();
                for (q, label) in [(0.5, "p50"), (0.99, "p99")] {
                    let ns = h.quantile_ns(q);
                    let b = 63 - ns.max(1).leading_zeros() as usize;
                    let cum: u64 = h.buckets.iter().take(b + 1).sum();
                    mx.push(json!(r4((ns + 1) as f64 / 1e3)));
                    my.push(json!(r4(cum as f64 * 100.0 / h.count as f64)));
                    mt.push(json!(format!("{label} ≤ {}", fmt_ns(ns))));
                }
                data.push(json!({
                    "type": "scatter", "mode": "markers", "x": mx, "y": my, "text": mt,
                    "xaxis": format!("x{suffix}"), "yaxis": format!("y{suffix}"),
                    "legendgroup": format!("{}·{order}·{path}", c.label), "showlegend": false,
                    "marker": {"color": colour(ci), "size": 9, "symbol": ["circle", "diamond"], "line": {"color": "#000", "width": 1}},
                    "hovertemplate": format!("{}<br>%{{text}}<extra></extra>", esc(&name)),
                }));
            }
        }
        extra.insert(
            format!("xaxis{suffix}"),
            axis(
                "fault latency (log scale)",
                json!({"type": "log", "anchor": format!("y{suffix}"), "tickvals": tv, "ticktext": tt}),
            ),
        );
        extra.insert(
            format!("yaxis{suffix}"),
            axis(
                "faults at or below (%)",
                json!({"anchor": format!("x{suffix}"), "range": [0, 102], "tickvals": [0, 25, 50, 75, 99], "ticksuffix": "%"}),
            ),
        );
        notes.push(json!({
            "text": format!("<b>order {order} faults</b>"),
            "xref": format!("x{suffix} domain"), "yref": format!("y{suffix} domain"),
            "x": 0.0, "y": 1.0, "xanchor": "left", "yanchor": "bottom", "showarrow": false,
        }));
        for (q, label) in [(50, "p50"), (99, "p99")] {
            shapes.push(json!({
                "type": "line", "xref": format!("x{suffix} domain"), "yref": format!("y{suffix}"),
                "x0": 0, "x1": 1, "y0": q, "y1": q, "line": {"color": "#888", "width": 1, "dash": "dot"},
            }));
            notes.push(json!({
                "text": label, "xref": format!("x{suffix} domain"), "yref": format!("y{suffix}"),
                "x": 1.0, "y": q, "xanchor": "left", "showarrow": false, "font": {"size": 10, "color": "#555"},
            }));
        }
    }
    // The same decades on every panel: the first bucket's bound down, the last's up.
    let range = json!([lo.max(1e-3).log10().floor(), hi.max(1e-2).log10().ceil()]);
    for pi in 0..n {
        let suffix = if pi == 0 {
            String::new()
        } else {
            (pi + 1).to_string()
        };
        extra[&format!("xaxis{suffix}")]["range"] = range.clone();
    }
    extra.insert(
        "grid".into(),
        json!({"rows": n, "columns": 1, "pattern": "independent", "ygap": 0.35}),
    );
    extra.insert("annotations".into(), Value::Array(notes));
    extra.insert("shapes".into(), Value::Array(shapes));
    let mut l = layout(
        "Fault latency CDFs (colour: configuration, dash: path — solid fast, dotted after kswapd, dashed direct compaction, dash-dot direct reclaim; ● p50, ◆ p99)",
        (300 * n as u32 + 90).max(360),
        Value::Object(extra),
    );
    l["title"]["font"]["size"] = json!(13);
    Some(Figure {
        kind: "latency".into(),
        data,
        layout: l,
        pageblocks: None,
    })
}

/// A latency for a table: ns, µs or ms with three significant digits.
fn fmt_ns(ns: u64) -> String {
    let v = ns as f64;
    let (x, unit) = if v >= 1e9 {
        (v / 1e9, "s")
    } else if v >= 1e6 {
        (v / 1e6, "ms")
    } else if v >= 1e3 {
        (v / 1e3, "µs")
    } else {
        (v, "ns")
    };
    if x >= 100.0 {
        format!("{x:.0} {unit}")
    } else if x >= 10.0 {
        format!("{x:.1} {unit}")
    } else {
        format!("{x:.2} {unit}")
    }
}

/// Per configuration, mixed pageblocks and Unmovable + Reclaimable pageblocks over time.
fn block_counts(cfgs: &[Config]) -> Option<Figure> {
    two_series_over_time(
        cfgs,
        "block-counts",
        "Pageblocks over time (solid: mixed, dashed: Unmovable + Reclaimable)",
        ["mixed", "Unmovable + Reclaimable"],
        "pageblocks",
        " blocks",
        |s, k| {
            if k == 0 {
                s.mixed_blocks
            } else {
                s.blocks_by_type.first().copied().unwrap_or(0) + s.blocks_by_type.get(2).copied().unwrap_or(0)
            }
        },
    )
}

/// The pageblock map of a configuration's first run as a time × pfn heat map: one row per
/// snapshot (at most [`MAX_MAP_ROWS`], thinned evenly), one column per block (at most
/// [`MAX_MAP_COLUMNS`]: wider maps merge neighbours into a column of their majority type, mixed
/// if any is, and their mean fill). Colour by migratetype, mixed blocks orange, lighter =
/// emptier. The cells are sent compactly (a type letter and a fill digit per cell, as the result
/// holds them) and the page's script builds the heat map and its tooltips.
fn pageblock_map(c: &Config, ci: usize, blocks_max: usize) -> Option<Figure> {
    let r = c.runs.first()?;
    let maps = &r.pageblock_maps;
    let first = maps.first()?;
    let n = first.types.chars().count().max(1);
    let per_col = n.div_ceil(MAX_MAP_COLUMNS);
    let cols = n.div_ceil(per_col);
    let picked: Vec<usize> = if maps.len() <= MAX_MAP_ROWS {
        (0..maps.len()).collect()
    } else {
        (0..MAX_MAP_ROWS)
            .map(|i| i * (maps.len() - 1) / (MAX_MAP_ROWS - 1))
            .collect()
    };
    let mut types = Vec::new();
    let mut fills = Vec::new();
    let mut times = Vec::new();
    for &i in &picked {
        let m = &maps[i];
        let t: Vec<char> = m.types.chars().collect();
        let f: Vec<u32> = m.fill.chars().map(|ch| ch.to_digit(10).unwrap_or(0)).collect();
        let (mut ts, mut fs) = (String::with_capacity(cols), String::with_capacity(cols));
        for col in 0..cols {
            let (lo, hi) = (col * per_col, ((col + 1) * per_col).min(t.len()));
            if lo >= hi {
                break;
            }
            let mut counts = [0usize; 5];
            let mut mixed = false;
            let mut fill = 0;
            for (j, &ch) in t.iter().enumerate().take(hi).skip(lo) {
                let (k, mx) = decode_type_char(ch).unwrap_or((4, false));
                counts[k] += 1;
                mixed |= mx;
                fill += f.get(j).copied().unwrap_or(0);
            }
            let k = (0..5).max_by_key(|&k| (counts[k], usize::MAX - k)).unwrap_or(1);
            let letter = ['U', 'M', 'R', 'H', 'I'][k];
            ts.push(if mixed {
                letter.to_ascii_lowercase()
            } else {
                letter
            });
            fs.push(char::from_digit(fill / (hi - lo) as u32, 10).unwrap_or('0'));
        }
        types.push(ts);
        fills.push(fs);
        times.push(r4(m.t_ns as f64 / 1e9));
    }
    // Zone boundaries: a line and the zone's name at its first block.
    let mut shapes = Vec::new();
    let mut notes = Vec::new();
    // Every other name raised a line, so that a small zone's (DMA's 8 blocks) does not cover
    // the next one's.
    for (zi, (name, start)) in first.zones.iter().enumerate() {
        let x = (*start / per_col) as f64 - 0.5;
        if *start > 0 {
            shapes.push(json!({"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1, "line": {"color": "#000", "width": 1.5}}));
        }
        notes.push(json!({"text": name, "xref": "x", "yref": "paper", "x": x + 0.5, "y": 1.0, "xanchor": "left", "yanchor": "bottom", "yshift": 13 * (zi % 2) as i64, "showarrow": false, "font": {"size": 11}}));
    }
    let rows = types.len();
    let height = (rows as u32 * 3).clamp(160, 420) + 110;
    let merged = if per_col > 1 {
        format!(", {per_col} blocks per column")
    } else {
        String::new()
    };
    let title = format!(
        "<span style=\"color:{}\">■</span> Pageblock map: {} (run 1 of {}, seed {}) — {n} blocks{merged}, {} snapshots",
        colour(ci),
        esc(&c.label),
        c.runs.len(),
        r.seed,
        maps.len()
    );
    let mut colorscale = Vec::new();
    for (k, (base, _)) in MT_COLOURS.iter().enumerate() {
        for fill in 0..10 {
            let v = k * 10 + fill;
            let col = lighten(base, 0.15 + 0.85 * fill as f64 / 9.0);
            colorscale.push(json!([v as f64 / 60.0, col]));
            colorscale.push(json!([(v + 1) as f64 / 60.0, col]));
        }
    }
    let heat = json!({
        "type": "heatmap", "x": (0..cols).map(|c| c * per_col).collect::<Vec<_>>(), "y": times,
        "zmin": 0, "zmax": 60, "colorscale": colorscale, "showscale": false,
        "hovertemplate": "%{text}<extra></extra>", "xgap": 0, "ygap": 0,
    });
    Some(Figure {
        kind: "pageblocks".into(),
        data: vec![heat],
        layout: layout(
            &title,
            height,
            json!({
                "xaxis": axis("pageblock, in pfn order (pfn ≈ block × 512)", json!({"range": [-0.5, blocks_max as f64 - 0.5], "showgrid": false})),
                "yaxis": axis("simulated time (s)", json!({"autorange": "reversed", "showgrid": false})),
                "shapes": shapes, "annotations": notes,
                "margin": {"l": 70, "r": 20, "t": 70, "b": 55},
            }),
        ),
        pageblocks: Some(json!({
            "types": types, "fill": fills, "per_col": per_col, "blocks": n,
            "zones": first.zones, "pages_per_block": PAGEBLOCK_PAGES,
        })),
    })
}

/// `base` (a `#rrggbb` colour) at opacity `a` over white.
fn lighten(base: &str, a: f64) -> String {
    let ch = |i: usize| u8::from_str_radix(&base[i..i + 2], 16).unwrap_or(0) as f64;
    let mix = |v: f64| (255.0 - (255.0 - v) * a).round() as u8;
    format!("#{:02x}{:02x}{:02x}", mix(ch(1)), mix(ch(3)), mix(ch(5)))
}

/// The workloads' own series: pgbench TPS, THP fault alloc per build, THP success and
/// allocation time per burst.
fn workload(cfgs: &[Config]) -> Vec<Figure> {
    let mut out = Vec::new();
    out.extend(overlay(
        "thp-success-per-burst",
        [
            "THP success per burst (huge faults / faults, %)",
            "burst start (simulated s)",
            "THP success (%)",
        ],
        cfgs,
        false,
        true,
        |r| {
            r.bursts
                .iter()
                .map(|b| {
                    (
                        b.start_ns as f64 / 1e9,
                        (b.faults > 0).then(|| b.huge as f64 * 100.0 / b.faults as f64),
                    )
                })
                .collect()
        },
    ));
    out.extend(overlay(
        "hugealloc-time",
        [
            "Hugealloc time per burst (time faulting the burst in, ms, log scale)",
            "burst start (simulated s)",
            "time (ms)",
        ],
        cfgs,
        true,
        true,
        |r| {
            r.bursts
                .iter()
                .map(|b| (b.start_ns as f64 / 1e9, Some(b.alloc_ns as f64 / 1e6)))
                .collect()
        },
    ));
    out.extend(overlay(
        "pgbench-tps",
        [
            "pgbench TPS over time",
            "simulated time (s)",
            "transactions per second",
        ],
        cfgs,
        false,
        false,
        |r| {
            r.pgbench.as_ref().map_or(Vec::new(), |p| {
                p.tps
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| (i as f64, Some(v as f64)))
                    .collect()
            })
        },
    ));
    out.extend(overlay(
        "builds",
        ["THP fault alloc per kbuild build", "build", "thp_fault_alloc"],
        cfgs,
        false,
        true,
        |r| {
            r.builds
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    (
                        (i + 1) as f64,
                        Some(vmstat_row("THP fault alloc").value(&b.vmstat_delta) as f64),
                    )
                })
                .collect()
        },
    ));
    out
}

/// The summary table: per configuration, THP success, compaction and reclaim work and fault
/// latency p50/p99, from the rows of `fraglab_spec::result::rows` (Amean over the samples:
/// builds with kbuild iterations, else runs) and the merged latency histograms; every other
/// configuration's change against the first.
pub fn summary_table(cfgs: &[Config]) -> String {
    let samples: Vec<_> = cfgs
        .iter()
        .map(|c| samples_of(&c.runs.iter().map(|r| (*r).clone()).collect::<Vec<_>>()))
        .collect();
    let mean = |i: usize, name: &str| amean(values(&samples[i], name));
    let n_samples = |i: usize| values(&samples[i], "THP fault alloc").len();
    let thp_success = |i: usize| {
        let (a, f) = (mean(i, "THP fault alloc"), mean(i, "THP fault fallback"));
        if a + f > 0.0 {
            Some(a * 100.0 / (a + f))
        } else {
            None
        }
    };
    let mut orders: Vec<u32> = cfgs
        .iter()
        .flat_map(|c| c.runs.iter().flat_map(|r| r.fault_latency.iter()))
        .filter(|h| h.count > 0)
        .map(|h| h.order)
        .collect();
    orders.sort_unstable();
    orders.dedup();
    let has_bursts = samples
        .iter()
        .any(|s| !values(s, "Hugealloc Time (us)").is_empty());
    // (header, value per configuration, lower is better)
    type Col = (String, Vec<Option<f64>>, bool, fn(f64) -> String);
    let num = |v: f64| format!("{v:.0}");
    let mut cols: Vec<Col> = Vec::new();
    cols.push((
        "THP success %".into(),
        (0..cfgs.len()).map(thp_success).collect(),
        false,
        |v| format!("{v:.1}"),
    ));
    for (h, name) in [
        ("THP fault alloc", "THP fault alloc"),
        ("Direct compact stall", "Direct compact stall"),
        ("Kcompactd scanned (migrate + free)", ""),
        ("Pages kswapd scanned", "Pages kswapd scanned"),
        ("Pages direct scanned", "Pages direct scanned"),
        ("Alloc stall", "Alloc stall"),
    ] {
        let v = (0..cfgs.len())
            .map(|i| {
                Some(if name.is_empty() {
                    mean(i, "Compact daemon scanned migrate") + mean(i, "Compact daemon scanned free")
                } else {
                    mean(i, name)
                })
            })
            .collect();
        cols.push((h.into(), v, name != "THP fault alloc", num));
    }
    if has_bursts {
        cols.push((
            "Hugealloc time per burst (ms)".into(),
            (0..cfgs.len())
                .map(|i| Some(mean(i, "Hugealloc Time (us)") / 1e3))
                .collect(),
            true,
            |v| format!("{v:.2}"),
        ));
    }
    let mut s = String::from(
        "<table class=\"summary\"><caption>Summary per configuration: Amean over the samples (kbuild builds, else runs); latency quantiles of every fault of the order over all runs (a log2 bucket's upper bound); (±x%) = change against the first configuration</caption><tr><th>configuration</th><th>runs</th><th>samples</th>",
    );
    for (h, ..) in &cols {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    for o in &orders {
        let _ = write!(s, "<th>order-{o} fault p50</th><th>order-{o} fault p99</th>");
    }
    s.push_str("</tr>");
    for (i, c) in cfgs.iter().enumerate() {
        let _ = write!(
            s,
            "<tr><td class=\"cfg\"><span style=\"color:{}\">■</span> {}</td><td>{}</td><td>{}</td>",
            colour(i),
            esc(&c.label),
            c.runs.len(),
            n_samples(i)
        );
        for (_, v, lower_better, f) in &cols {
            match v[i] {
                None => s.push_str("<td>n/a</td>"),
                Some(x) => {
                    let change = match (i, v[0]) {
                        (0, _) | (_, None) => String::new(),
                        (_, Some(b)) if b != 0.0 => {
                            let p = (x - b) / b * 100.0;
                            let good = if *lower_better { p < 0.0 } else { p > 0.0 };
                            format!(
                                " <span class=\"{}\">({p:+.1}%)</span>",
                                if p == 0.0 {
                                    "same"
                                } else if good {
                                    "better"
                                } else {
                                    "worse"
                                }
                            )
                        }
                        _ => String::new(),
                    };
                    let _ = write!(s, "<td>{}{change}</td>", f(x));
                }
            }
        }
        for &o in &orders {
            let h = order_latency(c, o);
            if h.count == 0 {
                s.push_str("<td>n/a</td><td>n/a</td>");
            } else {
                let _ = write!(
                    s,
                    "<td>≤ {}</td><td>≤ {}</td>",
                    fmt_ns(h.quantile_ns(0.5)),
                    fmt_ns(h.quantile_ns(0.99))
                );
            }
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>");
    s
}

/// vm-scalability throughput per case and configuration (Amean over runs), if any ran.
fn vm_scalability(cfgs: &[Config]) -> String {
    let mut cases: Vec<&str> = Vec::new();
    for c in cfgs {
        for r in &c.runs {
            for v in &r.vm_scalability {
                if !cases.contains(&v.case.as_str()) {
                    cases.push(&v.case);
                }
            }
        }
    }
    if cases.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "<table><caption>vm-scalability throughput (KiB/s, mean over runs)</caption><tr><th>case</th>",
    );
    for c in cfgs {
        let _ = write!(s, "<th>{}</th>", esc(&c.label));
    }
    s.push_str("</tr>");
    for case in cases {
        let _ = write!(s, "<tr><td>{}</td>", esc(case));
        for c in cfgs {
            let v: Vec<f64> = c
                .runs
                .iter()
                .flat_map(|r| r.vm_scalability.iter())
                .filter(|v| v.case == case)
                .map(|v| v.throughput)
                .collect();
            if v.is_empty() {
                s.push_str("<td>n/a</td>");
            } else {
                let _ = write!(s, "<td>{:.0}</td>", amean(&v));
            }
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>");
    s
}

/// The compare table in mmtests' layout (`value (+x.xx%)`; significant cells starred and bold).
pub fn compare_table(c: &CompareReport) -> String {
    let means = CompareReport {
        rows: c
            .rows
            .iter()
            .filter(|r| matches!(r.stat.as_str(), "Amean" | "Hmean" | ""))
            .cloned()
            .collect(),
        ..c.clone()
    };
    format!(
        "{}<details><summary>All rows (Min, Amean/Hmean, Stddev, CoeffVar, Max)</summary>{}</details>",
        table(&means),
        table(c)
    )
}

fn table(c: &CompareReport) -> String {
    let mut s = format!(
        "<table class=\"compare\"><caption>fraglab compare: {} runs per configuration; * = Welch's t-test p &lt; 0.05</caption><tr><th></th><th></th>",
        c.runs
    );
    for cfg in &c.configs {
        let _ = write!(s, "<th>{}</th>", esc(cfg));
    }
    s.push_str("</tr>");
    for row in &c.rows {
        let _ = write!(s, "<tr><td>{}</td><td>{}</td>", esc(&row.stat), esc(&row.metric));
        for (i, v) in row.values.iter().enumerate() {
            if !row.measured(i) {
                s.push_str("<td>n/a</td>");
                continue;
            }
            let p = row.shown_change(i).map_or("n/a".into(), |p| format!("{p:+.2}%"));
            if row.significant.get(i).copied().unwrap_or(false) {
                let _ = write!(s, "<td class=\"sig\">{v:.2} *{p}*</td>");
            } else {
                let _ = write!(s, "<td>{v:.2} ({p})</td>");
            }
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>");
    s
}

const CSS: &str = "body{font-family:sans-serif;margin:20px;color:#222;max-width:1140px}h1{font-size:22px}\
h2{font-size:18px;border-bottom:1px solid #ccc;margin-top:28px}.plot{width:1100px;margin:8px 0 18px 0}\
table{border-collapse:collapse;font-size:12px;margin:10px 0}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}\
td:nth-child(2),th:nth-child(2){text-align:left}table.summary td:nth-child(2){text-align:right}td.cfg{text-align:left;font-weight:bold}\
caption{text-align:left;padding:4px 0;color:#444}.sig{font-weight:bold;background:#fff3cd}.empty{color:#888}\
.better{color:#1a7f37}.worse{color:#c62828}.same{color:#888}.mtkey{font-size:12px;margin:-10px 0 14px 70px}\
.mtkey span{display:inline-block;width:12px;height:12px;margin:0 4px -2px 12px;border:1px solid #999}";

/// The page's script: builds the pageblock heat maps from their compact cells, draws every
/// figure, then records on `<body>` (`data-plots`, read by the tests) each figure's box, its
/// subplots' plot areas (in page pixels), its trace count and a heat map's first tooltip, and
/// the page height.
const SCRIPT: &str = r#"
const MT_NAMES = ["Unmovable", "Movable", "Reclaimable", "HighAtomic", "Isolate"];
function buildHeat(f) {
  const p = f.pageblocks, z = [], text = [];
  const t = f.data[0].y;
  for (let r = 0; r < p.types.length; r++) {
    const zr = [], tr = [], ty = p.types[r], fi = p.fill[r];
    for (let c = 0; c < ty.length; c++) {
      const ch = ty[c], up = ch.toUpperCase(), mixed = ch !== up;
      let k = "UMRHI".indexOf(up);
      if (k < 0) k = 4;
      const fill = fi.charCodeAt(c) - 48;
      zr.push((mixed ? 5 : k) * 10 + fill + 0.5);
      const b0 = c * p.per_col, b1 = Math.min(p.blocks, b0 + p.per_col) - 1;
      let zone = "";
      for (const [name, start] of p.zones) if (b0 >= start) zone = name;
      const pfn = b0 * p.pages_per_block;
      const where = b1 > b0
        ? "blocks " + b0 + "–" + b1 + " (" + zone + ", pfn ≈ " + pfn + "–" + ((b1 + 1) * p.pages_per_block - 1) + ")<br>mostly " + MT_NAMES[k] + (mixed ? ", some mixed" : "") + "<br>mean fill " + fill + "/10"
        : "block " + b0 + " (" + zone + ", pfn ≈ " + pfn + "–" + (pfn + p.pages_per_block - 1) + ")<br>" + MT_NAMES[k] + (mixed ? ", mixed (holds pages of another mobility)" : "") + "<br>fill " + fill + "/10 (" + fill * 10 + "–" + (fill * 10 + 9) + " % in use)";
      tr.push(where + "<br>t = " + t[r] + " s");
    }
    z.push(zr);
    text.push(tr);
  }
  f.data[0].z = z;
  f.data[0].text = text;
}
const drawn = FIGS.map((f) => {
  if (f.pageblocks) buildHeat(f);
  return Plotly.newPlot(f.id, f.data, f.layout, {displaylogo: false, responsive: false, modeBarButtonsToRemove: ["select2d", "lasso2d"]});
});
Promise.all(drawn).then(() => {
  const out = FIGS.map((f) => {
    const gd = document.getElementById(f.id), box = gd.getBoundingClientRect();
    const subplots = Object.values(gd._fullLayout._plots).map((p) => ({
      id: p.id,
      x: Math.round(box.left + window.scrollX + p.xaxis._offset),
      y: Math.round(box.top + window.scrollY + p.yaxis._offset),
      w: Math.round(p.xaxis._length),
      h: Math.round(p.yaxis._length),
    }));
    subplots.sort((a, b) => (a.y - b.y) || (a.x - b.x));
    const div = {x: Math.round(box.left + window.scrollX), y: Math.round(box.top + window.scrollY), w: Math.round(box.width), h: Math.round(box.height)};
    const tip = f.pageblocks ? gd.data[0].text[0][0] : null;
    return {id: f.id, kind: f.kind, traces: gd.querySelectorAll("g.trace, g.hm").length, div, subplots, tip};
  });
  document.body.setAttribute("data-plots", JSON.stringify({height: document.documentElement.scrollHeight, plots: out}));
});
"#;

/// Serialises figures for the page's script (`<` escaped so no string closes the script).
fn figures_json(figs: &[(String, Figure)]) -> String {
    let v: Vec<Value> = figs
        .iter()
        .map(|(id, f)| {
            let mut o = json!({"id": id, "kind": f.kind, "data": f.data, "layout": f.layout});
            if let Some(p) = &f.pageblocks {
                o["pageblocks"] = p.clone();
            }
            o
        })
        .collect();
    serde_json::to_string(&v)
        .unwrap_or_else(|e| panic!("report figures are JSON values: {e}"))
        .replace('<', "\\u003c")
}

/// The whole page: the summary table, the compare table if given, then every plot with the
/// configurations (runs grouped by [`config_label`]) overlaid.
pub fn render_html(runs: &[(String, RunResult)], compare: Option<&CompareReport>) -> String {
    let cfgs = group(runs);
    let mut s = format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>fraglab report</title><style>{CSS}</style></head><body>\
         <h1>fraglab report</h1><p>{} run(s) of {} configuration(s): ",
        runs.len(),
        cfgs.len()
    );
    for (i, c) in cfgs.iter().enumerate() {
        let r = c.runs[0];
        let seeds: Vec<String> = c.runs.iter().map(|r| r.seed.to_string()).collect();
        let _ = write!(
            s,
            "{}<b style=\"color:{}\">{}</b> (spec {}, engine {}, seeds {}, {:.1} s simulated{})",
            if i > 0 { "; " } else { "" },
            colour(i),
            esc(&c.label),
            esc(r.spec_name.as_deref().unwrap_or("(unnamed)")),
            esc(&r.engine),
            seeds.join(", "),
            r.duration_ns as f64 / 1e9,
            match &r.scale {
                Some(sc) => format!(", <b>{}</b>: counters raw", esc(&sc.label)),
                None => String::new(),
            }
        );
    }
    s.push_str(". Plots by plotly.js (inlined; hover for values, drag to zoom, double-click to reset).</p>");
    s.push_str("<h2>Summary</h2>");
    if !cfgs.is_empty() {
        s.push_str(&summary_table(&cfgs));
    }
    if let Some(c) = compare {
        s.push_str("<h2>Compare</h2>");
        s.push_str(&compare_table(c));
    }
    let mut figs: Vec<(String, Figure)> = Vec::new();
    let mut sections: Vec<(&str, Vec<usize>, String)> = Vec::new();
    let add = |figs: &mut Vec<(String, Figure)>, f: Figure| {
        let id = format!("plot{}", figs.len() + 1);
        figs.push((id, f));
        figs.len() - 1
    };
    let mut sec = |name: &'static str, fs: Vec<Figure>, figs: &mut Vec<(String, Figure)>, after: String| {
        let ids = fs.into_iter().map(|f| add(figs, f)).collect();
        sections.push((name, ids, after));
    };
    sec(
        "Free memory",
        free_by_order(&cfgs).into_iter().collect(),
        &mut figs,
        String::new(),
    );
    let mut thp: Vec<Figure> = thp_faults(&cfgs).into_iter().collect();
    thp.extend(workload(&cfgs));
    sec("THP and workloads", thp, &mut figs, vm_scalability(&cfgs));
    sec(
        "Fault latency",
        latency(&cfgs).into_iter().collect(),
        &mut figs,
        String::new(),
    );
    let blocks_max = cfgs
        .iter()
        .filter_map(|c| c.runs.first())
        .filter_map(|r| r.pageblock_maps.first())
        .map(|m| {
            let n = m.types.chars().count().max(1);
            n.div_ceil(n.div_ceil(MAX_MAP_COLUMNS)) * n.div_ceil(MAX_MAP_COLUMNS)
        })
        .max()
        .unwrap_or(1);
    let mut maps: Vec<Figure> = block_counts(&cfgs).into_iter().collect();
    maps.extend(
        cfgs.iter()
            .enumerate()
            .filter_map(|(i, c)| pageblock_map(c, i, blocks_max)),
    );
    sec("Pageblocks", maps, &mut figs, String::new());
    let mut key = String::from("<div class=\"mtkey\">cells:");
    for (base, name) in MT_COLOURS {
        let _ = write!(key, "<span style=\"background:{base}\"></span>{name}");
    }
    key.push_str(" — lighter = emptier (fill: tenths of the block in use)</div>");
    for (name, ids, after) in &sections {
        let _ = write!(s, "<h2>{name}</h2>");
        if ids.is_empty() {
            s.push_str("<p class=\"empty\">Nothing to plot in these results.</p>");
        }
        for &i in ids {
            let (id, f) = &figs[i];
            let _ = write!(
                s,
                "<div class=\"plot\" id=\"{id}\" data-plot=\"{}\"></div>",
                f.kind
            );
            if f.kind == "pageblocks" {
                s.push_str(&key);
            }
        }
        s.push_str(after);
    }
    let _ = write!(
        s,
        "<script>/* plotly.js {PLOTLY_VERSION} (MIT, Plotly, Inc.) */\n{PLOTLY_JS}\n</script><script>const FIGS = {};\n{SCRIPT}</script></body></html>\n",
        figures_json(&figs)
    );
    s
}
