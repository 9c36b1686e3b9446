//! `fraglab report`: one self-contained HTML page (inline CSS and SVG, no scripts, nothing
//! fetched) from run results (`fraglab_spec::result::RunResult`) and, optionally, a compare
//! table (`CompareReport`). Per run: the pageblock map over time, free memory by order over
//! time, THP success over time and per burst, fault latency distributions per order and path,
//! and the workload's own series (pgbench TPS, vm-scalability throughput). Deterministic: the
//! same inputs give the same bytes.

use std::fmt::Write as _;

use fraglab_spec::result::pageblock::decode_type_char;
use fraglab_spec::result::rows::vmstat_row;
use fraglab_spec::result::{CompareReport, RunResult};

/// Escapes text for HTML and SVG.
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

const PALETTE: [&str; 12] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
    "#17becf", "#393b79", "#637939",
];

/// Colours of the migratetypes in the pageblock map (by migratetype, as
/// `fraglab_spec::result::pageblock::MIGRATETYPE_LETTERS`), and of mixed blocks.
const MT_COLOURS: [(&str, &str); 5] = [
    ("#d62728", "Unmovable"),
    ("#2ca02c", "Movable"),
    ("#1f77b4", "Reclaimable"),
    ("#9467bd", "HighAtomic"),
    ("#7f7f7f", "Isolate"),
];
const MIXED_COLOUR: &str = "#ff7f0e";

/// A number for an axis tick: compact, deterministic.
fn tick(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// One series of a line chart.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// An SVG line chart with axes, five ticks per axis, axis labels and a legend.
pub fn line_chart(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    let (w, h, l, r, t, b) = (760.0, 300.0, 70.0, 170.0, 30.0, 45.0);
    let pts = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, f64::NEG_INFINITY);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if !x0.is_finite() {
        (x0, x1, y1) = (0.0, 1.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let y0 = 0.0;
    if y1 <= y0 {
        y1 = 1.0;
    }
    let px = |x: f64| l + (x - x0) / (x1 - x0) * (w - l - r);
    let py = |y: f64| h - b - (y - y0) / (y1 - y0) * (h - t - b);
    let mut s = format!(
        "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">\
         <text x=\"{}\" y=\"18\" class=\"title\">{}</text>",
        l,
        esc(title)
    );
    let _ = write!(
        s,
        "<line x1=\"{l}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" class=\"axis\"/><line x1=\"{l}\" y1=\"{t}\" x2=\"{l}\" y2=\"{}\" class=\"axis\"/>",
        h - b,
        w - r,
        h - b,
        h - b
    );
    for i in 0..=4 {
        let xv = x0 + (x1 - x0) * i as f64 / 4.0;
        let yv = y0 + (y1 - y0) * i as f64 / 4.0;
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">{}</text>\
             <text x=\"{}\" y=\"{:.1}\" class=\"tick\" text-anchor=\"end\">{}</text>\
             <line x1=\"{l}\" y1=\"{:.1}\" x2=\"{}\" y2=\"{:.1}\" class=\"grid\"/>",
            px(xv),
            h - b + 16.0,
            tick(xv),
            l - 6.0,
            py(yv) + 4.0,
            tick(yv),
            py(yv),
            w - r,
            py(yv)
        );
    }
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{}\" class=\"label\" text-anchor=\"middle\">{}</text>\
         <text x=\"14\" y=\"{:.1}\" class=\"label\" text-anchor=\"middle\" transform=\"rotate(-90 14 {:.1})\">{}</text>",
        (l + w - r) / 2.0,
        h - 8.0,
        esc(x_label),
        (t + h - b) / 2.0,
        (t + h - b) / 2.0,
        esc(y_label)
    );
    for (i, se) in series.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        if !se.points.is_empty() {
            let mut d = String::new();
            for (j, &(x, y)) in se.points.iter().enumerate() {
                let _ = write!(d, "{}{:.1},{:.1}", if j == 0 { "M" } else { " L" }, px(x), py(y));
            }
            let _ = write!(s, "<path d=\"{d}\" stroke=\"{c}\" class=\"line\"/>");
        }
        let ly = t + 4.0 + i as f64 * 15.0;
        let _ = write!(
            s,
            "<rect x=\"{}\" y=\"{:.1}\" width=\"12\" height=\"4\" fill=\"{c}\"/><text x=\"{}\" y=\"{:.1}\" class=\"tick\">{}</text>",
            w - r + 10.0,
            ly,
            w - r + 26.0,
            ly + 5.0,
            esc(&se.name)
        );
    }
    s.push_str("</svg>");
    s
}

/// The pageblock map over time: one row per snapshot (time going down), one column per
/// pageblock (blocks merged into one column when there are more than 1,200), coloured by
/// migratetype, mixed blocks orange, lightness by fill. Equal neighbours are drawn as one rect.
pub fn pageblock_map(r: &RunResult) -> String {
    let maps = &r.pageblock_maps;
    let Some(first) = maps.first() else {
        return "<p class=\"empty\">No pageblock maps in this result.</p>".to_string();
    };
    let n = first.types.len().max(1);
    let per_col = n.div_ceil(1200);
    let cols = n.div_ceil(per_col);
    let cell_w = (1000.0 / cols as f64).clamp(0.5, 8.0);
    let row_h = (300.0 / maps.len() as f64).clamp(3.0, 14.0);
    let (l, t) = (70.0, 24.0);
    let w = l + cols as f64 * cell_w + 10.0;
    let h = t + maps.len() as f64 * row_h + 60.0;
    let mut s = format!(
        "<svg class=\"map\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.1} {h:.1}\">\
         <text x=\"{l}\" y=\"16\" class=\"title\">Pageblock map over time ({n} blocks{}; rows: {} snapshots)</text>",
        if per_col > 1 { format!(", {per_col} per column") } else { String::new() },
        maps.len()
    );
    for (ri, m) in maps.iter().enumerate() {
        let y = t + ri as f64 * row_h;
        if ri % (maps.len().div_ceil(12)).max(1) == 0 {
            let _ = write!(
                s,
                "<text x=\"{}\" y=\"{:.1}\" class=\"tick\" text-anchor=\"end\">{} s</text>",
                l - 4.0,
                y + row_h,
                m.t_ns / 1_000_000_000
            );
        }
        let types: Vec<char> = m.types.chars().collect();
        let fill: Vec<u32> = m.fill.chars().map(|c| c.to_digit(10).unwrap_or(0)).collect();
        // One (colour, opacity step) per column: the majority type of its blocks, mixed if any
        // is, and their mean fill.
        let mut cells: Vec<(&str, u32)> = Vec::with_capacity(cols);
        for c in 0..cols {
            let lo = c * per_col;
            let hi = ((c + 1) * per_col).min(types.len());
            if lo >= hi {
                break;
            }
            let mut counts = [0usize; 5];
            let mut mixed = false;
            let mut f = 0u32;
            for (i, &ch) in types.iter().enumerate().take(hi).skip(lo) {
                if let Some((k, m)) = decode_type_char(ch) {
                    counts[k] += 1;
                    mixed |= m;
                }
                f += fill.get(i).copied().unwrap_or(0);
            }
            let k = (0..5).max_by_key(|&k| (counts[k], usize::MAX - k)).unwrap_or(1);
            let colour = if mixed { MIXED_COLOUR } else { MT_COLOURS[k].0 };
            cells.push((colour, f / (hi - lo) as u32));
        }
        let mut c = 0;
        while c < cells.len() {
            let mut e = c + 1;
            while e < cells.len() && cells[e] == cells[c] {
                e += 1;
            }
            let (colour, f) = cells[c];
            let _ = write!(
                s,
                "<rect x=\"{:.2}\" y=\"{y:.1}\" width=\"{:.2}\" height=\"{row_h}\" fill=\"{colour}\" fill-opacity=\"{:.2}\"/>",
                l + c as f64 * cell_w,
                (e - c) as f64 * cell_w,
                0.15 + 0.85 * f as f64 / 9.0
            );
            c = e;
        }
    }
    let ly = t + maps.len() as f64 * row_h + 20.0;
    let mut x = l;
    for (colour, name) in MT_COLOURS.iter().chain([(MIXED_COLOUR, "mixed")].iter()) {
        let _ = write!(
            s,
            "<rect x=\"{x:.0}\" y=\"{ly:.0}\" width=\"12\" height=\"12\" fill=\"{colour}\"/><text x=\"{:.0}\" y=\"{:.0}\" class=\"tick\">{name}</text>",
            x + 16.0,
            ly + 10.0
        );
        x += 110.0;
    }
    let _ = write!(
        s,
        "<text x=\"{l}\" y=\"{:.0}\" class=\"tick\">lighter = emptier (fill 0–9 tenths of the block in use)</text></svg>",
        ly + 32.0
    );
    s
}

fn free_by_order(r: &RunResult) -> String {
    let series: Vec<Series> = (0..r.samples.first().map_or(0, |s| s.free_by_order.len()))
        .map(|o| Series {
            name: format!("order {o}"),
            points: r
                .samples
                .iter()
                .map(|s| {
                    (
                        s.t_ns as f64 / 1e9,
                        s.free_by_order[o] as f64 * 4096.0 / (1 << 20) as f64,
                    )
                })
                .collect(),
        })
        .collect();
    line_chart(
        "Free memory by order",
        "simulated time (s)",
        "free (MiB)",
        &series,
    )
}

fn thp(r: &RunResult) -> String {
    let mut out = line_chart(
        "THP faults so far",
        "simulated time (s)",
        "faults",
        &[
            Series {
                name: "thp_fault_alloc".into(),
                points: r
                    .samples
                    .iter()
                    .map(|s| (s.t_ns as f64 / 1e9, s.thp_fault_alloc as f64))
                    .collect(),
            },
            Series {
                name: "thp_fault_fallback".into(),
                points: r
                    .samples
                    .iter()
                    .map(|s| (s.t_ns as f64 / 1e9, s.thp_fault_fallback as f64))
                    .collect(),
            },
        ],
    );
    if !r.bursts.is_empty() {
        out.push_str(&line_chart(
            "THP success per burst",
            "burst start (s)",
            "huge faults / faults (%)",
            &[Series {
                name: "THP success %".into(),
                points: r
                    .bursts
                    .iter()
                    .filter(|b| b.faults > 0)
                    .map(|b| (b.start_ns as f64 / 1e9, b.huge as f64 * 100.0 / b.faults as f64))
                    .collect(),
            }],
        ));
        out.push_str(&line_chart(
            "Hugealloc time per burst",
            "burst start (s)",
            "time faulting the burst (ms)",
            &[Series {
                name: "alloc time".into(),
                points: r
                    .bursts
                    .iter()
                    .map(|b| (b.start_ns as f64 / 1e9, b.alloc_ns as f64 / 1e6))
                    .collect(),
            }],
        ));
    }
    out
}

fn latency(r: &RunResult) -> String {
    if r.fault_latency.is_empty() {
        return "<p class=\"empty\">No fault latencies in this result.</p>".into();
    }
    // The fraction of each (order, path)'s faults per log2 bucket: x = log2(ns).
    let series: Vec<Series> = r
        .fault_latency
        .iter()
        .filter(|h| h.count > 0)
        .map(|h| Series {
            name: format!("order {} {} ({})", h.order, h.path, h.count),
            points: h
                .log2_buckets
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(i, &c)| (i as f64, c as f64 * 100.0 / h.count as f64))
                .collect(),
        })
        .collect();
    line_chart(
        "Fault latency distribution per order and path",
        "log2(latency in ns): 10 = 1 µs, 20 = 1 ms",
        "faults in the bucket (%)",
        &series,
    )
}

fn workload(r: &RunResult) -> String {
    let mut out = String::new();
    if let Some(p) = &r.pgbench {
        out.push_str(&line_chart(
            "pgbench TPS over time",
            "simulated time (s)",
            "transactions per second",
            &[Series {
                name: format!("TPS (mean {:.0})", p.mean_tps),
                points: p
                    .tps
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| (i as f64, v as f64))
                    .collect(),
            }],
        ));
    }
    if !r.vm_scalability.is_empty() {
        out.push_str(
            "<table><tr><th>vm-scalability case</th><th>processes</th><th>throughput (KiB/s)</th></tr>",
        );
        for v in &r.vm_scalability {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{:.0}</td></tr>",
                esc(&v.case),
                v.processes,
                v.throughput
            );
        }
        out.push_str("</table>");
    }
    if !r.builds.is_empty() {
        out.push_str(&line_chart(
            "THP fault alloc per build",
            "build",
            "thp_fault_alloc",
            &[Series {
                name: "per build".into(),
                points: r
                    .builds
                    .iter()
                    .enumerate()
                    .map(|(i, b)| {
                        (
                            (i + 1) as f64,
                            vmstat_row("THP fault alloc").value(&b.vmstat_delta) as f64,
                        )
                    })
                    .collect(),
            }],
        ));
    }
    out
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

const CSS: &str = "body{font-family:sans-serif;margin:20px;color:#222}h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc}\
svg{display:block;margin:10px 0}.title{font-size:14px;font-weight:bold}.tick{font-size:11px}.label{font-size:12px}\
.axis{stroke:#333;stroke-width:1}.grid{stroke:#ddd;stroke-width:0.5}.line{fill:none;stroke-width:1.5}\
table{border-collapse:collapse;font-size:12px;margin:10px 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}\
td:nth-child(2),th:nth-child(2){text-align:left}.sig{font-weight:bold;background:#fff3cd}.empty{color:#888}";

/// The whole page: every run (label, result) in order, then the compare table if given.
pub fn render_html(runs: &[(String, RunResult)], compare: Option<&CompareReport>) -> String {
    let mut s = format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>fraglab report</title><style>{CSS}</style></head><body>\
         <h1>fraglab report</h1><p>{} run(s).</p>",
        runs.len()
    );
    if let Some(c) = compare {
        s.push_str("<h2>Compare</h2>");
        s.push_str(&compare_table(c));
    }
    for (label, r) in runs {
        let _ = write!(
            s,
            "<h2>{}</h2><p>spec {}, engine {}, seed {}, {:.1} s simulated</p>",
            esc(label),
            esc(r.spec_name.as_deref().unwrap_or("(unnamed)")),
            esc(&r.engine),
            r.seed,
            r.duration_ns as f64 / 1e9
        );
        s.push_str("<section class=\"pageblocks\">");
        s.push_str(&pageblock_map(r));
        s.push_str("</section><section class=\"free\">");
        s.push_str(&free_by_order(r));
        s.push_str("</section><section class=\"thp\">");
        s.push_str(&thp(r));
        s.push_str("</section><section class=\"latency\">");
        s.push_str(&latency(r));
        s.push_str("</section><section class=\"workload\">");
        s.push_str(&workload(r));
        s.push_str("</section>");
    }
    s.push_str("</body></html>\n");
    s
}
