//! `fraglab replay`: a recorded allocation trace through the simulated allocator under one or
//! more policies, beside the recording (`fraglab_sim::replay`).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use fraglab_sim::replay::{format_text, replay_with, Policy, ReplayOptions};

use crate::compare::load_config;
use crate::write_via_tmp;

/// The columns: every `--config` (compare's `[LABEL=]SPEC[@KEY=VALUE,...]`) crossed with every
/// `--set KEY=VALUE[,KEY=VALUE...]` (none: the config as it is). Without `--config`, a
/// snapshot boot (`snapshot`: the file booted from) has one config of its own, labelled
/// `snapshot`: the snapshot's machine and knobs.
pub fn policies(configs: &[String], sets: &[String], snapshot: Option<&Path>) -> Result<Vec<Policy>, String> {
    let own = match (configs.is_empty(), snapshot) {
        (true, Some(p)) => Some(format!("[machine]\nsnapshot = {:?}\n", p.display().to_string())),
        (true, None) => {
            return Err(
                "replay: give the machine to replay on with --config SPEC.toml (its [machine], knobs and model switches), or a snapshot (--snapshot STATE, or a trace that embeds one)"
                    .into(),
            )
        }
        _ => None,
    };
    if let Some(text) = own {
        let mut out = Vec::new();
        let variants: Vec<Option<&String>> = if sets.is_empty() {
            vec![None]
        } else {
            sets.iter().map(Some).collect()
        };
        for s in variants {
            let mut overrides = Vec::new();
            for kv in s
                .map_or("", |s| s.as_str())
                .split(',')
                .filter(|kv| !kv.is_empty())
            {
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| format!("--set {kv:?}: expected KEY=VALUE[,KEY=VALUE...]"))?;
                overrides.push((k.trim().to_string(), v.trim().to_string()));
            }
            let t = fraglab_spec::apply_overrides(&text, &overrides)?;
            let label = s.map_or("snapshot".to_string(), |s| format!("snapshot@{s}"));
            let spec = fraglab_spec::parse_spec(&t, &label).map_err(|e| e.to_string())?;
            out.push(Policy { label, spec });
        }
        return Ok(out);
    }
    let mut out: Vec<Policy> = Vec::new();
    for c in configs {
        let (label0, spec0) = load_config(c)?;
        if sets.is_empty() {
            out.push(Policy {
                label: label0,
                spec: spec0,
            });
            continue;
        }
        for s in sets {
            if s.split(',').any(|kv| !kv.contains('=')) {
                return Err(format!("--set {s:?}: expected KEY=VALUE[,KEY=VALUE...]"));
            }
            let combined = if c.contains('@') {
                format!("{c},{s}")
            } else {
                format!("{c}@{s}")
            };
            let (_, spec) = load_config(&combined)?;
            let label = if label0.contains('@') {
                format!("{label0},{s}")
            } else {
                format!("{label0}@{s}")
            };
            out.push(Policy { label, spec });
        }
    }
    for (i, p) in out.iter().enumerate() {
        if out[..i].iter().any(|q| q.label == p.label) {
            return Err(format!(
                "two columns are labelled {:?}; name the configs with LABEL=SPEC",
                p.label
            ));
        }
    }
    Ok(out)
}

/// Runs the replay and prints the table (or the JSON with `--json`); `-o` writes the JSON.
#[allow(clippy::too_many_arguments)]
pub fn replay(
    trace: PathBuf,
    snapshot: Option<PathBuf>,
    fresh: bool,
    configs: Vec<String>,
    sets: Vec<String>,
    json: bool,
    output: Option<PathBuf>,
) -> Result<(), String> {
    if let Some(p) = &output {
        crate::check_output("-o", p)?;
    }
    let embedded = !fresh
        && snapshot.is_none()
        && fraglab_state::trace::TraceReader::open_without_snapshot(&trace)
            .map_err(|e| e.to_string())?
            .header()
            .snapshot
            .is_some();
    let boot_from = snapshot.clone().or(embedded.then(|| trace.clone()));
    let policies = policies(&configs, &sets, boot_from.as_deref())?;
    let opts = ReplayOptions {
        snapshot,
        ignore_embedded: fresh,
    };
    let bar = if std::io::stderr().is_terminal() {
        let b = indicatif::ProgressBar::new_spinner();
        b.set_style(
            indicatif::ProgressStyle::with_template("{elapsed_precise} {spinner} {msg}")
                .expect("valid template"),
        );
        Some(b)
    } else {
        None
    };
    let n = policies.len();
    let t0 = std::time::Instant::now();
    let report = replay_with(&trace, &policies, &opts, &mut |pass, lines| {
        if let Some(b) = &bar {
            b.set_message(format!(
                "{} ({}/{n}): {lines} lines",
                policies[pass].label,
                pass + 1
            ));
            b.tick();
        }
    })
    .map_err(|e| e.to_string())?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let wall = t0.elapsed().as_secs_f64();
    let json_text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())? + "\n";
    if let Some(path) = &output {
        write_via_tmp(path, &json_text)?;
    }
    if json {
        print!("{json_text}");
    } else {
        let lines = report.columns[1].counts.as_ref().map_or(0, |c| c.lines);
        eprintln!("# {lines} lines x {n} policies replayed in {wall:.2} s wall");
        print!("{}", format_text(&report));
    }
    Ok(())
}
