//! `fraglab compare`: the per-sample figures of run results, their summary statistics, Welch's
//! t-test against the baseline, and the table in the field's formats (published-results.md §5).
//!
//! The rows, their samples and the summary statistics are the result schema's
//! (`fraglab_spec::result::rows`, shared with `fraglab run`'s printed rows); this file adds the
//! t-test, the derived rows over configurations and the output formats.
//!
//! The relative change printed is the plain (new − base) / base, as the defrag_mode tables
//! print it (§5.2), whatever the metric's direction — not mmtests' gain. mmtests' compare
//! (bin/lib/MMTests/Compare.pm with VMR::Stat's `pdiff`/`pndiff`) prints `pdiff` = new / base − 1
//! for most data types but `pndiff` = 1 − new / base for its time types (DATA_TIME_*), so there
//! a positive % always means better; here a positive % means higher, and for the metrics
//! [`better`] names that is worse. The table and markdown formats say so under the
//! table ([`convention_note`]), the CSV has a `better` column.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use fraglab_spec::result::{CompareReport, CompareRow, RunResult};
use statrs::distribution::{ContinuousCDF, StudentsT};

pub use fraglab_spec::result::rows::{amean, hmean, samples_of, stddev, summarize, Center, Summary};
use fraglab_spec::result::rows::{direct_compact_success_rate, values, Samples};

/// Picks one statistic of a summary.
type StatFn = fn(&Summary) -> f64;

/// Welch's two-sided t-test: the p-value for "the means of `a` and `b` are equal". `None` when
/// it cannot be computed (fewer than two samples on a side, or both sides without variance and
/// equal means); both sides without variance and different means give p = 0.
pub fn welch_p(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (ma, mb) = (amean(a), amean(b));
    let (va, vb) = (
        stddev(a).powi(2) / a.len() as f64,
        stddev(b).powi(2) / b.len() as f64,
    );
    let se2 = va + vb;
    if se2 == 0.0 {
        return if ma == mb { None } else { Some(0.0) };
    }
    let t = (ma - mb) / se2.sqrt();
    let df = se2 * se2 / (va * va / (a.len() - 1) as f64 + vb * vb / (b.len() - 1) as f64);
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    Some(2.0 * (1.0 - dist.cdf(t.abs())))
}

fn change(v: f64, base: f64) -> Option<f64> {
    (base != 0.0).then(|| (v - base) * 100.0 / base)
}

/// Builds the compare report of configurations `labels` from their results (one `Vec` of runs
/// per configuration), each metric present in any configuration (a configuration without it
/// shows 0).
pub fn compare(labels: &[String], results: &[Vec<RunResult>]) -> CompareReport {
    let per: Vec<Vec<Samples>> = results.iter().map(|r| samples_of(r)).collect();
    // Metric order: first appearance over the configurations.
    let mut metrics: Vec<(String, Center)> = Vec::new();
    for p in &per {
        for (n, c, _) in p {
            if !metrics.iter().any(|(m, _)| m == n) {
                metrics.push((n.clone(), *c));
            }
        }
    }
    let mut rows = Vec::new();
    let get = |p: &Vec<Samples>, name: &str| -> Vec<f64> { values(p, name).to_vec() };
    let mut centers: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (name, center) in &metrics {
        let vals: Vec<Vec<f64>> = per.iter().map(|p| get(p, name)).collect();
        let sums: Vec<Summary> = vals.iter().map(|v| summarize(v, *center)).collect();
        let unmeasured: Vec<usize> = (0..vals.len()).filter(|i| vals[*i].is_empty()).collect();
        let sig: Vec<bool> = vals
            .iter()
            .enumerate()
            .map(|(i, v)| i > 0 && welch_p(&vals[0], v).is_some_and(|p| p < 0.05))
            .collect();
        centers.insert(name.clone(), sums.iter().map(|s| s.center).collect());
        let stat_rows: [(&str, StatFn); 5] = [
            ("Min", |s| s.min),
            (
                match center {
                    Center::Amean => "Amean",
                    Center::Hmean => "Hmean",
                },
                |s| s.center,
            ),
            ("Stddev", |s| s.stddev),
            ("CoeffVar", |s| s.coeffvar),
            ("Max", |s| s.max),
        ];
        for (stat, f) in stat_rows {
            let values: Vec<f64> = sums
                .iter()
                .zip(&vals)
                .map(|(s, v)| if v.is_empty() { 0.0 } else { f(s) })
                .collect();
            let is_center = stat == "Amean" || stat == "Hmean";
            rows.push(CompareRow {
                metric: name.clone(),
                stat: stat.to_string(),
                change_pct: values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        let both = !unmeasured.contains(&i) && !unmeasured.contains(&0);
                        if i == 0 || !both {
                            None
                        } else {
                            change(*v, values[0])
                        }
                    })
                    .collect(),
                significant: if is_center {
                    sig.clone()
                } else {
                    vec![false; values.len()]
                },
                per_run: if is_center { vals.clone() } else { Vec::new() },
                values,
                unmeasured: unmeasured.clone(),
            });
        }
    }
    // Derived rows (§5.1).
    let c = |name: &str| {
        centers
            .get(name)
            .cloned()
            .unwrap_or_else(|| vec![0.0; labels.len()])
    };
    let ratio = |num: &[f64], den: &[f64]| -> Vec<f64> {
        num.iter()
            .zip(den)
            .map(|(n, d)| if *d > 0.0 { n * 100.0 / d } else { 0.0 })
            .collect()
    };
    let mut derived: Vec<(&str, Vec<f64>)> = Vec::new();
    // A derived row is measured where its first input is.
    let thp_unmeasured: Vec<usize> = (0..per.len())
        .filter(|i| values(&per[*i], "THP fault alloc").is_empty())
        .collect();
    if centers.contains_key("THP fault alloc") {
        let (a, f) = (c("THP fault alloc"), c("THP fault fallback"));
        let tot: Vec<f64> = a.iter().zip(&f).map(|(x, y)| x + y).collect();
        derived.push(("THP fault fail rate %", ratio(&f, &tot)));
        // The mean over samples of the per-sample ratio, not the ratio of the means.
        let rates: Vec<f64> = per
            .iter()
            .map(|p| {
                direct_compact_success_rate(
                    values(p, "Direct compact success"),
                    values(p, "Direct compact fail"),
                )
            })
            .collect();
        derived.push(("Direct compact success rate %", rates));
        derived.push((
            "Compaction efficiency",
            ratio(&c("Direct compact success"), &c("Direct compact stall")),
        ));
        derived.push((
            "Kswapd efficiency %",
            ratio(&c("Pages kswapd stolen"), &c("Pages kswapd scanned")),
        ));
    }
    for (name, values) in derived {
        rows.push(CompareRow {
            metric: name.to_string(),
            stat: String::new(),
            change_pct: values
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let both = !thp_unmeasured.contains(&i) && !thp_unmeasured.contains(&0);
                    if i == 0 || !both {
                        None
                    } else {
                        change(*v, values[0])
                    }
                })
                .collect(),
            significant: vec![false; values.len()],
            per_run: Vec::new(),
            values,
            unmeasured: thp_unmeasured.clone(),
        });
    }
    CompareReport {
        configs: labels.to_vec(),
        runs: results.iter().map(|r| r.len() as u32).max().unwrap_or(0),
        rows,
    }
}

/// Which way a metric is better, for reading its change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    Higher,
    Lower,
    /// A census or a spread (stddev): no better direction.
    Neither,
}

/// The direction of `metric` (a row's metric name): lower is better for times and latencies
/// (the rows mmtests compares with `pndiff`: Hugealloc Time, Kbuild times, thpchallenge fault
/// latencies in µs) and for the cost counters — stalls, failures, fallbacks, pages scanned,
/// reclaimed or swapped, refaults, kcompactd wake-ups, drains, OOM kills; higher is better for
/// throughputs (TPS, MiB/s, vm-scalability), THP faults served, compaction successes and
/// efficiencies, the share of huge pages or large folios; neither for folio-order censuses.
pub fn better(metric: &str) -> Better {
    let m = metric.to_ascii_lowercase();
    let has = |w: &[&str]| w.iter().any(|x| m.contains(x));
    if m.contains("stddev") || m.contains("pages in order-") {
        Better::Neither
    } else if has(&[
        "time", "(us)", "stall", "fail", "fallback", "scanned", "stolen", "swap ", "refault", "wake",
        "drain", "oom",
    ]) {
        Better::Lower
    } else if has(&[
        "tps",
        "mib/s",
        "throughput",
        "thp fault alloc",
        "success",
        "efficiency",
        "huge-pct",
        "% in order",
    ]) {
        Better::Higher
    } else {
        Better::Neither
    }
}

/// The note printed under the table and markdown formats: the sign convention, and the
/// report's lower-is-better metrics (those whose positive change is worse).
pub fn convention_note(r: &CompareReport) -> String {
    let mut lower: Vec<&str> = Vec::new();
    for row in &r.rows {
        if better(&row.metric) == Better::Lower && !lower.contains(&row.metric.as_str()) {
            lower.push(&row.metric);
        }
    }
    let mut out = String::from(
        "# change % = (config - baseline) / baseline x 100 for every metric: positive means higher.\n\
         # mmtests' compare prints a gain instead (positive = better: its sign is flipped for times).\n",
    );
    if !lower.is_empty() {
        let _ = writeln!(
            out,
            "# Lower is better (a positive change is worse): {}.",
            lower.join(", ")
        );
    }
    out
}

/// One cell: `value ( +x.xx%)`, or `value * +x.xx%*` when significant; the baseline's change
/// is 0.00 % (`CompareRow::shown_change`).
fn cell(v: f64, p: Option<f64>, sig: bool) -> String {
    match (p, sig) {
        (Some(p), true) => format!("{v:>14.2} *{p:>7.2}%*"),
        (Some(p), false) => format!("{v:>14.2} ({p:>7.2}%)"),
        (None, _) => format!("{v:>14.2} (    n/a)"),
    }
}

/// The mmtests compare layout: `Stat  Metric  value ( +x.xx%) ...`.
pub fn format_table(r: &CompareReport) -> String {
    let mut out = String::new();
    let _ = write!(out, "{:<9} {:<34}", "", "");
    for c in &r.configs {
        let _ = write!(out, " {c:>25}");
    }
    out.push('\n');
    for row in &r.rows {
        let _ = write!(out, "{:<9} {:<34}", row.stat, row.metric);
        for (i, v) in row.values.iter().enumerate() {
            if row.measured(i) {
                let _ = write!(out, " {:>25}", cell(*v, row.shown_change(i), row.significant[i]));
            } else {
                let _ = write!(out, " {:>25}", "n/a");
            }
        }
        out.push('\n');
    }
    out.push_str(&convention_note(r));
    out
}

pub fn format_markdown(r: &CompareReport) -> String {
    let mut out = String::new();
    let _ = write!(out, "| stat | metric |");
    for c in &r.configs {
        let _ = write!(out, " {c} |");
    }
    out.push('\n');
    let _ = write!(out, "|---|---|");
    for _ in &r.configs {
        out.push_str("---:|");
    }
    out.push('\n');
    for row in &r.rows {
        let _ = write!(out, "| {} | {} |", row.stat, row.metric);
        for (i, v) in row.values.iter().enumerate() {
            if !row.measured(i) {
                out.push_str(" n/a |");
                continue;
            }
            let pct = row
                .shown_change(i)
                .map_or("n/a".to_string(), |p| format!("{p:+.2}%"));
            if row.significant[i] {
                let _ = write!(out, " **{v:.2} ({pct})** |");
            } else {
                let _ = write!(out, " {v:.2} ({pct}) |");
            }
        }
        out.push('\n');
    }
    // The same note, as a paragraph under the table.
    out.push('\n');
    for l in convention_note(r).lines() {
        let _ = writeln!(out, "{}", l.trim_start_matches("# "));
    }
    out
}

pub fn format_csv(r: &CompareReport) -> String {
    // `better`: higher, lower or empty ([`better`]); change_pct is (new − base) / base.
    let mut out = String::from("metric,stat,config,value,change_pct,significant,better\n");
    let q = |s: &str| {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    for row in &r.rows {
        for (i, v) in row.values.iter().enumerate() {
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{}",
                q(&row.metric),
                q(&row.stat),
                q(&r.configs[i]),
                if row.measured(i) {
                    v.to_string()
                } else {
                    "n/a".into()
                },
                row.change_pct[i].map_or(String::new(), |p| format!("{p}")),
                row.significant[i],
                match better(&row.metric) {
                    Better::Higher => "higher",
                    Better::Lower => "lower",
                    Better::Neither => "",
                }
            );
        }
    }
    out
}
