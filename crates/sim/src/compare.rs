//! `fraglab compare`: the per-sample figures of run results, their summary statistics, Welch's
//! t-test against the baseline, and the table in the field's formats (the field's formats).
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

use fraglab_spec::result::{
    CompareReport, CompareRow, RunResult, RESULT_SCHEMA, RESULT_SCHEMAS, RESULT_SCHEMA_SCALED,
};
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
    let scale: Vec<String> = results
        .iter()
        .map(|r| {
            r.first()
                .and_then(|r| r.scale.as_ref())
                .map_or(String::new(), |s| s.label.clone())
        })
        .collect();
    CompareReport {
        configs: labels.to_vec(),
        runs: results.iter().map(|r| r.len() as u32).max().unwrap_or(0),
        rows,
        scale: if scale.iter().all(String::is_empty) {
            Vec::new()
        } else {
            scale
        },
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
/// efficiencies, the share of huge pages or large folios; neither for folio-order censuses and
/// the pageblock censuses of named samples (`census.NAME.ZONE.CLASS`, whose sample name could
/// hold any of the words above).
pub fn better(metric: &str) -> Better {
    let m = metric.to_ascii_lowercase();
    let has = |w: &[&str]| w.iter().any(|x| m.contains(x));
    if m.contains("stddev") || m.contains("pages in order-") || m.starts_with("census.") {
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
    let mut out = r.scale_note();
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
    for line in r.scale_note().lines() {
        let _ = writeln!(out, "{}\n", line.trim_start_matches("# "));
    }
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

/// A compare configuration `[LABEL=]SPEC[@KEY=VALUE,...]` → (label, spec): SPEC is a file or
/// `example:NAME`, the overrides as [`fraglab_spec::apply_overrides`] takes them; without a
/// LABEL, the file's stem (with `@` and the overrides when there are some). Shared by the
/// `fraglab` commands that take configurations and the Python package.
pub fn load_config(c: &str) -> Result<(String, fraglab_spec::Spec), String> {
    load_config_detailed(c).map_err(|e| e.to_string())
}

/// Why [`load_config_detailed`] could not load a configuration. Displayed, the message
/// [`load_config`] returns.
#[derive(Clone, Debug)]
pub enum ConfigError {
    /// The spec is at fault: it could not be read, parsed or validated, an override could not
    /// apply to it, or there is no such built-in example. `shown`, when some, is the message as
    /// displayed (naming the configuration) where it differs from the [`SpecError`]'s.
    ///
    /// [`SpecError`]: fraglab_spec::SpecError
    Spec {
        error: fraglab_spec::SpecError,
        shown: Option<String>,
    },
    /// The configuration string itself is malformed (an override that is not `KEY=VALUE`).
    Config(String),
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::Spec { shown: Some(m), .. } | ConfigError::Config(m) => f.write_str(m),
            ConfigError::Spec { error, shown: None } => write!(f, "{error}"),
        }
    }
}

/// [`load_config`] with the error's parts: the spec's file, line and key where the spec is at
/// fault (the Python package's `SpecError`).
pub fn load_config_detailed(c: &str) -> Result<(String, fraglab_spec::Spec), ConfigError> {
    let (label, rest) = match c.split_once('=') {
        Some((l, r))
            if !l.is_empty()
                && l.chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-')
                && !l.contains('@') =>
        {
            (Some(l.to_string()), r)
        }
        _ => (None, c),
    };
    let (file, ovr) = match rest.split_once('@') {
        Some((f, o)) => (f, o),
        None => (rest, ""),
    };
    let mut overrides = Vec::new();
    for kv in ovr.split(',').filter(|s| !s.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| ConfigError::Config(format!("{c}: override {kv:?} is not KEY=VALUE")))?;
        overrides.push((k.trim().to_string(), v.trim().to_string()));
    }
    let spec_err = |error| ConfigError::Spec { error, shown: None };
    let spec = match file.strip_prefix("example:") {
        Some(name) => {
            let shown = format!("examples/{name}.toml");
            let text = fraglab_spec::examples::example(name).map_err(|m| ConfigError::Spec {
                error: fraglab_spec::SpecError::new(shown.clone(), 0, None, m.clone()),
                shown: Some(m),
            })?;
            let named = format!("{shown} [{ovr}]");
            let text = fraglab_spec::apply_overrides(text, &overrides).map_err(|m| ConfigError::Spec {
                error: fraglab_spec::SpecError::new(named.clone(), 0, None, m.clone()),
                shown: Some(format!("{c}: {m}")),
            })?;
            fraglab_spec::parse_spec(&text, &named).map_err(spec_err)?
        }
        None => fraglab_spec::load_spec_with(std::path::Path::new(file), &overrides).map_err(spec_err)?,
    };
    let label = label.unwrap_or_else(|| {
        let stem = std::path::Path::new(file.strip_prefix("example:").unwrap_or(file))
            .file_stem()
            .map_or(file.to_string(), |s| s.to_string_lossy().into_owned());
        if ovr.is_empty() {
            stem
        } else {
            format!("{stem}@{ovr}")
        }
    });
    Ok((label, spec))
}

/// One run's result JSON to merge into a compare table (`fraglab compare --from`, the Python
/// package's sweeps): the configuration it belongs to and where it came from (for messages).
#[derive(Clone, Debug)]
pub struct ResultSource {
    pub label: String,
    /// The file (or, for results gathered in memory, a description such as `base seed 3`).
    pub source: String,
    pub result: RunResult,
}

/// `LABEL-runN.json` (the names `fraglab compare --results-dir` writes) → (LABEL, N); `None`
/// for any other name.
pub fn parse_result_name(name: &str) -> Option<(String, u32)> {
    let stem = name.strip_suffix(".json")?;
    let (label, n) = stem.rsplit_once("-run")?;
    if label.is_empty() || n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((label.to_string(), n.parse().ok()?))
}

/// Parses one result JSON; errors name `source` and, for bad JSON, its line and column. A
/// result of another schema version is refused.
pub fn parse_result(text: &str, source: &str) -> Result<RunResult, String> {
    let r: RunResult = serde_json::from_str(text).map_err(|e| {
        format!(
            "{source}: line {}, column {}: not a fraglab result JSON: {e}",
            e.line(),
            e.column()
        )
    })?;
    if !RESULT_SCHEMAS.contains(&r.schema) {
        return Err(format!(
            "{source}: result schema {} (this fraglab reads schemas {RESULT_SCHEMA} and \
             {RESULT_SCHEMA_SCALED}, a scale model's)",
            r.schema
        ));
    }
    Ok(r)
}

/// Groups run results into the configurations of a compare table, for [`compare`]:
/// configurations in order of first appearance in `files`, except that `baseline` (when given)
/// comes first; a configuration's runs in the order of `files`. Refused, with the files named:
/// two results of one configuration with the same seed (the same run twice), and results of one
/// configuration from different specs (`spec_name`) or engines; a `baseline` no result has.
pub fn merge_results(
    files: Vec<ResultSource>,
    baseline: Option<&str>,
) -> Result<(Vec<String>, Vec<Vec<RunResult>>), String> {
    if files.is_empty() {
        return Err("no results to compare".into());
    }
    let mut labels: Vec<String> = Vec::new();
    let mut groups: Vec<Vec<ResultSource>> = Vec::new();
    for f in files {
        let i = match labels.iter().position(|l| *l == f.label) {
            Some(i) => i,
            None => {
                labels.push(f.label.clone());
                groups.push(Vec::new());
                labels.len() - 1
            }
        };
        if let Some(first) = groups[i].first() {
            if let Some(dup) = groups[i].iter().find(|g| g.result.seed == f.result.seed) {
                return Err(format!(
                    "{} and {}: both are configuration {:?} with seed {} (the same run twice)",
                    dup.source, f.source, f.label, f.result.seed
                ));
            }
            if first.result.spec_name != f.result.spec_name || first.result.engine != f.result.engine {
                return Err(format!(
                    "{}: configuration {:?} mixes results of different specs or engines ({} is spec {:?} on {}, this is spec {:?} on {})",
                    f.source,
                    f.label,
                    first.source,
                    first.result.spec_name.as_deref().unwrap_or(""),
                    first.result.engine,
                    f.result.spec_name.as_deref().unwrap_or(""),
                    f.result.engine
                ));
            }
            let k = |r: &RunResult| r.scale.as_ref().map_or(1, |s| s.factor);
            if k(&first.result) != k(&f.result) {
                let show = |r: &RunResult| {
                    r.scale
                        .as_ref()
                        .map_or("the full size".to_string(), |s| s.label.clone())
                };
                return Err(format!(
                    "{}: configuration {:?} mixes a scale model with another scale ({} is {}, this is {})",
                    f.source,
                    f.label,
                    first.source,
                    show(&first.result),
                    show(&f.result)
                ));
            }
        }
        groups[i].push(f);
    }
    if let Some(b) = baseline {
        let i = labels.iter().position(|l| l == b).ok_or_else(|| {
            format!(
                "--baseline {b:?}: no result has that label (there are: {})",
                labels.join(", ")
            )
        })?;
        let l = labels.remove(i);
        labels.insert(0, l);
        let g = groups.remove(i);
        groups.insert(0, g);
    }
    let results = groups
        .into_iter()
        .map(|g| g.into_iter().map(|f| f.result).collect())
        .collect();
    Ok((labels, results))
}

/// The result files of `compare --from DIR...`: every `LABEL-runN.json` in each directory
/// (other files are ignored), the directories in the order given, each one's files by LABEL
/// and then N; an error when a directory cannot be read or holds no such file, or a file is not
/// a result JSON.
pub fn read_result_dirs(dirs: &[std::path::PathBuf]) -> Result<Vec<ResultSource>, String> {
    let mut out = Vec::new();
    for dir in dirs {
        let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut names: Vec<(String, u32, std::path::PathBuf)> = Vec::new();
        for entry in rd {
            let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some((label, n)) = parse_result_name(&name) {
                names.push((label, n, entry.path()));
            }
        }
        if names.is_empty() {
            return Err(format!(
                "{}: no result files (LABEL-runN.json, as `fraglab compare --results-dir` writes)",
                dir.display()
            ));
        }
        names.sort();
        for (label, _, path) in names {
            let source = path.display().to_string();
            let text = fraglab_state::textfile::read_text(
                &path,
                fraglab_state::textfile::MAX_RESULT_BYTES,
                "result JSON",
            )
            .map_err(|e| e.to_string())?;
            let result = parse_result(&text, &source)?;
            out.push(ResultSource {
                label,
                source,
                result,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(label: &str, seed: u64, spec: &str) -> ResultSource {
        ResultSource {
            label: label.into(),
            source: format!("{label}-{seed}.json"),
            result: RunResult {
                schema: RESULT_SCHEMA,
                engine: "sim".into(),
                spec_name: Some(spec.into()),
                seed,
                ..Default::default()
            },
        }
    }

    #[test]
    fn result_names() {
        assert_eq!(parse_result_name("base-run1.json"), Some(("base".into(), 1)));
        assert_eq!(
            parse_result_name("a-run-b@x=1-run12.json"),
            Some(("a-run-b@x=1".into(), 12))
        );
        assert_eq!(parse_result_name("compare.json"), None);
        assert_eq!(parse_result_name("-run1.json"), None);
        assert_eq!(parse_result_name("base-run.json"), None);
        assert_eq!(parse_result_name("base-run1x.json"), None);
        assert_eq!(parse_result_name("base-run1.json.tmp"), None);
    }

    #[test]
    fn merge_orders_by_first_appearance_and_baseline() {
        let files = vec![
            src("b", 1, "s"),
            src("a", 1, "s"),
            src("b", 2, "s"),
            src("a", 2, "s"),
        ];
        let (labels, res) = merge_results(files.clone(), None).unwrap();
        assert_eq!(labels, ["b", "a"]);
        assert_eq!(res[0].iter().map(|r| r.seed).collect::<Vec<_>>(), [1, 2]);
        let (labels, res) = merge_results(files, Some("a")).unwrap();
        assert_eq!(labels, ["a", "b"]);
        assert_eq!(res.len(), 2);
        assert_eq!(res[1].len(), 2);
    }

    #[test]
    fn merge_refuses_duplicates_mixed_specs_and_unknown_baseline() {
        let e = merge_results(vec![src("a", 1, "s"), src("a", 1, "s")], None).unwrap_err();
        assert!(e.contains("a-1.json and a-1.json") && e.contains("seed 1"), "{e}");
        let e = merge_results(vec![src("a", 1, "s"), src("a", 2, "t")], None).unwrap_err();
        assert!(e.starts_with("a-2.json: configuration \"a\" mixes"), "{e}");
        let e = merge_results(vec![src("a", 1, "s")], Some("z")).unwrap_err();
        assert!(e.contains("\"z\"") && e.contains("there are: a"), "{e}");
        assert!(merge_results(Vec::new(), None).is_err());
    }

    #[test]
    fn parse_result_names_the_source_and_line() {
        let e = parse_result("{\n  \"schema\": 1,\n  oops", "d/x-run1.json").unwrap_err();
        assert!(e.starts_with("d/x-run1.json: line 3"), "{e}");
        let mut r = src("a", 1, "s").result;
        r.schema = RESULT_SCHEMA_SCALED + 1;
        let e = parse_result(&serde_json::to_string(&r).unwrap(), "f.json").unwrap_err();
        assert!(e.contains("schema"), "{e}");
        r.schema = RESULT_SCHEMA;
        assert_eq!(
            parse_result(&serde_json::to_string(&r).unwrap(), "f.json").unwrap(),
            r
        );
    }
}
