//! `fraglab report`: one self-contained HTML page from run results
//! (`fraglab_spec::result::RunResult`) and, optionally, a compare table (`CompareReport`).
//!
//! The plots are drawn by plotly.js (its cartesian bundle, vendored in `vendor/plotly/` with its
//! licence and version) inlined into the page at build time: the page fetches nothing when it
//! opens. Results are grouped into configurations by label (`LABEL-runN`, as `fraglab compare
//! --results-dir` names them, belongs to `LABEL`), and every plot overlays the configurations
//! on the same axes, the first (the baseline) in blue; a configuration of several runs is its
//! runs' mean in a min–max band, or (the page's toggle) a line per run. A summary table (THP
//! success, compaction and reclaim work with their min–max, fault latency p50/p99 from the
//! log-linear histograms, from the rows of `fraglab_spec::result::rows`), the compare table,
//! free memory by order (log axes, one panel per order), THP faults over time (beside them each
//! configuration minus the baseline) and per burst, fault latency CDFs (log time axis, p50 and
//! p99 marked), mixed and unmovable pageblocks over time, a time × pfn heat map of every
//! configuration's pageblocks (a tooltip per cell: block, type, fill), and the workloads' own
//! series; the page and its plots span the window's width. Deterministic: the same inputs give
//! the same bytes.

use std::fmt::Write as _;

use fraglab_spec::result::hist::{bucket_range, Histogram};
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

/// The extent (min, max) of the y values of `data`'s traces on `yaxis` ("y", "y2", ...).
fn y_extent(data: &[Value], yaxis: &str) -> Option<(f64, f64)> {
    data.iter()
        .filter(|t| t["yaxis"].as_str().unwrap_or("y") == yaxis)
        .flat_map(|t| t["y"].as_array().into_iter().flatten())
        .filter_map(Value::as_f64)
        .fold(None, |e, v| match e {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })
}

/// A linear y axis (of the traces on `yaxis`) from 0, or from below 0 if a value is negative,
/// with a margin below and above the data (a series of zeros is not hidden under the x axis);
/// integer ticks if `count` (the axis counts things).
fn zero_based(y_label: &str, data: &[Value], yaxis: &str, count: bool) -> Value {
    let (lo, hi) = y_extent(data, yaxis).unwrap_or((0.0, 0.0));
    let (lo, hi) = (lo.min(0.0), hi.max(0.0));
    let m = if hi - lo > 0.0 { hi - lo } else { 1.0 };
    let mut a = axis(y_label, json!({"range": [lo - 0.04 * m, hi + 0.06 * m]}));
    if count {
        merge(&mut a, &int_ticks(hi.max(-lo)));
    }
    a
}

/// Integer ticks for an axis that counts (builds, faults, pageblocks) up to `max`: a step of 1,
/// 2, 5, 10, 20, ... giving at most 8 ticks, labelled as integers (never 1.5).
fn int_ticks(max: f64) -> Value {
    let mut step = 1.0f64;
    'find: for p in 0..19 {
        for m in [1.0, 2.0, 5.0] {
            step = m * 10f64.powi(p);
            if max / step <= 8.0 {
                break 'find;
            }
        }
    }
    json!({"tickmode": "linear", "tick0": 0, "dtick": step, "tickformat": ",d"})
}

/// Adds the keys of the object `extra` to the object `v`.
fn merge(v: &mut Value, extra: &Value) {
    if let (Value::Object(m), Value::Object(e)) = (v, extra) {
        m.extend(e.iter().map(|(k, x)| (k.clone(), x.clone())));
    }
}

/// `#rrggbb` at opacity `a`, as CSS `rgba()`.
fn rgba(hex: &str, a: f64) -> String {
    let ch = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).unwrap_or(0);
    format!("rgba({},{},{},{a})", ch(1), ch(3), ch(5))
}

/// The opacity of a configuration's min–max band.
pub const BAND_ALPHA: f64 = 0.2;

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

/// A layout with the common settings: the page's width (plotly sizes the plot to its `<div>`
/// and redraws it when the window resizes), a fixed height, white background, legend right of
/// the plot.
fn layout(title: &str, height: u32, extra: Value) -> Value {
    let mut l = json!({
        "title": {"text": title, "x": 0.0, "xanchor": "left", "font": {"size": 15}},
        "height": height,
        "autosize": true,
        "margin": {"l": 70, "r": 20, "t": 50, "b": 55},
        "font": {"family": "sans-serif", "size": 12},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "hovermode": "closest",
        // (in the traces' order: plotly reverses it by default where a trace fills to the
        // previous one, as the bands do)
        "legend": {"font": {"size": 11}, "tracegroupgap": 4, "traceorder": "grouped"},
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

/// A series: (x, y) points, `None` where there is no value.
type Series = Vec<(f64, Option<f64>)>;

/// One run's series, with the run's number in its configuration (from 1) and its seed.
struct RunSeries {
    run: usize,
    seed: u64,
    points: Series,
}

/// The series `f` of each run of a configuration.
fn per_run(c: &Config, f: impl Fn(&RunResult) -> Series) -> Vec<RunSeries> {
    c.runs
        .iter()
        .enumerate()
        .map(|(k, r)| RunSeries {
            run: k + 1,
            seed: r.seed,
            points: f(r),
        })
        .collect()
}

/// Runs' series point by point (runs of one configuration share their sample times; a point
/// missing from a shorter run is left out of that point's figures): x, and the mean, minimum
/// and maximum over the runs that have a value (`None` where none has).
struct Spread {
    x: Vec<f64>,
    mean: Vec<Option<f64>>,
    min: Vec<Option<f64>>,
    max: Vec<Option<f64>>,
}

fn spread(per: &[RunSeries]) -> Spread {
    let n = per.iter().map(|p| p.points.len()).max().unwrap_or(0);
    let mut s = Spread {
        x: Vec::with_capacity(n),
        mean: Vec::with_capacity(n),
        min: Vec::with_capacity(n),
        max: Vec::with_capacity(n),
    };
    for j in 0..n {
        s.x.push(
            per.iter()
                .find_map(|p| p.points.get(j).map(|q| q.0))
                .unwrap_or(0.0),
        );
        let ys: Vec<f64> = per
            .iter()
            .filter_map(|p| p.points.get(j).and_then(|q| q.1))
            .collect();
        if ys.is_empty() {
            s.mean.push(None);
            s.min.push(None);
            s.max.push(None);
        } else {
            s.mean.push(Some(amean(&ys)));
            s.min.push(Some(ys.iter().copied().fold(f64::INFINITY, f64::min)));
            s.max
                .push(Some(ys.iter().copied().fold(f64::NEG_INFINITY, f64::max)));
        }
    }
    s
}

/// The y value of the series `pts` (sorted by x) at `x`, linearly between its points, its
/// first or last value before or after it (the runs of a configuration end a few ms apart: a
/// count so far stays at its last value); `None` for an empty series.
fn interpolate(pts: &[(f64, f64)], x: f64) -> Option<f64> {
    let i = pts.partition_point(|p| p.0 < x);
    let Some(b) = pts.get(i) else {
        return pts.last().map(|p| p.1);
    };
    if b.0 == x || i == 0 {
        return Some(b.1);
    }
    let a = pts[i - 1];
    Some(a.1 + (b.1 - a.1) * (x - a.0) / (b.0 - a.0))
}

fn xs(v: &[f64]) -> Vec<Value> {
    v.iter().map(|x| json!(r4(*x))).collect()
}

fn ys(v: &[Option<f64>], positive_only: bool) -> Vec<Value> {
    v.iter()
        .map(|y| match y {
            Some(y) if !positive_only || *y > 0.0 => json!(r4(*y)),
            _ => Value::Null,
        })
        .collect()
}

fn xy(points: &[(f64, Option<f64>)], positive_only: bool) -> (Vec<Value>, Vec<Value>) {
    let x: Vec<f64> = points.iter().map(|p| p.0).collect();
    let y: Vec<Option<f64>> = points.iter().map(|p| p.1).collect();
    (xs(&x), ys(&y, positive_only))
}

/// How one series of a configuration is drawn.
struct Look<'a> {
    /// The configuration's position (its colour; the baseline's lines wider).
    ci: usize,
    label: &'a str,
    /// Keys every trace of the series gets (axes, legend group: the configuration's label
    /// unless given).
    keys: Value,
    /// The series' name after the label ("" for a configuration's only series).
    what: String,
    dash: &'static str,
    markers: bool,
    showlegend: bool,
    /// The hover text after the trace's name, e.g. `%{x} s: %{y} MiB`.
    hover: String,
    /// A line other than the runs' mean in the middle of the band (the latency CDF of all the
    /// runs' faults together), and how to name it.
    centre: Option<(Series, &'static str)>,
}

/// The traces of one series of a configuration, each with its role in `meta` (the page's
/// toggle reads it): with several runs, the min–max band over the runs (its lower edge, then its
/// upper edge filled down to it, `fill: "tonexty"`: role "band"), the mean line ("mean") and,
/// hidden until the toggle shows them instead of band and mean, one line per run ("run"); with
/// one run, its line ("both": shown either way).
fn spread_traces(per: &[RunSeries], positive_only: bool, look: &Look) -> Vec<Value> {
    let col = colour(look.ci);
    let name = if look.what.is_empty() {
        look.label.to_string()
    } else {
        format!("{} {}", look.label, look.what)
    };
    let mode = if look.markers { "lines+markers" } else { "lines" };
    let mut keys = json!({"type": "scatter", "legendgroup": look.label});
    merge(&mut keys, &look.keys);
    let with = |t: Value| {
        let mut k = keys.clone();
        merge(&mut k, &t);
        k
    };
    let hover = |who: &str| format!("{}<br>{}<extra></extra>", esc(who), look.hover);
    let line = |w: f64| json!({"color": col, "width": w, "dash": look.dash});
    let marker = |s: u32| json!({"size": s, "color": col});
    let msize = if look.ci == 0 { 9 } else { 6 };
    let per: Vec<&RunSeries> = per
        .iter()
        .filter(|p| p.points.iter().any(|q| q.1.is_some()))
        .collect();
    if per.len() <= 1 {
        let Some(p) = per.first() else {
            return Vec::new();
        };
        let pts = look.centre.as_ref().map_or(&p.points, |c| &c.0);
        let (x, y) = xy(pts, positive_only);
        return vec![with(json!({
            "mode": mode, "x": x, "y": y, "name": name, "meta": "both", "showlegend": look.showlegend,
            "line": line(width(look.ci)), "marker": marker(msize), "hovertemplate": hover(&name),
        }))];
    }
    let n = per.len();
    let runs: Vec<RunSeries> = per
        .iter()
        .map(|p| RunSeries {
            run: p.run,
            seed: p.seed,
            points: p.points.clone(),
        })
        .collect();
    let mut s = spread(&runs);
    if positive_only {
        // A log axis has no 0: where a run has none (the minimum 0) and another some, the
        // band reaches down to the smallest value of any run's line.
        let floor = runs
            .iter()
            .flat_map(|r| r.points.iter().filter_map(|p| p.1))
            .filter(|v| *v > 0.0)
            .fold(f64::INFINITY, f64::min);
        for (lo, hi) in s.min.iter_mut().zip(&s.max) {
            if hi.is_some_and(|h| h > 0.0) && !lo.is_some_and(|l| l > 0.0) {
                *lo = Some(floor);
            }
        }
    }
    let fill = rgba(col, BAND_ALPHA);
    let x = xs(&s.x);
    let (centre, centre_name) = match &look.centre {
        // (the figure's title says what the line and band are)
        Some((c, _)) => (xy(c, positive_only), format!("{name}, {n} runs")),
        None => (
            (x.clone(), ys(&s.mean, positive_only)),
            format!("{name} (mean of {n} runs; band: min–max)"),
        ),
    };
    // The band, a pair of edges per stretch without a gap (plotly's fill would join the
    // stretches across a gap).
    let mut out = Vec::new();
    let drawn = |j: usize| {
        let ok = |v: Option<f64>| v.is_some_and(|v| !positive_only || v > 0.0);
        ok(s.min[j]) && ok(s.max[j])
    };
    let mut j = 0;
    while j < s.x.len() {
        if !drawn(j) {
            j += 1;
            continue;
        }
        let k = (j..s.x.len()).find(|&k| !drawn(k)).unwrap_or(s.x.len());
        out.push(with(json!({
            "mode": "lines", "x": x[j..k], "y": ys(&s.min[j..k], positive_only), "name": format!("{name}: min of {n} runs"),
            "meta": "band", "showlegend": false, "hoverinfo": "skip", "line": {"width": 0, "color": fill},
        })));
        out.push(with(json!({
            "mode": "lines", "x": x[j..k], "y": ys(&s.max[j..k], positive_only), "name": format!("{name}: max of {n} runs"),
            "meta": "band", "showlegend": false, "hoverinfo": "skip", "line": {"width": 0, "color": fill},
            "fill": "tonexty", "fillcolor": fill,
        })));
        j = k;
    }
    out.push(
        with(json!({
            "mode": mode, "x": centre.0, "y": centre.1, "name": centre_name, "meta": "mean",
            "showlegend": look.showlegend, "line": line(width(look.ci)), "marker": marker(msize),
            "hovertemplate": hover(&format!("{name}, {} of {n} runs", look.centre.as_ref().map_or("mean", |c| c.1))),
        })),
    );
    // The runs' lines: one legend entry for them all (the first run's).
    let seeds: Vec<String> = per.iter().map(|p| p.seed.to_string()).collect();
    for (k, p) in per.iter().enumerate() {
        let (x, y) = xy(&p.points, positive_only);
        let who = format!("{name} run {} (seed {})", p.run, p.seed);
        out.push(with(json!({
            "mode": mode, "x": x, "y": y, "name": format!("{name}: {n} runs (seeds {})", seeds.join(", ")),
            "meta": "run", "visible": false, "showlegend": look.showlegend && k == 0,
            "line": line((width(look.ci) * 0.5).max(1.2)), "marker": marker(5), "hovertemplate": hover(&who),
        })));
    }
    out
}

/// Free memory by order: one panel per order, log y axes (an order with nothing free leaves a
/// gap), every configuration a line (its runs' mean, in their min–max band) in every panel.
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
            let per = per_run(c, |r| {
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
            let mut t = spread_traces(
                &per,
                true,
                &Look {
                    ci: i,
                    label: &c.label,
                    keys: json!({"xaxis": xa, "yaxis": ya}),
                    what: String::new(),
                    dash: "solid",
                    markers: false,
                    showlegend: o == 0,
                    hover: format!("order {o}: %{{x}} s, %{{y}} MiB"),
                    centre: None,
                },
            );
            for tr in &mut t {
                if let Some(w) = tr["line"]["width"].as_f64() {
                    tr["line"]["width"] = json!(w * 0.8);
                }
            }
            data.extend(t);
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
        merge(&mut y, &log_ticks(&data, Some(&ya)));
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
        json!({"rows": rows, "columns": cols, "pattern": "independent", "xgap": 0.2, "ygap": 0.42}),
    );
    extra.insert("annotations".into(), Value::Array(notes));
    let height = 230 * rows as u32 + 110;
    extra.insert("legend".into(), top_legend(height));
    let mut l = layout(
        "Free memory by order (MiB, log scale; a gap: no run had any free)",
        height,
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

/// A legend in a row above the plot area, under the title, of a figure `height` pixels tall.
fn top_legend(height: u32) -> Value {
    json!({"orientation": "h", "x": 0.0, "y": 1.0 - 34.0 / height as f64, "yanchor": "top", "yref": "container", "font": {"size": 12}, "traceorder": "grouped"})
}

/// What the axes of an [`overlay`] count: integer ticks on x (builds) and on y (faults).
#[derive(Clone, Copy, Default)]
struct Counts {
    x: bool,
    y: bool,
}

/// A line chart (title, x label, y label) of one series per configuration (its runs' mean, in
/// their min–max band).
fn overlay(
    kind: &str,
    [title, x_label, y_label]: [&str; 3],
    cfgs: &[Config],
    log_y: bool,
    markers: bool,
    counts: Counts,
    f: impl Fn(&RunResult) -> Series,
) -> Option<Figure> {
    let mut data = Vec::new();
    for (i, c) in cfgs.iter().enumerate() {
        let per = per_run(c, &f);
        data.extend(spread_traces(
            &per,
            log_y,
            &Look {
                ci: i,
                label: &c.label,
                keys: json!({}),
                what: String::new(),
                dash: "solid",
                markers,
                showlegend: true,
                hover: "%{x}: %{y}".into(),
                centre: None,
            },
        ));
    }
    if data.is_empty() {
        return None;
    }
    let y = if log_y {
        let mut y = axis(y_label, json!({"type": "log"}));
        merge(&mut y, &log_ticks(&data, None));
        y
    } else {
        zero_based(y_label, &data, "y", counts.y)
    };
    let mut x = axis(x_label, json!({}));
    if counts.x {
        let hi = data
            .iter()
            .flat_map(|t| t["x"].as_array().into_iter().flatten())
            .filter_map(Value::as_f64)
            .fold(0.0, f64::max);
        merge(&mut x, &int_ticks(hi));
    }
    Some(Figure {
        kind: kind.into(),
        data,
        layout: layout(title, 360, json!({"xaxis": x, "yaxis": y})),
        pageblocks: None,
    })
}

/// Two sample series per configuration on one time axis, the first solid and the second
/// dashed (`what`: their names; `value(sample, k)`: series k's value), each its runs' mean in
/// their min–max band; `y_label` titles the y axis (integer ticks: these count things), `unit`
/// follows the value in the hover text. With `diff` (and more than one configuration), a
/// second panel beside it: each other configuration minus the baseline (its runs' values
/// minus the baseline's mean at the same time, in the same band and per-run lines).
#[allow(clippy::too_many_arguments)]
fn two_series_over_time(
    cfgs: &[Config],
    kind: &str,
    title: &str,
    what: [&str; 2],
    y_label: &str,
    unit: &str,
    diff: bool,
    value: impl Fn(&fraglab_spec::result::Sample, usize) -> u64,
) -> Option<Figure> {
    let series = |c: &Config, k: usize| {
        per_run(c, |r| {
            r.samples
                .iter()
                .map(|s| (s.t_ns as f64 / 1e9, Some(value(s, k) as f64)))
                .collect()
        })
    };
    let dashes = ["solid", "dash"];
    let mut data = Vec::new();
    for (i, c) in cfgs.iter().enumerate() {
        for (k, name) in what.iter().enumerate() {
            data.extend(spread_traces(
                &series(c, k),
                false,
                &Look {
                    ci: i,
                    label: &c.label,
                    keys: json!({}),
                    what: name.to_string(),
                    dash: dashes[k],
                    markers: false,
                    showlegend: true,
                    hover: format!("%{{x}} s: %{{y}}{unit}"),
                    centre: None,
                },
            ));
        }
    }
    if data.is_empty() {
        return None;
    }
    let diff = diff && cfgs.len() > 1;
    let base = &cfgs[0].label;
    let mut n_diff = 0;
    if diff {
        for (k, name) in what.iter().enumerate() {
            let b = spread(&series(&cfgs[0], k));
            let base_pts: Vec<(f64, f64)> =
                b.x.iter()
                    .zip(&b.mean)
                    .filter_map(|(x, m)| m.map(|m| (*x, m)))
                    .collect();
            for (i, c) in cfgs.iter().enumerate().skip(1) {
                let per: Vec<RunSeries> = series(c, k)
                    .into_iter()
                    .map(|p| RunSeries {
                        points: p
                            .points
                            .iter()
                            .map(|&(x, y)| (x, y.zip(interpolate(&base_pts, x)).map(|(y, b)| y - b)))
                            .collect(),
                        ..p
                    })
                    .collect();
                let mut t = spread_traces(
                    &per,
                    false,
                    &Look {
                        ci: i,
                        label: &c.label,
                        keys: json!({"xaxis": "x2", "yaxis": "y2"}),
                        what: format!("{name} − {base}"),
                        dash: dashes[k],
                        markers: false,
                        showlegend: false,
                        hover: format!("%{{x}} s: %{{y}}{unit} (%{{customdata}} % of {})", esc(base)),
                        centre: None,
                    },
                );
                // The difference as a percentage of the baseline's value, for the hover text.
                for tr in t.iter_mut().filter(|t| t["meta"] != "band") {
                    let pct: Vec<Value> = tr["x"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .zip(tr["y"].as_array().into_iter().flatten())
                        .map(|(x, y)| {
                            match (x.as_f64().and_then(|x| interpolate(&base_pts, x)), y.as_f64()) {
                                (Some(b), Some(d)) if b != 0.0 => json!(format!("{:+.2}", d * 100.0 / b)),
                                _ => json!("n/a"),
                            }
                        })
                        .collect();
                    tr["customdata"] = json!(pct);
                }
                n_diff += t.len();
                data.extend(t);
            }
        }
    }
    let mut extra = json!({
        "xaxis": axis("simulated time (s)", json!({})),
        "yaxis": zero_based(y_label, &data, "y", true),
    });
    if n_diff > 0 {
        let split = 0.56;
        let mut y2 = zero_based(&format!("minus {} ({y_label})", esc(base)), &data, "y2", false);
        merge(
            &mut y2,
            &json!({"anchor": "x2", "zeroline": true, "zerolinecolor": "#666", "zerolinewidth": 1}),
        );
        merge(
            &mut extra,
            &json!({
                "xaxis": axis("simulated time (s)", json!({"domain": [0.0, split], "anchor": "y"})),
                "xaxis2": axis("simulated time (s)", json!({"domain": [split + 0.08, 1.0], "anchor": "y2", "matches": "x"})),
                "yaxis2": y2,
                "legend": top_legend(DIFF_HEIGHT),
                "margin": {"l": 70, "r": 20, "t": 110, "b": 55},
                "annotations": [
                    {"text": "<b>so far</b>", "xref": "x domain", "yref": "y domain", "x": 0.0, "y": 1.0,
                     "xanchor": "left", "yanchor": "bottom", "showarrow": false},
                    {"text": format!("<b>difference: each configuration − {}</b> (band: its runs − {}'s mean)", esc(base), esc(base)),
                     "xref": "x2 domain", "yref": "y2 domain", "x": 0.0, "y": 1.0,
                     "xanchor": "left", "yanchor": "bottom", "showarrow": false},
                ],
            }),
        );
    }
    let mut l = layout(title, if n_diff > 0 { DIFF_HEIGHT } else { 360 }, extra);
    if n_diff > 0 {
        l["title"]["y"] = json!(0.985);
        l["title"]["yanchor"] = json!("top");
    }
    Some(Figure {
        kind: kind.into(),
        data,
        layout: l,
        pageblocks: None,
    })
}

/// Height of a figure with a difference panel (its legend above the plots).
const DIFF_HEIGHT: u32 = 440;

/// THP faults so far: allocated (solid) and fallen back (dashed), per configuration, and
/// beside them each configuration minus the baseline.
fn thp_faults(cfgs: &[Config]) -> Option<Figure> {
    two_series_over_time(
        cfgs,
        "thp-faults",
        "THP faults so far (solid: thp_fault_alloc, dashed: thp_fault_fallback)",
        ["thp_fault_alloc", "thp_fault_fallback"],
        "faults",
        " faults",
        true,
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

/// A run's fault latencies by (order, path), in its result's order (a key listed twice merged).
fn run_latency(r: &RunResult) -> Vec<(u32, String, Histogram)> {
    let mut out: Vec<(u32, String, Histogram)> = Vec::new();
    for h in &r.fault_latency {
        match out.iter_mut().find(|(o, p, _)| *o == h.order && *p == h.path) {
            Some((_, _, m)) => m.merge(&h.histogram()),
            None => out.push((h.order, h.path.clone(), h.histogram())),
        }
    }
    out
}

/// A configuration's fault latencies merged over its runs, by (order, path); the log-linear
/// buckets where every run has them, else (a result of an older fraglab among them) the
/// power-of-two ones.
fn merged_latency(c: &Config) -> Vec<(u32, String, Histogram)> {
    let mut out: Vec<(u32, String, Histogram)> = Vec::new();
    for r in &c.runs {
        for (order, path, h) in run_latency(r) {
            match out.iter_mut().find(|(o, p, _)| *o == order && *p == path) {
                Some((_, _, m)) => m.merge(&h),
                None => out.push((order, path, h)),
            }
        }
    }
    out.retain(|(_, _, h)| h.count > 0);
    out.sort_by_key(|a| (a.0, path_rank(&a.1)));
    out
}

/// Fault latencies of `order` over every path in `hs`, merged.
fn of_order(hs: &[(u32, String, Histogram)], order: u32) -> Histogram {
    let mut h = Histogram::default();
    for (_, _, m) in hs.iter().filter(|(o, _, _)| *o == order) {
        h.merge(m);
    }
    h
}

const PATHS: [&str; 4] = ["fast", "after_kswapd", "direct_compaction", "direct_reclaim"];
const DASHES: [&str; 5] = ["solid", "dot", "dash", "dashdot", "longdash"];

fn path_rank(p: &str) -> usize {
    PATHS.iter().position(|q| *q == p).unwrap_or(PATHS.len())
}

/// The CDF of `h` (in %) at the ends of the buckets `first..=last` of resolution `sub_bits`
/// (its buckets coarsened to it): 0 before the first, then the share at or below each
/// bucket's end.
fn cdf(h: &Histogram, sub_bits: u32, first: usize, last: usize) -> Vec<Option<f64>> {
    let b = h.coarsened(sub_bits);
    let total = b.iter().fold(0u64, |a, n| a.saturating_add(*n));
    if total == 0 {
        return vec![None; last + 2 - first];
    }
    let mut seen = b.iter().take(first).fold(0u64, |a, n| a.saturating_add(*n));
    let mut out = vec![Some(seen as f64 * 100.0 / total as f64)];
    for i in first..=last {
        seen = seen.saturating_add(b.get(i).copied().unwrap_or(0));
        out.push(Some(seen as f64 * 100.0 / total as f64));
    }
    out
}

/// Fault latency CDFs: one panel per folio order, a line per (configuration, path) — colour by
/// configuration, dash by path — on a log time axis, p50 (circle) and p99 (diamond) marked
/// where each line reaches them (`Histogram::quantile_ns`: the upper end of the log-linear
/// bucket holding it, within 1/16 above it). A configuration of several runs: the CDF of all
/// its runs' faults in the min–max band of the runs' CDFs (per-run lines with the toggle).
fn latency(cfgs: &[Config]) -> Option<Figure> {
    let merged: Vec<Vec<(u32, String, Histogram)>> = cfgs.iter().map(merged_latency).collect();
    let runs: Vec<Vec<Vec<(u32, String, Histogram)>>> = cfgs
        .iter()
        .map(|c| c.runs.iter().map(|r| run_latency(r)).collect())
        .collect();
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
    let mut coarse = false;
    for (pi, &order) in orders.iter().enumerate() {
        let k = pi + 1;
        let suffix = if k == 1 { String::new() } else { k.to_string() };
        for (ci, c) in cfgs.iter().enumerate() {
            for (_, path, h) in merged[ci].iter().filter(|m| m.0 == order) {
                let sb = h.sub_bits;
                coarse |= sb == 0;
                let first = h.buckets.iter().position(|&b| b > 0).unwrap_or(0);
                let last = h.buckets.iter().rposition(|&b| b > 0).unwrap_or(0);
                // The line's vertices: the first bucket's start (or the smallest value), then
                // each bucket's end (the last one's: just above the largest value).
                let mut x = vec![bucket_range(first, sb).0.max(h.min_ns).max(1) as f64 / 1e3];
                for b in first..=last {
                    x.push(bucket_range(b, sb).1.min(h.max_ns).saturating_add(1) as f64 / 1e3);
                }
                lo = lo.min(x[0]);
                hi = hi.max(x[x.len() - 1]);
                let mine: Vec<RunSeries> = runs[ci]
                    .iter()
                    .enumerate()
                    .filter_map(|(ri, rl)| {
                        let rh = rl.iter().find(|(o, p, _)| *o == order && p == path)?;
                        (rh.2.count > 0).then(|| RunSeries {
                            run: ri + 1,
                            seed: c.runs[ri].seed,
                            points: x.iter().copied().zip(cdf(&rh.2, sb, first, last)).collect(),
                        })
                    })
                    .collect();
                let centre: Series = x.iter().copied().zip(cdf(h, sb, first, last)).collect();
                let what = format!("· order {order} {path} ({} faults)", h.count);
                let dash = DASHES[path_rank(path).min(DASHES.len() - 1)];
                let group = format!("{}·{order}·{path}", c.label);
                let traces = spread_traces(
                    &mine,
                    false,
                    &Look {
                        ci,
                        label: &c.label,
                        keys: json!({"xaxis": format!("x{suffix}"), "yaxis": format!("y{suffix}"), "legendgroup": group}),
                        what: what.clone(),
                        dash,
                        markers: false,
                        showlegend: true,
                        hover: "≤ %{x} µs: %{y} %".into(),
                        centre: Some((centre, "all faults")),
                    },
                );
                let role = if traces.len() > 1 { "mean" } else { "both" };
                data.extend(traces);
                // The quantile markers, on the line's vertices.
                let name = format!("{} {what}", c.label);
                let mut mx = Vec::new();
                let mut my = Vec::new();
                let mut mt = Vec::new();
                for (q, label) in [(0.5, "p50"), (0.99, "p99")] {
                    let ns = h.quantile_ns(q);
                    let b = h.quantile_bucket(q).unwrap_or(last);
                    let cum = h
                        .buckets
                        .iter()
                        .take(b + 1)
                        .fold(0u64, |a, n| a.saturating_add(*n));
                    mx.push(json!(r4(ns.saturating_add(1) as f64 / 1e3)));
                    my.push(json!(r4(cum as f64 * 100.0 / h.count as f64)));
                    mt.push(json!(format!("{label} ≤ {}", fmt_ns(ns))));
                }
                data.push(json!({
                    "type": "scatter", "mode": "markers", "x": mx, "y": my, "text": mt, "meta": role,
                    "xaxis": format!("x{suffix}"), "yaxis": format!("y{suffix}"),
                    "legendgroup": group, "showlegend": false,
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
    // The same decades on every panel: the first vertex down, the last up.
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
        &format!(
            "Fault latency CDFs (colour: configuration, dash: path — solid fast, dotted after kswapd, dashed direct compaction, dash-dot direct reclaim; ● p50, ◆ p99)<br>\
             <span style=\"font-size:12px\">several runs: the CDF of all their faults in the min–max band of the runs' own; {}</span>",
            if coarse {
                "power-of-two buckets: a result of an older fraglab"
            } else {
                "16 buckets per power of two"
            }
        ),
        (300 * n as u32 + 110).max(380),
        Value::Object(extra),
    );
    l["title"]["font"]["size"] = json!(13);
    l["margin"]["t"] = json!(75);
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
        false,
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
        Counts::default(),
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
        Counts::default(),
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
        Counts::default(),
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
        Counts { x: true, y: true },
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

/// The smallest and largest of `v`, if any.
fn min_max(v: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    v.into_iter().fold(None, |e, x| match e {
        None => Some((x, x)),
        Some((lo, hi)) => Some((lo.min(x), hi.max(x))),
    })
}

/// A table cell's spread: ` (min–max)` in `f`'s format, if there is more than one sample.
fn range_note(r: Option<(f64, f64)>, n: usize, f: fn(f64) -> String) -> String {
    match r {
        Some((lo, hi)) if n > 1 => format!(" <span class=\"range\">({}–{})</span>", f(lo), f(hi)),
        _ => String::new(),
    }
}

/// The blame columns of [`blame_tables`]: (header, what it counts).
const BLAME_COLUMNS: [(&str, &str); 9] = [
    ("mixed", "pageblocks its events made mixed"),
    (
        "cblk",
        "pageblocks compaction could not empty because of its pages",
    ),
    (
        "thp_fail",
        "THP faults that failed after their compaction met its pages in such a block",
    ),
    ("steal", "steals (docs/model §6.4)"),
    (
        "claim_p",
        "claims of a block with pages of the old type left (§6.3.2c)",
    ),
    ("claim_w", "whole free blocks claimed"),
    (
        "nofb",
        "pages placed in a block of another type without a fallback",
    ),
    ("pc_unmov", "block-device page cache in non-Movable blocks (§33)"),
    ("c_fail", "migrate-scanner failures on its pages"),
];

/// One blame column of a source in a run (None: the run has no such source).
fn blame_value(r: &RunResult, source: &str, col: usize) -> Option<f64> {
    let b = r.blame.as_ref()?.iter().find(|b| b.source == source)?;
    let ev = |k: &str| b.events.get(k).copied().unwrap_or(0);
    Some(match col {
        0 => b.mixed_blocks,
        1 => b.compact_blocked_blocks,
        2 => b.thp_fault_fail,
        3 => ev("steal"),
        4 => ev("claim_partial"),
        5 => ev("claim_whole"),
        6 => ev("no_fallback"),
        7 => ev("pagecache_unmovable"),
        _ => ev("compact_blocked"),
    } as f64)
}

/// "Who polluted the pageblocks?": per configuration whose runs have a blame section
/// (`[run] blame`, docs/blame.md), its sources ranked by the blocks they made mixed, then the
/// blocks compaction could not empty because of them: each cell the mean over the runs and
/// their min–max. Sources that did nothing in any run are left out. Empty without blame.
fn blame_tables(cfgs: &[Config]) -> String {
    let mut s = String::new();
    for c in cfgs {
        let runs: Vec<&RunResult> = c.runs.iter().copied().filter(|r| r.blame.is_some()).collect();
        if runs.is_empty() {
            continue;
        }
        let mut sources: Vec<&str> = Vec::new();
        for r in &runs {
            for b in r.blame.as_ref().into_iter().flatten() {
                if !sources.contains(&b.source.as_str()) {
                    sources.push(&b.source);
                }
            }
        }
        let mean = |src: &str, col: usize| {
            let v: Vec<f64> = runs
                .iter()
                .map(|r| blame_value(r, src, col).unwrap_or(0.0))
                .collect();
            (amean(&v), v)
        };
        sources.retain(|src| (0..BLAME_COLUMNS.len()).any(|col| mean(src, col).0 > 0.0));
        sources.sort_by(|a, b| {
            let key = |src: &str| (mean(src, 0).0, mean(src, 1).0, mean(src, 2).0);
            key(b)
                .partial_cmp(&key(a))
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(a.cmp(b))
        });
        let _ = write!(
            s,
            "<table class=\"blame\"><caption>Who polluted the pageblocks? <b style=\"color:{}\">{}</b>: sources ranked by the blocks they made mixed (mean over {} run(s), min–max in brackets)</caption><tr><th>source</th>",
            colour(cfgs.iter().position(|x| x.label == c.label).unwrap_or(0)),
            esc(&c.label),
            runs.len()
        );
        for (h, what) in BLAME_COLUMNS {
            let _ = write!(s, "<th title=\"{}\">{h}</th>", esc(what));
        }
        s.push_str("</tr>");
        for src in &sources {
            let _ = write!(s, "<tr><td>{}</td>", esc(src));
            for col in 0..BLAME_COLUMNS.len() {
                let (m, v) = mean(src, col);
                let _ = write!(
                    s,
                    "<td>{:.0}{}</td>",
                    m,
                    range_note(min_max(v.iter().copied()), v.len(), |x| format!("{x:.0}"))
                );
            }
            s.push_str("</tr>");
        }
        if sources.is_empty() {
            let _ = write!(
                s,
                "<tr><td colspan=\"{}\">no source made a block impure</td></tr>",
                BLAME_COLUMNS.len() + 1
            );
        }
        s.push_str("</table>");
    }
    s
}

/// The summary table: per configuration, THP success, compaction and reclaim work and fault
/// latency p50/p99, from the rows of `fraglab_spec::result::rows` (Amean over the samples:
/// builds with kbuild iterations, else runs, with their min–max) and the merged latency
/// histograms (with the min–max of the runs' own quantiles); every other configuration's
/// change against the first.
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
    // Per sample: THP success where the sample faulted THPs at all.
    let thp_success_range = |i: usize| {
        min_max(
            values(&samples[i], "THP fault alloc")
                .iter()
                .zip(values(&samples[i], "THP fault fallback"))
                .filter(|(a, f)| **a + **f > 0.0)
                .map(|(a, f)| a * 100.0 / (a + f)),
        )
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
    // (header, value and min–max over the samples per configuration, lower is better, format)
    type Col = (
        String,
        Vec<(Option<f64>, Option<(f64, f64)>)>,
        bool,
        fn(f64) -> String,
    );
    let num = |v: f64| format!("{v:.0}");
    let pct = |v: f64| format!("{v:.1}");
    let mut cols: Vec<Col> = Vec::new();
    cols.push((
        "THP success %".into(),
        (0..cfgs.len())
            .map(|i| (thp_success(i), thp_success_range(i)))
            .collect(),
        false,
        pct,
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
                let per: Vec<f64> = if name.is_empty() {
                    values(&samples[i], "Compact daemon scanned migrate")
                        .iter()
                        .zip(values(&samples[i], "Compact daemon scanned free"))
                        .map(|(a, b)| a + b)
                        .collect()
                } else {
                    values(&samples[i], name).to_vec()
                };
                (Some(amean(&per)), min_max(per))
            })
            .collect();
        cols.push((h.into(), v, name != "THP fault alloc", num));
    }
    if has_bursts {
        cols.push((
            "Hugealloc time per burst (ms)".into(),
            (0..cfgs.len())
                .map(|i| {
                    let v = values(&samples[i], "Hugealloc Time (us)");
                    (Some(amean(v) / 1e3), min_max(v.iter().map(|x| x / 1e3)))
                })
                .collect(),
            true,
            |v| format!("{v:.2}"),
        ));
    }
    let mut s = String::from(
        "<table class=\"summary\"><caption>Summary per configuration: Amean over the samples (kbuild builds, else runs; hugealloc time: bursts) and, in brackets, their min–max; \
         latency quantiles of every fault of the order over all runs (the upper end of the log-linear bucket holding it, within 1/16 above it; a power-of-two bucket's for results of an older fraglab) \
         and, in brackets, the min–max of each run's own; (±x%) = change of the mean against the first configuration</caption><tr><th>configuration</th><th>runs</th><th>samples</th>",
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
        for (h, v, lower_better, f) in &cols {
            let n = if h.starts_with("Hugealloc") {
                values(&samples[i], "Hugealloc Time (us)").len()
            } else {
                n_samples(i)
            };
            match v[i] {
                (None, _) => s.push_str("<td>n/a</td>"),
                (Some(x), range) => {
                    let change = match (i, v[0].0) {
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
                    let _ = write!(s, "<td>{}{}{change}</td>", f(x), range_note(range, n, *f));
                }
            }
        }
        let per_run: Vec<Vec<(u32, String, Histogram)>> = c.runs.iter().map(|r| run_latency(r)).collect();
        let merged = merged_latency(c);
        for &o in &orders {
            let h = of_order(&merged, o);
            if h.count == 0 {
                s.push_str("<td>n/a</td><td>n/a</td>");
                continue;
            }
            for q in [0.5, 0.99] {
                let runs: Vec<u64> = per_run
                    .iter()
                    .map(|rl| of_order(rl, o))
                    .filter(|rh| rh.count > 0)
                    .map(|rh| rh.quantile_ns(q))
                    .collect();
                let range = match min_max(runs.iter().map(|&v| v as f64)) {
                    Some((lo, hi)) if runs.len() > 1 => format!(
                        " <span class=\"range\">({}–{})</span>",
                        fmt_ns(lo as u64),
                        fmt_ns(hi as u64)
                    ),
                    _ => String::new(),
                };
                let _ = write!(s, "<td>≤ {}{range}</td>", fmt_ns(h.quantile_ns(q)));
            }
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>");
    s
}

/// vm-scalability throughput per case and configuration (Amean over runs, and their
/// min–max), if any ran.
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
        "<table><caption>vm-scalability throughput (KiB/s, mean over runs and their min–max)</caption><tr><th>case</th>",
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
                let _ = write!(
                    s,
                    "<td>{:.0}{}</td>",
                    amean(&v),
                    range_note(min_max(v.iter().copied()), v.len(), |x| format!("{x:.0}"))
                );
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

const CSS: &str = "body{font-family:sans-serif;margin:0;color:#222}main{box-sizing:border-box;width:100%;padding:0 20px 20px 20px}\
h1{font-size:22px;margin:16px 0 10px 0}h2{font-size:18px;border-bottom:1px solid #ccc;margin-top:28px}.plot{width:100%;margin:8px 0 18px 0}\
.toolbar{position:sticky;top:0;z-index:10;background:#fff;padding:6px 0;border-bottom:1px solid #e6e6e6;font-size:13px}\
.toolbar label{cursor:pointer}.toolbar .hint{color:#666;margin-left:10px}\
table{border-collapse:collapse;font-size:12px;margin:10px 0}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}\
td:nth-child(2),th:nth-child(2){text-align:left}table.summary td:nth-child(2){text-align:right}td.cfg{text-align:left;font-weight:bold}\
caption{text-align:left;padding:4px 0;color:#444}.sig{font-weight:bold;background:#fff3cd}.empty{color:#888}.range{color:#666;font-size:11px}\
.better{color:#1a7f37}.worse{color:#c62828}.same{color:#888}.mtkey{font-size:12px;margin:-10px 0 14px 70px}\
.mtkey span{display:inline-block;width:12px;height:12px;margin:0 4px -2px 12px;border:1px solid #999}";

/// The page's script: builds the pageblock heat maps from their compact cells, draws every
/// figure (sized to the page's width, redrawn when the window resizes), wires the toggle
/// between the runs' mean in its min–max band and the per-run lines (the traces' `meta`:
/// "band", "mean", "run" or "both"), then records on `<body>` (`data-plots`, read by the tests)
/// the window's and the page's width, each figure's box and drawn width, its subplots' plot areas (in page
/// pixels), its traces drawn, band fills and visible traces by role, a heat map's first
/// tooltip, each axis's tick values, and the page height. Opened as `report.html#per-run`, the
/// page clicks the toggle once drawn (a link to the per-run view) and records the same after it
/// (`per_run`).
const SCRIPT: &str = r##"
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
  return Plotly.newPlot(f.id, f.data, f.layout, {displaylogo: false, responsive: true, modeBarButtonsToRemove: ["select2d", "lasso2d"]});
});
const TOGGLE = document.getElementById("per-run");
function setPerRun(on) {
  return Promise.all(FIGS.map((f) => {
    const gd = document.getElementById(f.id);
    const vis = gd.data.map((t) => t.meta === "run" ? on : (t.meta === "band" || t.meta === "mean") ? !on : (t.visible === undefined ? true : t.visible));
    return Plotly.restyle(gd, {visible: vis});
  }));
}
let switching = Promise.resolve();
if (TOGGLE) {
  TOGGLE.checked = false;
  TOGGLE.addEventListener("change", () => { switching = setPerRun(TOGGLE.checked); });
}
function state(f) {
  const gd = document.getElementById(f.id);
  const roles = {band: 0, mean: 0, run: 0, both: 0, other: 0};
  for (const t of gd._fullData) {
    if (t.visible !== true) continue;
    const m = gd.data[t.index].meta;
    roles[m in roles ? m : "other"] += 1;
  }
  const fills = Array.from(gd.querySelectorAll("path.js-fill")).filter((p) => (p.getAttribute("d") || "").length > 8).length;
  return {traces: gd.querySelectorAll("g.trace, g.hm").length, roles, fills};
}
Promise.all(drawn).then(async () => {
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
    const ticks = {};
    for (const [k, a] of Object.entries(gd._fullLayout)) {
      if (/^[xy]axis\d*$/.test(k) && a && a._vals) ticks[k] = a._vals.map((v) => v.x);
    }
    const svg = Math.round(gd.querySelector(".main-svg").getBoundingClientRect().width);
    return Object.assign({id: f.id, kind: f.kind, div, svg, subplots, tip, ticks}, state(f));
  });
  const main = document.querySelector("main").getBoundingClientRect();
  const mainEl = document.querySelector("main"), cs = getComputedStyle(mainEl);
  const content = mainEl.getBoundingClientRect().width - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
  const report = {height: document.documentElement.scrollHeight, viewport: window.innerWidth, main: Math.round(content), plots: out};
  if (TOGGLE && location.hash === "#per-run") {
    TOGGLE.click();
    await switching;
    report.per_run = {checked: TOGGLE.checked, plots: FIGS.map((f) => Object.assign({id: f.id, kind: f.kind}, state(f)))};
  }
  document.body.setAttribute("data-plots", JSON.stringify(report));
});
"##;

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
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>fraglab report</title><style>{CSS}</style></head><body><main>\
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
    s.push_str(
        ". Plots by plotly.js (inlined; hover for values, drag to zoom, double-click to reset). \
         A configuration of several runs is drawn as the mean of its runs (fault latency: the CDF of all its runs' faults) \
         in a shaded band from their minimum to their maximum at each point; the toggle below shows each run's line instead.</p>",
    );
    let multi = cfgs.iter().any(|c| c.runs.len() > 1);
    let _ = write!(
        s,
        "<div class=\"toolbar\"><label><input type=\"checkbox\" id=\"per-run\"{}> show each run's line instead of the mean and its min–max band</label><span class=\"hint\">{}</span></div>",
        if multi { "" } else { " disabled" },
        if multi {
            "(report.html#per-run opens the page this way)"
        } else {
            "(every configuration has one run)"
        }
    );
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
    sec("Pageblocks", maps, &mut figs, blame_tables(&cfgs));
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
        "<script>/* plotly.js {PLOTLY_VERSION} (MIT, Plotly, Inc.) */\n{PLOTLY_JS}\n</script><script>const FIGS = {};\n{SCRIPT}</script></main></body></html>\n",
        figures_json(&figs)
    );
    s
}
