//! `fraglab`: simulate the physical memory manager of Linux 6.18.
//!
//! One module per subcommand; this file holds the command line and dispatches it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod blame;
mod compare;
mod examples;
mod footprint;
mod host;
mod knobs;
mod progress;
mod record;
mod replay;
mod report;
mod run;
mod snapshot;
mod soak;
mod suite_file;
mod tune;
mod validate;

use examples::example;
use run::parse_folio_mode;

/// The experiments' specs (`experiments/*/`), for `fraglab bench`: key, label, text.
const EXPERIMENTS: &[(&str, &str, &str)] = &[
    (
        "defrag_mode",
        "defrag-mode (seed 001)",
        include_str!("../../../experiments/defrag-mode/kbuild-thp.toml"),
    ),
    (
        "costly_pagecache",
        "costly-pagecache (seed 002)",
        include_str!("../../../experiments/costly-pagecache/pgbench.toml"),
    ),
    (
        "folio_compaction",
        "folio-compaction (seed 000)",
        include_str!("../../../experiments/folio-compaction/vmscal-thp.toml"),
    ),
];

/// Issue 22's scale specs (`experiments/scale/`), for `fraglab bench`.
const SCALE_256G: &str = include_str!("../../../experiments/scale/kbuild-256g.toml");
const SERVER_1T: &str = include_str!("../../../experiments/scale/server-1t.toml");

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
enum HostCmd {
    /// Run a spec's workload on the live kernel and write the simulator's result schema
    /// (engine "host"). Knobs are restored on exit, error, SIGINT/SIGTERM and panic.
    Run {
        /// The spec: a file or `example:NAME`, optionally with overrides as in `compare`
        /// (`SPEC@vm.defrag_mode=1,workload.thpchallenge.start=90s`).
        spec: String,
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Print what would change (knobs, memory) and exit.
        #[arg(long)]
        dry_run: bool,
        /// Refuse or stop when MemAvailable would fall under this.
        #[arg(long, default_value = "3GiB")]
        floor: String,
        /// Refuse a spec with more anonymous memory than this.
        #[arg(long, default_value = "10GiB")]
        cap: String,
        /// Scratch directory for the spec's files (created and removed).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Count the compaction tracepoints and kmem:mm_page_alloc_extfrag during the run.
        #[arg(long)]
        trace: bool,
        /// Stream the whole trace text to this file (the spec's events and
        /// `fraglab_spec::DIFF_EVENTS`, 64 MiB trace buffer per CPU, trace_clock mono), the
        /// kernel side of `fraglab trace diff`; lost events in `trace_counts["lost_events"]`.
        #[arg(long)]
        trace_to: Option<PathBuf>,
        /// Take MemTotal minus the spec's machine.memory out of the machine for the run, so
        /// memory pressure comes at the spec's size: memory blocks of zone Normal offlined from
        /// the top (onlined after, also by `host restore`), or where offlining is unavailable a
        /// hugetlb pool (vm.nr_hugepages, restored after). `validate` then simulates the zones
        /// the kernel had once fitted.
        #[arg(long)]
        fit_memory: bool,
    },
    /// Capture /proc/{buddyinfo,pagetypeinfo,zoneinfo,vmstat} and every knob as a result file;
    /// with `--pages`, this machine's physical state (a byte per pfn from /proc/kpageflags, the
    /// zones, the /proc tables around the read, knobs) as a snapshot file (`-o STATE`) that
    /// `[machine] snapshot` boots from (docs/model §30). Read-only; needs root.
    Snapshot {
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Capture every pfn's state into a snapshot file (`-o STATE` required).
        #[arg(long)]
        pages: bool,
    },
    /// Run a spec on both engines (the live kernel, then the simulator) and print, row by row,
    /// kernel against simulator with the relative difference (the compare layout, kernel first).
    Validate {
        /// The spec: a file or `example:NAME`, optionally with overrides as in `compare`.
        spec: String,
        /// Refuse or stop when MemAvailable would fall under this.
        #[arg(long, default_value = "3GiB")]
        floor: String,
        #[arg(long, default_value = "table", value_parser = ["table", "markdown", "json", "csv"])]
        format: String,
        /// As `host run --fit-memory`.
        #[arg(long)]
        fit_memory: bool,
        /// Scratch directory for the spec's files (created and removed).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// First capture this machine's pages into the spec's `machine.snapshot` file
        /// (overwriting it, as `host snapshot --pages`), then run the kernel at once and the
        /// simulator from that snapshot: both engines start from the same moment.
        #[arg(long, conflicts_with = "fit_memory")]
        capture_snapshot: bool,
    },
    /// Undo the changes journalled in a state file left by a killed `host run` or `host
    /// record` (/run/fraglab-host-PID.restore: knobs, memory blocks, hugetlb pool, kdamonds,
    /// loop images, tracefs instance and mount, processes, the run's directory); without a
    /// file, every such file found.
    Restore { state_file: Option<PathBuf> },
    /// Record the live kernel's allocation tracepoints (private tracefs instance, removed on
    /// every exit) into a trace file, with a snapshot at the start: `-o TRACE [-- CMD ARGS...]`.
    Record(record::RecordArgs),
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a spec: its operations in order, printing what its `print` operations ask for.
    #[command(
        override_usage = "fraglab run <SPEC> [OPTIONS]\n       fraglab run --example <NAME> [OPTIONS]"
    )]
    Run {
        /// The spec file (TOML), optionally with overrides as in `compare`
        /// (`SPEC@vm.defrag_mode=1,workload.duration=2s`), or `example:NAME`.
        #[arg(conflicts_with = "example")]
        spec: Option<String>,
        /// Run a built-in example instead (see `fraglab examples`).
        #[arg(long)]
        example: Option<String>,
        /// Write the result to this file (written only on success). A timed run writes its result
        /// JSON (the report still goes to standard output). A run of `[[op]]`s writes its
        /// result JSON — the same schema, the printed text in `printed` — if the name ends in
        /// `.json` (the text still goes to standard output), else the printed text instead of
        /// standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
        #[command(flatten)]
        flags: run::RunFlags,
    },
    /// Run specs N times each (different seeds, in parallel) and print the rows of
    /// mmtests' vmstat rows and the workloads' own rows in mmtests' compare format.
    ///
    /// Each CONFIG is `[LABEL=]SPEC[@KEY=VALUE,...]`: SPEC is a file or `example:NAME`; KEY is a
    /// knob name (`vm.defrag_mode`) or `model.X`, `run.X`, `machine.X`, `cost.X`,
    /// `workload.X`, or a path into a workload's tables (`workload.kbuild.jobs_parallel` sets
    /// it in every `[[workload.kbuild]]`, `workload.thp_burst[1].size` in the second only).
    /// The first CONFIG is the baseline.
    ///
    /// With `--from DIR...` nothing is run: the result JSONs that `--results-dir` wrote (here or
    /// on other machines) are merged into the table: every `LABEL-runN.json` of each DIR, the
    /// configurations in order of first appearance (DIRs in the order given, each one's files
    /// by name), `--baseline LABEL` first; two results of one label with the same seed, or of
    /// different specs, are refused.
    Compare {
        #[command(flatten)]
        args: compare::CompareArgs,
    },
    /// Write one self-contained HTML report (no network needed to open it) of run results
    /// (`fraglab run ... -o result.json`, `fraglab compare --results-dir`), with plots, and the
    /// compare table of `fraglab compare --format json -o compare.json` if given.
    Report {
        #[arg(required = true)]
        results: Vec<PathBuf>,
        #[arg(long)]
        compare: Option<PathBuf>,
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Run a spec on both engines (the live kernel, then the simulator) and print them side by
    /// side (the same as `fraglab host validate`); or, with `--suite DIR`, every scenario of a
    /// validation suite on both engines, scored row by row against the tolerances (THP success
    /// ±10 pp, work counters ×1.5, census ±15 %, latency ×2), written to DIR/README.md and
    /// DIR/scoreboard.json (a whole run with the kernel only). With `--rescore FILE`, an older
    /// scoreboard.json scored again by the current rule (trivial rows out, kernel-unstable rows
    /// apart), per class beside the old rule; nothing is run.
    Validate {
        /// The spec: a file or `example:NAME`, optionally with overrides as in `compare`.
        #[arg(required_unless_present_any = ["suite", "rescore"], conflicts_with_all = ["suite", "rescore"])]
        spec: Option<String>,
        /// A validation suite directory (suite.toml, or its *.toml specs).
        #[arg(long, conflicts_with = "rescore")]
        suite: Option<PathBuf>,
        /// A scoreboard.json (this version's or an older one) to score again and compare with
        /// the old rule, per class.
        #[arg(long)]
        rescore: Option<PathBuf>,
        /// Seconds to wait at most before each kernel run for a 1-minute load average under 1.0
        /// (`--suite`; /proc/loadavg polled every 5 s).
        #[arg(long, default_value_t = 300.0, requires = "suite")]
        quiet_wait: f64,
        /// Runs per arm and scenario (`--suite`).
        #[arg(long, default_value_t = 3, requires = "suite")]
        runs: u32,
        /// Only these scenarios (`--suite`; repeatable).
        #[arg(long, requires = "suite")]
        only: Vec<String>,
        /// The simulator's arms only (`--suite`): the kernel's columns say n/a.
        #[arg(long, requires = "suite")]
        sim_only: bool,
        /// Only the scenarios marked `ci = true` (`--suite`).
        #[arg(long, requires = "suite")]
        ci: bool,
        /// Seconds of idle /proc/vmstat before each host run, subtracted as a baseline (`--suite`).
        #[arg(long, default_value_t = 5.0, requires = "suite")]
        idle: f64,
        /// Simulator threads (`--suite`; at least 1, default 2).
        #[arg(long, requires = "suite", value_parser = parse_jobs)]
        jobs: Option<usize>,
        /// Do not write DIR/README.md and DIR/scoreboard.json (`--suite`).
        #[arg(long, requires = "suite")]
        no_write: bool,
        /// Keep each kernel run's result JSON and same-start capture in this directory
        /// (`--suite`; default: a scratch directory removed at the end).
        #[arg(long, requires = "suite")]
        results_dir: Option<PathBuf>,
        /// Take the kernel arms from a directory an earlier `--results-dir` run kept
        /// (`SCENARIO-kernel-runN.json` and its capture) instead of running the kernel: the
        /// simulator's arms and the scores again, without root (`--suite`).
        #[arg(long, requires = "suite", conflicts_with = "results_dir")]
        kernel_results: Option<PathBuf>,
        /// Full traces and their diff per scenario (`--suite`): the first kernel run's trace
        /// (`HostOptions::trace_to`) in TRACE_DIR/NAME-kernel.trace, the first simulator run's
        /// (`run --trace-out`) in TRACE_DIR/NAME-sim.trace, and `fraglab trace diff` of the two
        /// in TRACE_DIR/NAME.diff.txt when both are there.
        #[arg(long, requires = "suite")]
        trace_dir: Option<PathBuf>,
        #[arg(long, default_value = "3GiB")]
        floor: String,
        #[arg(long, default_value = "table", value_parser = ["table", "markdown", "json", "csv"])]
        format: String,
        /// As `host run --fit-memory`.
        #[arg(long)]
        fit_memory: bool,
        /// Scratch directory for the spec's files (created and removed).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// The host engine: run a spec on this machine's live kernel (root), capture its state, or
    /// restore knobs after a killed run.
    Host {
        #[command(subcommand)]
        cmd: HostCmd,
    },
    /// Snapshot files (`fraglab host snapshot --pages`): what one holds and how its
    /// reconstruction matches the captured tables.
    Snapshot {
        #[command(subcommand)]
        cmd: snapshot::SnapshotCmd,
    },
    /// A soak of random model operations (allocations, frees, faults, page-cache reads and
    /// writes, reclaim, compaction, writeback, drains) with the debug-vm checker every
    /// --check-every operations (issue 23 item 6): a bench. Prints a JSON line with operations,
    /// checks and violations; fails on a violation.
    Soak {
        /// Operations to run.
        #[arg(long, default_value_t = 100_000_000)]
        ops: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Check the invariants every this many operations (and at the end).
        #[arg(long, default_value_t = 1000)]
        check_every: u64,
        /// The machine's memory (2 CPUs, 64 MiB of swap).
        #[arg(long, default_value = "128MiB")]
        memory: String,
        /// Tests: corrupt the model after this operation (the checker must catch it).
        #[arg(long, hide = true)]
        corrupt_at: Option<u64>,
    },
    /// The standard performance figures: simulated seconds per wall second of each experiment
    /// (one configuration, run once), allocate/free operations per second, compaction pfns
    /// scanned per second, host memory per simulated page; and issue 22's scale figures (the
    /// whole kbuild-thp.toml, a 256 GiB kbuild, a 1 TiB server, CPU time growth with memory),
    /// each run as a child `fraglab run` whose peak RSS and CPU time are read with wait4.
    ///
    /// With no selection flag: --experiments --core --scale-256g --server-1t --growth, each at
    /// its default cap (a few minutes here). Progress goes to stderr.
    Bench {
        /// Cap each experiment at this much simulated time (e.g. 30s; `none`: the whole spec).
        #[arg(long, default_value = "10s")]
        max_sim: String,
        /// The three experiments' specs (one configuration each), capped at --max-sim.
        #[arg(long)]
        experiments: bool,
        /// Allocate/free, compaction and footprint figures of the allocator alone.
        #[arg(long)]
        core: bool,
        /// experiments/defrag-mode/kbuild-thp.toml whole (15 builds, ~190 s simulated) in
        /// --mode.
        #[arg(long)]
        kbuild_thp: bool,
        /// The engine mode of --kbuild-thp: `exact` (the only one today).
        #[arg(long, default_value = "exact")]
        mode: String,
        /// experiments/scale/kbuild-256g.toml (256 GiB, 64 CPUs), capped at --cap-256g.
        #[arg(long = "scale-256g")]
        scale_256g: bool,
        /// Simulated time of --scale-256g.
        #[arg(long = "cap-256g", default_value = "2s")]
        cap_256g: String,
        /// experiments/scale/server-1t.toml (1 TiB, pgbench), capped at --cap-1t (the figure
        /// is 10min).
        #[arg(long = "server-1t")]
        server_1t: bool,
        /// Simulated time of --server-1t.
        #[arg(long = "cap-1t", default_value = "1s")]
        cap_1t: String,
        /// CPU time of the scaled kbuild at each --growth-gib size for --growth-sim, and the
        /// fitted exponent.
        #[arg(long)]
        growth: bool,
        /// Simulated time of each --growth run.
        #[arg(long, default_value = "1s")]
        growth_sim: String,
        /// Memory sizes of --growth, GiB.
        #[arg(long, value_delimiter = ',', default_value = "1,16,64,256")]
        growth_gib: Vec<u64>,
        /// `table` (default) or `json` (`{"version", "rows": [{key, what, value, unit, how}]}`).
        #[arg(long, default_value = "table")]
        format: String,
    },
    /// Replay a recorded allocation trace (ftrace text of kmem:mm_page_alloc, mm_page_free,
    /// mm_page_free_batched; with mm_page_alloc_extfrag and compaction events for the recorded
    /// column) through the simulated allocator, and print simulated against recorded side by
    /// side: extfrag events, claims and steals, compaction, end state, unmatched frees.
    ///
    /// Columns: the recording, then every --config crossed with every --set. `--config` is
    /// compare's `[LABEL=]SPEC[@KEY=VALUE,...]` (the spec's [machine], knobs and model
    /// switches; its ops and workload are not run); each `--set KEY=VALUE[,KEY=VALUE...]` is
    /// one policy on top of each config, e.g. `--config s2.toml --set vm.defrag_mode=0 --set
    /// vm.defrag_mode=1` gives two simulated columns.
    Replay {
        /// The trace: a trace file (`fraglab host record`) or plain ftrace text (`cat trace`,
        /// `trace-cmd report`).
        trace: PathBuf,
        /// Boot every column in this snapshot's state (`fraglab host snapshot --pages`):
        /// its zones, CPUs and, for knobs the config does not set, its knobs. Default: the
        /// snapshot the trace file embeds, if any.
        #[arg(long)]
        snapshot: Option<PathBuf>,
        /// Boot from the --config machines even when the trace embeds a snapshot.
        #[arg(long, conflicts_with = "snapshot")]
        fresh: bool,
        /// A machine/policy spec (repeatable: one column each, times the --set policies;
        /// optional with a snapshot).
        #[arg(long = "config")]
        configs: Vec<String>,
        /// A policy: KEY=VALUE[,KEY=VALUE...] applied to every --config (repeatable: one
        /// column each).
        #[arg(long = "set")]
        sets: Vec<String>,
        /// Print the report as JSON instead of the table.
        #[arg(long)]
        json: bool,
        /// Also write the report's JSON to this file.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Who polluted my pageblocks? Ranks the sources of a result's `blame` section (a run
    /// with `--blame` or `[run] blame = true`, docs/blame.md) by the pageblocks they made
    /// mixed, then by the blocks compaction could not empty because of their pages, then by
    /// their steals.
    ///
    /// On the live side, FILE may instead be a snapshot (`fraglab host snapshot`) of a kernel
    /// with page_owner, or the text of /sys/kernel/debug/page_owner itself: the pageblocks it
    /// shows mixed are charged to the allocation stacks of their misplaced pages.
    Blame {
        /// A result JSON of `fraglab run -o`, a snapshot, or a page_owner dump.
        result: PathBuf,
        /// `table` (default), `json` or `csv`.
        #[arg(long, default_value = "table")]
        format: String,
    },
    /// List the built-in examples, or print one (`fraglab examples NAME`).
    Examples { name: Option<String> },
    /// The policies `[model] policy` may name (`fraglab policy list [--json]`), docs/policies.md.
    Policy {
        #[command(subcommand)]
        cmd: PolicyCmd,
    },
    /// List the kernel knobs a spec may set, with their kinds and defaults (`--markdown`: the
    /// text of docs/knobs.md, every knob and model switch with what it models, generated from
    /// their declarations).
    Knobs {
        #[arg(long)]
        markdown: bool,
    },
    /// Trace files (`host record`) and plain ftrace text.
    Trace {
        #[command(subcommand)]
        cmd: record::TraceCmd,
    },
    /// Boot a machine of the given size and report the model's host memory per simulated page.
    Footprint {
        /// RAM of the simulated machine, e.g. 24GiB or 1TiB.
        #[arg(long, default_value = "1TiB")]
        memory: String,
    },
    /// Search knob settings for the best value of a metric (the Python package's fraglab.tune).
    ///
    /// Runs `python3 -m fraglab.tune` (`pip install ./crates/py`; Ray Tune when `ray[tune]` is
    /// installed; `$FRAGLAB_PYTHON` names another Python): `fraglab tune SPEC --space KEY=V1,V2 ... --objective NAME [--min] --budget N
    /// [--backend local|ray] [--json OUT]`; `fraglab tune --help` prints the module's options.
    #[command(disable_help_flag = true)]
    Tune {
        /// Passed to `python3 -m fraglab.tune` as they are.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// `FRAGLAB_HOST_MEM=1`: what `fraglab run` shows the model at the end of a timed run — one
/// JSON object on stderr with the host bytes of each of the model's structures
/// (`Mm::host_mem_by_structure`, estimates), their sum, malloc's bytes in use (`mallinfo2`: the whole
/// process, the simulator's side included) and the peak RSS so far. Without the variable, nothing.
fn host_mem_print() -> Box<dyn FnMut(&fraglab_mm::Mm)> {
    if std::env::var("FRAGLAB_HOST_MEM").as_deref() != Ok("1") {
        return Box::new(|_| {});
    }
    Box::new(|mm| {
        let rows = mm.host_mem_by_structure();
        let mut out = String::from("{\"host_mem\": {");
        for (i, (k, b)) in rows.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(&format!("{k:?}: {b}"));
        }
        let sum = mm.host_mem_total();
        // SAFETY: plain libc calls filling values they return or the zeroed struct given.
        let (mi, ru) = unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_SELF, &mut ru);
            (libc::mallinfo2(), ru)
        };
        let pages = mm.pages.state.len() as u64;
        let rss = ru.ru_maxrss as u64 * 1024;
        out.push_str(&format!(
            "}}, \"sum\": {sum}, \"malloc_in_use\": {}, \"peak_rss\": {rss}, \"pfns\": {pages}, \
             \"sum_per_pfn\": {:.2}, \"malloc_per_pfn\": {:.2}, \"peak_rss_per_pfn\": {:.2}}}",
            mi.uordblks + mi.hblkhd,
            sum as f64 / pages as f64,
            (mi.uordblks + mi.hblkhd) as f64 / pages as f64,
            rss as f64 / pages as f64,
        ));
        eprintln!("{out}");
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Cmd::Tune { args } = &cli.cmd {
        return tune::tune(args);
    }
    match dispatch(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fraglab: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the subcommand.
fn dispatch(cli: Cli) -> Result<(), String> {
    match cli.cmd {
        Cmd::Run {
            spec,
            example,
            output,
            flags,
        } => run::run(spec, example, output, flags),
        Cmd::Blame { result, format } => blame::blame(&result, &format),
        Cmd::Compare { args } => compare::dispatch(args),
        Cmd::Report {
            results,
            compare,
            output,
        } => report::report(results, compare, output),
        Cmd::Host { cmd } => host::host(cmd),
        Cmd::Snapshot { cmd } => snapshot::snapshot(cmd),
        Cmd::Validate {
            spec,
            suite,
            rescore,
            quiet_wait,
            runs,
            only,
            sim_only,
            ci,
            idle,
            jobs,
            no_write,
            results_dir,
            kernel_results,
            trace_dir,
            floor,
            format,
            fit_memory,
            dir,
        } => match (spec, suite) {
            _ if rescore.is_some() => validate::rescore(rescore.as_deref().unwrap_or(Path::new("")), &format),
            (_, Some(suite)) => validate::suite(validate::SuiteOptions {
                dir: suite,
                runs,
                only,
                sim_only,
                ci,
                format,
                floor,
                idle_secs: idle,
                jobs,
                no_write,
                workdir: dir,
                results_dir,
                kernel_results,
                quiet_wait_secs: quiet_wait,
                trace_dir,
            }),
            (Some(spec), None) => host::validate(spec, floor, format, fit_memory, dir, false),
            (None, None) => Err("validate: a SPEC or --suite DIR".into()),
        },
        Cmd::Replay {
            trace,
            snapshot,
            fresh,
            configs,
            sets,
            json,
            output,
        } => replay::replay(trace, snapshot, fresh, configs, sets, json, output),
        Cmd::Soak {
            ops,
            seed,
            check_every,
            memory,
            corrupt_at,
        } => soak::soak(soak::SoakOptions {
            ops,
            seed,
            check_every,
            memory,
            corrupt_at,
        }),
        Cmd::Bench {
            max_sim,
            experiments,
            core,
            kbuild_thp,
            mode,
            scale_256g,
            cap_256g,
            server_1t,
            cap_1t,
            growth,
            growth_sim,
            growth_gib,
            format,
        } => {
            let all = !(experiments || core || kbuild_thp || scale_256g || server_1t || growth);
            bench_cmd(BenchSel {
                max_sim: (max_sim != "none").then_some(max_sim),
                experiments: experiments || all,
                core: core || all,
                kbuild_thp: kbuild_thp.then_some(mode),
                scale_256g: (scale_256g || all).then_some(cap_256g),
                server_1t: (server_1t || all).then_some(cap_1t),
                growth: (growth || all).then_some((growth_sim, growth_gib)),
                json: match format.as_str() {
                    "table" => false,
                    "json" => true,
                    f => return Err(format!("--format {f}: expected table or json")),
                },
            })
        }
        Cmd::Examples { name } => examples::examples(name),
        Cmd::Policy {
            cmd: PolicyCmd::List { json },
        } => policy_list(json),
        Cmd::Footprint { memory } => footprint::footprint(memory),
        Cmd::Trace { cmd } => record::trace(cmd),
        Cmd::Knobs { markdown } => knobs::knobs(markdown),
        Cmd::Tune { .. } => unreachable!("main runs `tune` itself, for its exit code"),
    }
}

/// `fraglab policy ...`.
#[derive(clap::Subcommand, Debug)]
enum PolicyCmd {
    /// Every policy with where it comes from and what it does; `--json` for a script.
    List {
        #[arg(long)]
        json: bool,
    },
}

/// `fraglab policy list`: the registry of `fraglab_policies`, then the model switches that
/// stack the kernel's seed variants on any policy.
fn policy_list(json: bool) -> Result<(), String> {
    let list = fraglab_policies::list();
    if json {
        let v: Vec<serde_json::Value> = list
            .iter()
            .map(|p| serde_json::json!({"name": p.name, "origin": p.origin, "summary": p.summary}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?);
        return Ok(());
    }
    let w = list.iter().map(|p| p.name.len()).max().unwrap_or(0);
    println!("{:w$}  {:8}  summary", "policy", "origin");
    for p in &list {
        println!("{:w$}  {:8}  {}", p.name, p.origin, p.summary);
    }
    println!();
    println!("Layers on any policy (the seed series, by model switch):");
    for key in ["folio_mode", "defrag_stage", "costly_order_policy", "v4_position"] {
        let d = fraglab_spec::find_model_switch(key).expect("a model switch");
        println!(
            "  model.{key} = {} (default {})",
            d.choices.join(" | "),
            d.default
        );
    }
    Ok(())
}

/// `--scale 1/K` ([`fraglab_spec::scale::parse_scale`]).
/// A simulated time as specs write it (`540s`, `1500ms`, `9min`).
pub(crate) fn parse_duration_arg(s: &str) -> Result<u64, String> {
    fraglab_spec::parse_duration(s)
}

/// `[machine] checkpoint` set by `--from-checkpoint PATH` (relative to the working directory).
pub(crate) fn checkpoint_in(p: &Path) -> fraglab_spec::CheckpointIn {
    fraglab_spec::CheckpointIn {
        path: p.display().to_string(),
        resolved: p.to_path_buf(),
        line: 0,
    }
}

pub(crate) fn parse_scale(s: &str) -> Result<u32, String> {
    fraglab_spec::scale::parse_scale(s)
}

/// A spec scaled by `--scale` (unchanged without it); the error names the flag.
pub(crate) fn scale_by_flag(
    spec: fraglab_spec::Spec,
    scale: Option<u32>,
) -> Result<fraglab_spec::Spec, String> {
    match scale {
        None => Ok(spec),
        Some(k) => fraglab_spec::scale::scale_spec(&spec, k, 0).map_err(|e| format!("--scale 1/{k}: {e}")),
    }
}

/// `--jobs N`: refused at 0 rather than taken as 1 — zero threads would run nothing, and
/// quietly running one instead hides a typo (or a `$(nproc)` that failed).
pub(crate) fn parse_jobs(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => {
            Err("0 threads would run nothing (expected at least 1; leave --jobs out for one per CPU)".into())
        }
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{s:?}: {e} (expected a number of threads, at least 1)")),
    }
}

/// What `fraglab bench` runs: each `Some` is a selected figure with its cap.
struct BenchSel {
    max_sim: Option<String>,
    experiments: bool,
    core: bool,
    kbuild_thp: Option<String>,
    scale_256g: Option<String>,
    server_1t: Option<String>,
    growth: Option<(String, Vec<u64>)>,
    json: bool,
}

/// `fraglab bench`: the selected figures, each row printed to stderr as it is measured, then
/// the table (or JSON) on stdout. The child runs come first: a child's `ru_maxrss` is at least
/// the bench's own peak when it spawns (see bench.rs), which the in-process figures would raise.
fn bench_cmd(sel: BenchSel) -> Result<(), String> {
    if sel.kbuild_thp.is_some() || sel.scale_256g.is_some() || sel.server_1t.is_some() || sel.growth.is_some()
    {
        // The child runs' specs and result JSONs go there (`bench::run_child`).
        check_output_dir("bench: the temporary directory", &std::env::temp_dir())?;
    }
    let mut rows = Vec::new();
    let progress = |rows: &[bench::Row], from: usize| {
        for r in &rows[from..] {
            eprint!("{}", bench::format_line(r));
        }
    };
    if let Some(mode) = &sel.kbuild_thp {
        if mode != "exact" {
            return Err(format!(
                "--mode {mode}: only `exact` exists today (issue 22 item 3's fast mode is not built)"
            ));
        }
        eprintln!("bench: kbuild-thp.toml whole, mode {mode} ...");
        let r = bench::run_child("kbuild-thp", EXPERIMENTS[0].2)?;
        let n = rows.len();
        rows.extend(bench::child_rows(
            &format!("kbuild_thp.{mode}"),
            &format!("kbuild-thp.toml, 15 builds, {mode}"),
            2 << 30,
            &r,
        ));
        progress(&rows, n);
    }
    for (key, label, text, memory, cap) in [
        (
            "scale_256g",
            "kbuild 256 GiB",
            SCALE_256G,
            256u64 << 30,
            &sel.scale_256g,
        ),
        ("server_1t", "pgbench 1 TiB", SERVER_1T, 1 << 40, &sel.server_1t),
    ] {
        let Some(cap) = cap else { continue };
        eprintln!("bench: {label} for {cap} simulated ...");
        let r = bench::run_child(key, &bench::with_duration(text, cap)?)?;
        let n = rows.len();
        rows.extend(bench::child_rows(key, &format!("{label}, {cap}"), memory, &r));
        progress(&rows, n);
    }
    if let Some((dur, sizes)) = &sel.growth {
        rows.extend(bench::growth(sizes, dur)?);
    }
    if sel.experiments {
        for (key, label, text) in EXPERIMENTS {
            let text = match &sel.max_sim {
                Some(d) => bench::with_duration(text, d)?,
                None => text.to_string(),
            };
            let spec = fraglab_spec::parse_spec(&text, label).map_err(|e| e.to_string())?;
            eprintln!("bench: {label} ...");
            rows.push(bench::sim_ratio(key, label, &spec)?);
            progress(&rows, rows.len() - 1);
        }
    }
    if sel.core {
        eprintln!("bench: allocator, compaction, footprint ...");
        let n = rows.len();
        rows.extend(bench::core_rows());
        progress(&rows, n);
    }
    if sel.json {
        print!("{}", bench::json(&rows));
    } else {
        print!("{}", bench::format(&rows));
    }
    Ok(())
}

/// Prints a spec's warnings ([`fraglab_spec::Spec::warnings`]) on standard error, one line each:
/// `fraglab: warning: spec.toml:12: key K: message`.
pub(crate) fn warn_spec(spec: &fraglab_spec::Spec) {
    for w in &spec.warnings {
        eprintln!("fraglab: warning: {w}");
    }
}

/// Where [`write_via_tmp`] writes `path`: a symlink's target (a dangling link is replaced by the
/// file), else `path` itself.
fn output_target(path: &Path) -> Result<PathBuf, String> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => match std::fs::metadata(path) {
            Err(_) => Ok(path.to_path_buf()),
            Ok(_) => std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display())),
        },
        _ => Ok(path.to_path_buf()),
    }
}

/// The directory a file `path` would be created in (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Checks, before any work, that [`write_via_tmp`] can write an output to `path`, so a bad
/// path fails at once rather than after a long run: `what` names the option (`-o`); the error
/// names the path and the reason. A regular file (or a new one) needs a writable directory —
/// checked by creating and removing the temporary file `write_via_tmp` would use; a device,
/// FIFO or socket is written in place and only needs to exist; a directory is refused.
pub(crate) fn check_output(what: &str, path: &Path) -> Result<(), String> {
    let bad = |why: String| format!("{what} {}: {why}", path.display());
    if path.as_os_str().is_empty() {
        return Err(format!("{what}: an empty path"));
    }
    let target = output_target(path).map_err(&bad)?;
    match std::fs::metadata(&target) {
        Ok(m) if m.is_dir() => return Err(bad("is a directory (expected a file name)".into())),
        Ok(m) if !m.file_type().is_file() => return Ok(()),
        _ => {}
    }
    let dir = parent_dir(&target);
    match std::fs::metadata(dir) {
        Err(e) if missing(&e) => {
            return Err(bad(match first_file_above(dir) {
                Some(f) => format!("{} is not a directory", f.display()),
                None => format!("the directory {} does not exist", dir.display()),
            }))
        }
        Err(e) => return Err(bad(format!("{}: {e}", dir.display()))),
        Ok(m) if !m.is_dir() => return Err(bad(format!("{} is not a directory", dir.display()))),
        Ok(_) => {}
    }
    probe_write(&target.with_extension("tmp-fraglab"))
        .map_err(|e| bad(format!("cannot write in {}: {e}", dir.display())))
}

/// Whether a metadata error means the path is not there: absent, or under a file (ENOTDIR).
fn missing(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR)
}

/// The nearest ancestor of `path` that exists, if it is not a directory.
fn first_file_above(path: &Path) -> Option<&Path> {
    path.ancestors()
        .skip(1)
        .filter(|a| !a.as_os_str().is_empty())
        .find_map(|a| std::fs::metadata(a).ok().map(|m| (a, m)))
        .and_then(|(a, m)| (!m.is_dir()).then_some(a))
}

/// Creates and removes `probe` (left alone if it was there): whether a file can be created in
/// its directory.
fn probe_write(probe: &Path) -> Result<(), std::io::Error> {
    let existed = probe.exists();
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(probe)?;
    if !existed {
        std::fs::remove_file(probe)?;
    }
    Ok(())
}

/// Checks, before any work, that `dir` is a directory files can be written into, or can be
/// created (its nearest existing ancestor is a writable directory). `what` names the option.
pub(crate) fn check_output_dir(what: &str, dir: &Path) -> Result<(), String> {
    let bad = |why: String| format!("{what} {}: {why}", dir.display());
    if dir.as_os_str().is_empty() {
        return Err(format!("{what}: an empty path"));
    }
    let mut at = dir;
    loop {
        match std::fs::metadata(at) {
            Ok(m) if m.is_dir() => break,
            Ok(_) => return Err(bad(format!("{} is not a directory", at.display()))),
            Err(e) if missing(&e) => {
                at = match at.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p,
                    _ => Path::new("."),
                };
            }
            Err(e) => return Err(bad(format!("{}: {e}", at.display()))),
        }
    }
    let probe = at.join(format!(".fraglab-probe-{}", std::process::id()));
    probe_write(&probe).map_err(|e| bad(format!("cannot write in {}: {e}", at.display())))
}

/// The file name a compare label gives under `--results-dir` (`LABEL-runN.json`, `N` from 1):
/// the label with every character but ASCII letters, digits and `-_.,=@+` replaced by `_`, so a
/// label holding a `/` (`kbuild@transparent_hugepage/enabled=never`) or a space stays one file
/// in the directory. The label itself (tables, reports) is unchanged.
pub(crate) fn result_file_name(label: &str, run: usize) -> String {
    let safe: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.,=@+".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    // A label of dots alone would name the directory or its parent.
    let safe = if safe.chars().all(|c| c == '.') {
        safe.replace('.', "_")
    } else {
        safe
    };
    format!("{safe}-run{run}.json")
}

/// Writes `contents` to `path` through a temporary file renamed over it, so nothing is
/// half-written.
///
/// Only a regular file (or a new one) is replaced that way. A device, FIFO or socket
/// (`-o /dev/null`, `-o /dev/stdout`, a named pipe) is written in place: renaming over it would
/// replace the special file itself — run as root, `-o /dev/null` once turned the machine's
/// /dev/null into a regular file, which every later reader of /dev/null (cargo's rustc probe
/// among them) then read back. A symlink is followed, so the link stays and its target is
/// replaced.
fn write_via_tmp(path: &Path, contents: impl AsRef<[u8]>) -> Result<(), String> {
    let err = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    let target = output_target(path)?;
    if let Ok(m) = std::fs::metadata(&target) {
        if !m.file_type().is_file() {
            if m.is_dir() {
                return Err(format!("{}: is a directory", path.display()));
            }
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(&target)
                .map_err(|e| err(path, e))?;
            return std::io::Write::write_all(&mut f, contents.as_ref()).map_err(|e| err(path, e));
        }
    }
    let tmp = target.with_extension("tmp-fraglab");
    std::fs::write(&tmp, contents).map_err(|e| err(&tmp, e))?;
    std::fs::rename(&tmp, &target).map_err(|e| err(path, e))
}
