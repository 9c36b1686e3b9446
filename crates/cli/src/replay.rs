//! `fraglab replay`: a recorded allocation trace through the simulated allocator under one or
//! more policies, beside the recording (`fraglab_sim::replay`).

use std::io::IsTerminal;
use std::path::PathBuf;

use fraglab_sim::replay::{format_text, replay as run_replay, Policy};

use crate::compare::load_config;
use crate::write_via_tmp;

/// The columns: every `--config` (compare's `[LABEL=]SPEC[@KEY=VALUE,...]`) crossed with every
/// `--set KEY=VALUE[,KEY=VALUE...]` (none: the config as it is).
pub fn policies(configs: &[String], sets: &[String]) -> Result<Vec<Policy>, String> {
    if configs.is_empty() {
        return Err(
            "replay: give the machine to replay on with --config SPEC.toml (its [machine], knobs and model switches)"
                .into(),
        );
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
pub fn replay(
    trace: PathBuf,
    snapshot: Option<PathBuf>,
    configs: Vec<String>,
    sets: Vec<String>,
    json: bool,
    output: Option<PathBuf>,
) -> Result<(), String> {
    if let Some(s) = snapshot {
        return Err(format!(
            "{}: --snapshot: booting from a snapshot is not available in this build",
            s.display()
        ));
    }
    let policies = policies(&configs, &sets)?;
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
    let report = run_replay(&trace, &policies, &mut |pass, lines| {
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
