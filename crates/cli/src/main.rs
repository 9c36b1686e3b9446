//! `fraglab`: simulate the physical memory manager of Linux 6.18.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Built-in example specs, shipped in the binary (the files live in `examples/`).
const EXAMPLES: &[(&str, &str)] = &[(
    "claim-steal-merge",
    include_str!("../../../examples/claim-steal-merge.toml"),
)];

#[derive(Parser)]
#[command(
    name = "fraglab",
    version,
    about = "Simulate Linux 6.18 physical memory management: buddy allocator, migratetypes, fallbacks"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a spec: its operations in order, printing what its `print` operations ask for.
    Run {
        /// The spec file (TOML).
        #[arg(required_unless_present = "example", conflicts_with = "example")]
        spec: Option<PathBuf>,
        /// Run a built-in example instead (see `fraglab examples`).
        #[arg(long)]
        example: Option<String>,
        /// Write the output to this file instead of standard output (written only on success).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// List the built-in examples, or print one (`fraglab examples NAME`).
    Examples { name: Option<String> },
    /// List the kernel knobs a spec may set, with their kinds and defaults.
    Knobs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fraglab: {e}");
            ExitCode::FAILURE
        }
    }
}

fn example(name: &str) -> Result<&'static str, String> {
    EXAMPLES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .ok_or_else(|| {
            let names: Vec<&str> = EXAMPLES.iter().map(|(n, _)| *n).collect();
            format!("no built-in example {name:?} (there are: {})", names.join(", "))
        })
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.cmd {
        Cmd::Run {
            spec,
            example: ex,
            output,
        } => {
            let spec = match (spec, ex) {
                (Some(path), _) => fraglab_spec::load_spec(&path).map_err(|e| e.to_string())?,
                (None, Some(name)) => {
                    fraglab_spec::parse_spec(example(&name)?, &format!("examples/{name}.toml"))
                        .map_err(|e| e.to_string())?
                }
                (None, None) => unreachable!("clap requires one"),
            };
            let text = fraglab_sim::run_ops(&spec).map_err(|e| e.to_string())?;
            match output {
                Some(path) => {
                    // Write to a temporary file and rename, so nothing is half-written.
                    let tmp = path.with_extension("tmp-fraglab");
                    std::fs::write(&tmp, &text).map_err(|e| format!("{}: {e}", tmp.display()))?;
                    std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))?;
                }
                None => {
                    let mut so = std::io::stdout().lock();
                    if let Err(e) = so.write_all(text.as_bytes()) {
                        if e.kind() != std::io::ErrorKind::BrokenPipe {
                            return Err(format!("stdout: {e}"));
                        }
                    }
                }
            }
            Ok(())
        }
        Cmd::Examples { name: Some(name) } => {
            print!("{}", example(&name)?);
            Ok(())
        }
        Cmd::Examples { name: None } => {
            for (name, text) in EXAMPLES {
                let desc = text
                    .lines()
                    .find_map(|l| l.strip_prefix("description = "))
                    .unwrap_or("")
                    .trim_matches('"');
                println!("{name:24} {desc}");
            }
            Ok(())
        }
        Cmd::Knobs => {
            println!("{:<52} {:<40} {:<16} description", "knob", "values", "default");
            for k in fraglab_spec::KNOBS {
                let used = if fraglab_sim::timeless::MODELLED_KNOBS.contains(&k.name) {
                    ""
                } else {
                    " [not read by the model yet]"
                };
                println!(
                    "{:<52} {:<40} {:<16} {}{used}",
                    k.name,
                    k.kind.expected(),
                    k.default,
                    k.doc
                );
            }
            Ok(())
        }
    }
}
