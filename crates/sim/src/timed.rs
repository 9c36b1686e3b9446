//! The timed run: a spec's `[workload]` on the discrete-event engine, producing a
//! [`RunResult`] (the JSON schema of `fraglab_spec::result`, whose mmtests-style rows of
//! the seeds' published tables are `fraglab_spec::result::rows`).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};

use fraglab_mm::Mm;
use fraglab_spec::result::{vmstat_delta_between, PageblockMap, Prelude, RunResult, Sample, RESULT_SCHEMA};
use fraglab_spec::Spec;

use crate::boot::boot;
use crate::cost::CostModel;
use crate::engine::Engine;
use crate::error::RunError;
use crate::metrics::Metrics;
use crate::snapshot::{histogram, pageblock_snapshot, proc_snapshot, sample, vmstat_values};
use crate::workload::{generators, Run};

/// The cost model of a spec: defaults with its `[cost]` overrides; `read` steps read from the
/// loop device when the spec's files are on loop images (`[host] loop_images`).
pub fn cost_model(spec: &Spec) -> CostModel {
    let mut c = CostModel {
        read_on_loop: spec.host.loop_images,
        ..CostModel::default()
    };
    for (k, v) in &spec.cost {
        *c.get_mut(k).expect("[cost] keys are validated against COST_KEYS") = *v;
    }
    // A scale model (issue 35): the writeback device is one queue the whole machine shares,
    // so 1/K of the machine gets 1/K of its bandwidth (`fraglab_spec::scale`).
    if let Some(sc) = &spec.run.scale {
        c.write_io_ns = c.write_io_ns.saturating_mul(sc.k as u64);
    }
    c
}

/// Runs the spec's workload to its end (or its duration). Deterministic: the result depends only
/// on the spec (and its seed); `wall_ns` is left 0 for the caller to fill in if it wants.
pub fn run_workload(spec: &Spec) -> Result<RunResult, RunError> {
    run_workload_with_progress(spec, &mut |_| {})
}

/// Where a timed run is, as [`run_workload_with_progress`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedProgress {
    /// Simulated time reached.
    pub now_ns: u64,
    /// The workload's duration: the run stops there at the latest.
    pub cap_ns: u64,
    /// When the workload's generators should be done ([`Engine::expected_end`]: their work
    /// extrapolated at its rate so far, or the time they run until), within `[now, cap]`;
    /// `None` while a generator cannot tell yet.
    pub expected_end_ns: Option<u64>,
}

/// [`run_workload`], calling `progress` as simulated time advances (at most once per simulated
/// 100 ms). The progress estimate only reads the tasks: the result is the same.
pub fn run_workload_with_progress(
    spec: &Spec,
    progress: &mut dyn FnMut(&TimedProgress),
) -> Result<RunResult, RunError> {
    run_workload_inspect(spec, progress, &mut |_| {})
}

/// [`run_workload_with_progress`] that stops soon after `cancel` is set: it is read after boot
/// and after every event of the engine, and a run that saw it set ends with
/// [`RunError::interrupted`] instead of a result (the Python package's Ctrl-C). Never set, the
/// result is [`run_workload`]'s, byte for byte: reading the flag changes nothing in the model.
pub fn run_workload_cancellable(
    spec: &Spec,
    progress: &mut dyn FnMut(&TimedProgress),
    cancel: &AtomicBool,
) -> Result<RunResult, RunError> {
    run_workload_full(spec, progress, &mut |_| {}, &mut |_| {}, None, Some(cancel))
}

/// [`run_workload_with_progress`], showing `at_end` the model as the run ends (before the
/// result is built; `FRAGLAB_HOST_MEM`'s host-memory breakdown). `at_end` cannot change it.
pub fn run_workload_inspect(
    spec: &Spec,
    progress: &mut dyn FnMut(&TimedProgress),
    at_end: &mut dyn FnMut(&Mm),
) -> Result<RunResult, RunError> {
    run_workload_hooked(spec, progress, at_end, &mut |_| {})
}

/// [`run_workload_inspect`], handing `setup` the engine once the workload's tasks are spawned
/// and before it runs. For tests (a tick hook that corrupts the model shows that `[run]
/// debug_vm` catches it mid-run); anything `setup` changes changes the run.
#[doc(hidden)]
pub fn run_workload_hooked(
    spec: &Spec,
    progress: &mut dyn FnMut(&TimedProgress),
    at_end: &mut dyn FnMut(&Mm),
    setup: &mut dyn FnMut(&mut Engine),
) -> Result<RunResult, RunError> {
    run_workload_full(spec, progress, at_end, setup, None, None)
}

/// [`run_workload_inspect`], streaming the run's whole trace text to `out` (issue 32: the input
/// of `fraglab trace diff`), as it goes: memory stays bounded however long the trace.
///
/// The events recorded are the spec's `run.trace` together with
/// [`DIFF_EVENTS`](fraglab_spec::DIFF_EVENTS) (so the result's `trace_counts` and
/// `proc_end["trace"]` count and hold those too); the model's behaviour is the same (tracing
/// only observes), so every other part of the result is what [`run_workload`] gives. With a
/// `{ measure = true }` step, the line of [`crate::tracediff::marker_line`] is written where the
/// measured part starts (before the first event at or after `measure_start_ns`), which `trace
/// diff` starts its comparison at. A write error ends the run with an error naming `name`.
pub fn run_workload_trace_to(
    spec: &Spec,
    out: Box<dyn std::io::Write>,
    name: &str,
    progress: &mut dyn FnMut(&TimedProgress),
    at_end: &mut dyn FnMut(&Mm),
) -> Result<RunResult, RunError> {
    let mut s = spec.clone();
    let mut on: Vec<&str> = fraglab_spec::DIFF_EVENTS.to_vec();
    on.extend(fraglab_spec::TRACE_EVENTS.iter().filter(|e| {
        s.run
            .trace
            .iter()
            .any(|n| e.split_once(':').is_some_and(|(_, x)| x == n))
    }));
    s.run.trace = fraglab_spec::TRACE_EVENTS
        .iter()
        .filter(|e| on.contains(e))
        .map(|e| e.split_once(':').map_or(*e, |(_, n)| n).to_string())
        .collect();
    let sink = TraceSink {
        out,
        name: name.to_string(),
        err: None,
        marked: false,
        buf: String::new(),
    };
    run_workload_full(&s, progress, at_end, &mut |_| {}, Some(sink), None)
}

fn run_workload_full(
    spec: &Spec,
    progress: &mut dyn FnMut(&TimedProgress),
    at_end: &mut dyn FnMut(&Mm),
    setup: &mut dyn FnMut(&mut Engine),
    sink: Option<TraceSink>,
    cancel: Option<&AtomicBool>,
) -> Result<RunResult, RunError> {
    let cancelled = || cancel.is_some_and(|c| c.load(Ordering::Relaxed));
    let w = spec
        .workload
        .as_ref()
        .ok_or_else(|| RunError(format!("{}: no [workload] to run", spec.file)))?;
    if let Some(c) = &spec.run.checkpoint {
        // Found out before the run, not at the checkpoint's time.
        let dir = c.file.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(d) = dir.filter(|d| !d.is_dir()) {
            return Err(RunError(format!(
                "{}: {}: no directory {} to write the checkpoint in",
                key_at(spec, c.line, "run.checkpoint_at", "--checkpoint-at"),
                c.file.display(),
                d.display()
            )));
        }
    }
    let mut live = match &spec.machine.checkpoint {
        Some(c) => continue_from(spec, c, sink)?,
        None => start(spec, w, sink, &cancelled)?,
    };
    if cancelled() {
        return Err(RunError::interrupted(&spec.file));
    }
    setup(&mut live.e);
    let (end_ns, written) = run_to_end(&mut live, spec, w.duration_ns, progress, &cancelled)?;
    if cancelled() {
        return Err(RunError::interrupted(&spec.file));
    }
    let mut r = finish(spec, live, end_ns, at_end)?;
    r.checkpoint = written;
    Ok(r)
}

/// Everything a timed run holds while it runs, and what a checkpoint saves.
#[derive(serde::Serialize, serde::Deserialize)]
struct Live {
    e: Engine,
    #[serde(with = "crate::checkpoint::generators")]
    gens: Vec<Box<dyn crate::workload::Generator>>,
    rec: Recorder,
    proc_start: BTreeMap<String, String>,
    start: Vec<(String, i64)>,
    cadence: MapCadence,
}

/// Boots the spec's machine and spawns its workload: the run at time 0.
fn start(
    spec: &Spec,
    w: &fraglab_spec::WorkloadSpec,
    sink: Option<TraceSink>,
    cancelled: &dyn Fn() -> bool,
) -> Result<Live, RunError> {
    let mut e = Engine::new(boot(spec)?, cost_model(spec), spec.run.seed);
    if spec.run.blame {
        e.mm.enable_blame();
    }
    if cancelled() {
        return Err(RunError::interrupted(&spec.file));
    }
    e.sched = spec.model.sched;
    let metrics = Rc::new(RefCell::new(Metrics::default()));
    // A task bound to a node runs on its CPUs: the node must have some.
    let bound = w
        .kbuild
        .iter()
        .map(|k| ("kbuild", k.line, k.numa.node))
        .chain(w.thp_burst.iter().map(|b| ("thp_burst", b.line, b.numa.node)))
        .chain(w.task.iter().map(|t| ("task", t.line, t.numa.node)));
    for (kind, line, node) in bound {
        if let Some(n) = node.filter(|&n| e.mm.numa.nr_cpus_node(n) == 0) {
            return Err(RunError(format!(
                "{}:{line}: key workload.{kind}.numa_node: node {n} has no CPUs to run the tasks on",
                spec.file
            )));
        }
    }
    let mut gens = generators(w);
    let mut run = Run::new(&mut e, spec, w, metrics.clone());
    for (g, tag) in gens.iter_mut().zip(crate::workload::GENERATOR_TAGS) {
        run.e.set_spawn_tag(tag);
        g.spawn(&mut run);
    }
    e.set_spawn_tag("kernel");
    if let Some(mut cfg) = crate::boot::damon_config(spec) {
        // Booted from a snapshot: the kdamond goes on from the kernel's regions and ages
        // (none recorded: it starts cold, every region at age 0).
        if spec.machine.snapshot.is_some() {
            let loaded = crate::restore::load(spec)?;
            cfg.start = crate::restore::damon_start(&loaded.header);
            cfg.start_applied = crate::restore::damon_applied(&loaded.header);
        }
        e.start_kdamond(cfg);
    }
    let rec = Recorder::new(&e, sink, metrics);
    rec.install(&mut e);
    let proc_start = proc_snapshot(&e.mm);
    let start = vmstat_values(&e.mm);
    if spec.run.debug_vm {
        e.check_every = spec.run.debug_vm_every.max(1);
    }
    let blocks = rec.maps.borrow().first().map_or(1, |m| m.types.len() as u64);
    Ok(Live {
        e,
        gens,
        rec,
        proc_start,
        start,
        cadence: MapCadence::new(blocks),
    })
}

/// What a checkpoint file holds besides its header: the run, and the policy's own state.
#[derive(serde::Serialize)]
struct SavedRef<'a> {
    live: &'a Live,
    policy: String,
    policy_state: Vec<u8>,
}

#[derive(serde::Deserialize)]
struct SavedOwned {
    live: Live,
    policy: String,
    policy_state: Vec<u8>,
}

/// Where an error about a checkpoint key points: the spec's line, or the command-line option
/// that set it (line 0).
fn key_at(spec: &Spec, line: usize, key: &str, option: &str) -> String {
    match line {
        0 => format!("{}: {option}", spec.file),
        l => format!("{}:{l}: key {key}", spec.file),
    }
}

/// Writes the checkpoint of `live` (`[run] checkpoint_at`) to `out.file`.
fn write_checkpoint(
    spec: &Spec,
    live: &Live,
    out: &fraglab_spec::CheckpointOut,
) -> Result<fraglab_spec::result::CheckpointWritten, RunError> {
    let p = live.e.mm.policy();
    let at = key_at(spec, out.line, "run.checkpoint_at", "--checkpoint-at");
    let policy_state = p.save_state().map_err(|m| RunError(format!("{at}: {m}")))?;
    let header = crate::checkpoint::CheckpointHeader {
        kind: "fraglab-checkpoint".into(),
        fraglab: env!("CARGO_PKG_VERSION").into(),
        layout: crate::checkpoint::LAYOUT.into(),
        t_ns: live.e.now(),
        at_ns: out.at_ns,
        spec_file: spec.file.clone(),
        spec_name: spec.name.clone(),
        seed: spec.run.seed,
        fingerprint: crate::fork::fingerprint(spec),
        settings: crate::fork::settings_fingerprint(spec),
        policy: p.name(),
    };
    let saved = SavedRef {
        live,
        policy: p.name(),
        policy_state,
    };
    let bytes = crate::checkpoint::write_file(&out.file, header, &saved)
        .map_err(|e| RunError(format!("{at}: {e}")))?;
    Ok(fraglab_spec::result::CheckpointWritten {
        file: out.file.display().to_string(),
        t_ns: live.e.now(),
        at_ns: out.at_ns,
        bytes,
    })
}

/// Reads the checkpoint of `[machine] checkpoint` and makes it the run of `spec`: checks that
/// `spec` may continue it, applies `spec`'s settings where they differ from the checkpoint's
/// and installs `spec`'s policy (with the saved state when it is the same policy).
fn continue_from(
    spec: &Spec,
    c: &fraglab_spec::CheckpointIn,
    sink: Option<TraceSink>,
) -> Result<Live, RunError> {
    let at = key_at(spec, c.line, "machine.checkpoint", "--from-checkpoint");
    let (reader, h) =
        crate::checkpoint::read_header(&c.resolved).map_err(|e| RunError(format!("{at}: {e}")))?;
    if let Some(what) = crate::fork::first_difference(&h.fingerprint, &crate::fork::fingerprint(spec)) {
        return Err(RunError(format!(
            "{at}: {} was written by {} ({}), whose [{what}] differs from this spec's: a run \
             continues a checkpoint under other knobs and [model] {} only",
            c.path,
            h.spec_file,
            h.spec_name.as_deref().unwrap_or("unnamed"),
            crate::fork::FORKABLE_MODEL_KEYS.join(", ")
        )));
    }
    let saved: SavedOwned =
        crate::checkpoint::read_state(reader, &h).map_err(|e| RunError(format!("{at}: {e}")))?;
    let mut live = saved.live;
    let cfg = crate::boot::boot_config(spec)?;
    if crate::fork::settings_fingerprint(spec) != h.settings {
        live.e.mm.apply_settings(&cfg);
    }
    live.e.mm.set_policy(cfg.policy.build());
    if live.e.mm.policy().name() == saved.policy {
        live.e
            .mm
            .restore_policy_state(&saved.policy_state)
            .map_err(|m| RunError(format!("{at}: {m}")))?;
    }
    *live.rec.sink.borrow_mut() = sink;
    live.rec.install(&mut live.e);
    Ok(live)
}

/// The end of a timed run: the checks, and the result.
fn finish(spec: &Spec, live: Live, end_ns: u64, at_end: &mut dyn FnMut(&Mm)) -> Result<RunResult, RunError> {
    let Live {
        mut e,
        gens,
        rec,
        proc_start,
        start,
        ..
    } = live;
    let metrics = rec.metrics.clone();
    if let Some((steps, t, v)) = e.violation.take() {
        return Err(RunError(format!(
            "{}: [run] debug_vm: invariant violated after task step {steps} (t = {:.3} s): {v}",
            spec.file,
            t as f64 / 1e9
        )));
    }
    at_end(&e.mm);
    // The end-of-run check: with `debug_vm`, the full one (counted in `debug_vm_checks` as the
    // other checks are); otherwise the default, every list and counter in full and the memory
    // map and the folios' random-access checks on a sample chosen by the run's seed
    // (`Mm::check_invariants_sampled`, which checks a machine of up to 16 GiB in full).
    let end_check = if spec.run.debug_vm {
        e.checks += 1;
        e.mm.check_invariants().map(|_| ())
    } else {
        e.mm.check_invariants_sampled(&fraglab_mm::debug_vm::CheckSample::end_of_run(spec.run.seed))
    };
    end_check.map_err(|v| {
        RunError(format!(
            "{}: invariant violated at the end of the run: {v}",
            spec.file
        ))
    })?;
    // Phases: with a `measure` step, the deltas start where it ran, and the part before it
    // is the prelude.
    let mark = metrics.borrow().measure.clone();
    let measured_from = mark.as_ref().map_or(&start, |m| &m.vmstat);
    let mut r = result(spec, &mut e, &rec, proc_start, measured_from, end_ns);
    r.blame = e.mm.blame.as_deref().map(blame_result);
    r.policy = policy_result(&e.mm);
    if let Some(sink) = rec.sink.borrow_mut().as_mut() {
        sink.finish(mark.as_ref().map(|m| m.t_ns))?;
    }
    if let Some(m) = &mark {
        r.measure_start_ns = Some(m.t_ns);
        r.prelude = Some(Prelude {
            duration_ns: m.t_ns,
            vmstat_delta: vmstat_delta_between(
                &start.iter().cloned().collect(),
                &m.vmstat.iter().cloned().collect(),
            ),
        });
    }
    let m = metrics.borrow();
    r.fault_latency = m
        .fault_latency
        .iter()
        .map(|(&(order, path), h)| {
            let mut l = histogram(order, path.name(), h);
            if let Some(&(n, ns)) = m.host_faults.get(&(order, path)) {
                (l.host_faults, l.host_fault_ns) = (n, ns);
            }
            l
        })
        .collect();
    r.fault_latency_cpu = m
        .fault_latency
        .iter_cpu()
        .map(|(&(order, path), h)| histogram(order, path.name(), h))
        .collect();
    for g in &gens {
        g.result(&m, &mut r);
    }
    if let Some(t) = r.measure_start_ns {
        // Phases: the bursts and builds of the measured part (started in it).
        r.bursts.retain(|b| b.start_ns >= t);
        r.builds.retain(|b| b.start_ns >= t);
    }
    if let Some(sc) = &spec.run.scale {
        r.schema = fraglab_spec::result::RESULT_SCHEMA_SCALED;
        r.scale = Some(scale_result(spec, sc, &r.vmstat_delta));
    }
    Ok(r)
}

/// A scale model's [`RunResult::scale`]: its K and label, the scaled and the full-size
/// machine, and the vmstat deltas × K.
fn scale_result(
    spec: &Spec,
    sc: &fraglab_spec::scale::ScaleSpec,
    delta: &BTreeMap<String, i64>,
) -> fraglab_spec::result::ScaleResult {
    let m = &spec.machine;
    let memory_bytes = match (&m.zones, m.memory_bytes) {
        (Some(z), _) => z.iter().map(|z| z.managed).sum::<u64>() * fraglab_types::page::PAGE_SIZE,
        (None, Some(b)) => b,
        (None, None) => 0,
    };
    fraglab_spec::result::ScaleResult {
        label: sc.label(),
        factor: sc.k,
        memory_bytes,
        cpus: m.cpus,
        full_memory_bytes: sc.full_memory_bytes,
        full_cpus: sc.full_cpus,
        vmstat_delta_scaled_up: delta
            .iter()
            .map(|(n, v)| (n.clone(), v.saturating_mul(sc.k as i64)))
            .collect(),
    }
}

/// What a timed run records as it goes: a sample per tick, pageblock maps on the
/// [`MapCadence`] (taken by [`run_to_end`]) and, with `[run] trace`, the trace events.
#[derive(serde::Serialize, serde::Deserialize)]
struct Recorder {
    #[serde(with = "crate::checkpoint::shared")]
    samples: Rc<RefCell<Vec<Sample>>>,
    #[serde(with = "crate::checkpoint::shared")]
    maps: Rc<RefCell<Vec<PageblockMap>>>,
    /// The events counted per name over the run (as the host engine's `--trace` counts them)
    /// and the first TRACE_KEEP_BYTES of their ftrace text.
    #[serde(with = "crate::checkpoint::shared")]
    traced: Rc<RefCell<(BTreeMap<String, u64>, String)>>,
    /// [`run_workload_trace_to`]: where the whole text goes (not in a checkpoint: a continued
    /// run streams to its own).
    #[serde(skip)]
    sink: Rc<RefCell<Option<TraceSink>>>,
    #[serde(with = "crate::checkpoint::shared")]
    metrics: Rc<RefCell<Metrics>>,
}

/// The whole trace text of a run, streamed ([`run_workload_trace_to`]).
struct TraceSink {
    out: Box<dyn std::io::Write>,
    name: String,
    /// The first write error (nothing more is written after it).
    err: Option<std::io::Error>,
    /// The measure marker line is written.
    marked: bool,
    /// One record's text.
    buf: String,
}

impl TraceSink {
    fn write(&mut self, text: &str) {
        if self.err.is_none() {
            if let Err(e) = self.out.write_all(text.as_bytes()) {
                self.err = Some(e);
            }
        }
    }

    /// Writes `r` (after the marker, when `measure_ns` is known and `r` is not before it).
    fn record(&mut self, r: &fraglab_mm::trace::TraceRecord, measure_ns: Option<u64>) {
        if let Some(t) = measure_ns.filter(|&t| !self.marked && r.ts_ns >= t) {
            self.marked = true;
            self.write(&crate::tracediff::marker_line(t));
        }
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        r.render(&mut buf);
        self.write(&buf);
        self.buf = buf;
    }

    /// The marker if the run measured but no event came after it; flushes.
    fn finish(&mut self, measure_ns: Option<u64>) -> Result<(), RunError> {
        if let Some(t) = measure_ns.filter(|_| !self.marked) {
            self.marked = true;
            self.write(&crate::tracediff::marker_line(t));
        }
        if self.err.is_none() {
            if let Err(e) = self.out.flush() {
                self.err = Some(e);
            }
        }
        match self.err.take() {
            Some(e) => Err(RunError(format!("{}: cannot write the trace: {e}", self.name))),
            None => Ok(()),
        }
    }
}

impl Recorder {
    /// Takes the first sample and map.
    fn new(e: &Engine, sink: Option<TraceSink>, metrics: Rc<RefCell<Metrics>>) -> Recorder {
        Recorder {
            samples: Rc::new(RefCell::new(vec![sample(&e.mm, 0)])),
            maps: Rc::new(RefCell::new(vec![pageblock_snapshot(&e.mm, 0)])),
            traced: Rc::new(RefCell::new((BTreeMap::<String, u64>::new(), String::new()))),
            sink: Rc::new(RefCell::new(sink)),
            metrics,
        }
    }

    /// Registers the tick hook that takes the other samples and empties the trace buffer
    /// (every tick, so that a long run does not hold all its events).
    fn install(&self, e: &mut Engine) {
        let (s2, t2, k2, m2) = (
            self.samples.clone(),
            self.traced.clone(),
            self.sink.clone(),
            self.metrics.clone(),
        );
        e.on_tick(Box::new(move |t, mm| {
            s2.borrow_mut().push(sample(mm, t));
            drain_trace(mm, &mut t2.borrow_mut(), &mut k2.borrow_mut(), &m2);
        }));
    }
}

/// Pageblock map cells (blocks × maps) a run holds at most: a few hundred MB of JSON on a
/// 1 TiB machine's 524,288 blocks, as before the cadence below.
const MAP_CELLS: u64 = 64 << 20;

/// When the pageblock maps are taken: enough of them to see the run change however soon the
/// workload ends before its `duration` (a kbuild burst run of 25 s under a 10-minute cap
/// had 7), and a bounded number on any machine. A map every `step` of simulated time, from
/// 100 ms, at the first event at or after each multiple of the step; once more than `max`
/// are held, the step doubles and only the first map of each new step is kept, so a run of any
/// length ends with between `max / 2` and `max` maps, evenly spaced. `max` is
/// [`MAP_CELLS`] / blocks, between 16 and 240. Taking a map reads the model, never changes it:
/// only the result's `pageblock_maps` depend on the cadence.
#[derive(serde::Serialize, serde::Deserialize)]
struct MapCadence {
    step: u64,
    next: u64,
    max: usize,
}

impl MapCadence {
    fn new(blocks: u64) -> MapCadence {
        MapCadence {
            step: 100_000_000,
            next: 100_000_000,
            max: (MAP_CELLS / blocks.max(1)).clamp(16, 240) as usize,
        }
    }

    /// Takes a map (`take()`, the map at `now`) if a step boundary has passed, thinning the
    /// maps when too many.
    fn tick(&mut self, now: u64, maps: &mut Vec<PageblockMap>, take: impl FnOnce() -> PageblockMap) {
        if now < self.next {
            return;
        }
        maps.push(take());
        while maps.len() > self.max {
            self.step *= 2;
            let step = self.step;
            let mut last = None;
            maps.retain(|m| {
                let slot = m.t_ns / step;
                let keep = last != Some(slot);
                last = Some(slot);
                keep
            });
        }
        self.next = (now / self.step + 1) * self.step;
    }
}

/// Runs the engine until the workload is done or `duration` has passed, reporting progress at
/// most once per simulated 100 ms and taking pageblock maps on the [`MapCadence`]; stops
/// early after the event that finds `cancelled` true. With `[run] checkpoint_at`, writes the
/// checkpoint after the first event at or after its time (an error stops the run). Returns
/// the end time.
fn run_to_end(
    live: &mut Live,
    spec: &Spec,
    duration: u64,
    progress: &mut dyn FnMut(&TimedProgress),
    cancelled: &dyn Fn() -> bool,
) -> Result<(u64, Option<fraglab_spec::result::CheckpointWritten>), RunError> {
    let mut last = 0u64;
    let mut ckpt = spec.run.checkpoint.as_ref().filter(|c| c.at_ns < duration);
    let mut written = None;
    loop {
        let Live { e, rec, cadence, .. } = &mut *live;
        let maps = &rec.maps;
        let end = e.run(duration, |e| {
            let now = e.now();
            if now >= last + 100_000_000 {
                last = now;
                progress(&TimedProgress {
                    now_ns: now,
                    cap_ns: duration,
                    expected_end_ns: e.expected_end(duration),
                });
            }
            cadence.tick(now, &mut maps.borrow_mut(), || pageblock_snapshot(&e.mm, now));
            e.workload_done() || cancelled() || ckpt.is_some_and(|c| now >= c.at_ns)
        });
        // Stopped at the checkpoint's time (not by the duration): write it and go on, unless
        // the workload ended at this very event. The engine's run resumes with the next event
        // as if it had not stopped.
        match ckpt.take() {
            Some(c) if end >= c.at_ns && end < duration && !cancelled() => {
                written = Some(write_checkpoint(spec, live, c)?);
                if live.e.workload_done() {
                    return Ok((end, written));
                }
            }
            _ => return Ok((end, written)),
        }
    }
}

/// The run's result without the generators' parts: vmstat deltas, samples, the trace, the
/// model's own work, the pageblock maps and the /proc files.
fn result(
    spec: &Spec,
    e: &mut Engine,
    rec: &Recorder,
    proc_start: BTreeMap<String, String>,
    start: &[(String, i64)],
    end_ns: u64,
) -> RunResult {
    drain_trace(
        &mut e.mm,
        &mut rec.traced.borrow_mut(),
        &mut rec.sink.borrow_mut(),
        &rec.metrics,
    );
    let (trace_counts, trace_text) = std::mem::take(&mut *rec.traced.borrow_mut());
    let end = vmstat_values(&e.mm);
    let vmstat_delta = start
        .iter()
        .zip(&end)
        .map(|((n, a), (_, b))| (n.clone(), b - a))
        .collect();
    // A last sample at the end of the run, as the host engine takes one when its run ends
    // between two sampling periods: the census rows ("(end)") read the last sample, which
    // otherwise showed the machine up to a tick before the end — before the exits and
    // everything else of the last partial second (compaction-test's 2.48 s run ended with
    // its sample of 2.0 s, before the munmaps and the pool).
    let samples = {
        let mut s = rec.samples.borrow().clone();
        if s.last().is_none_or(|x| x.t_ns < end_ns) {
            s.push(sample(&e.mm, end_ns));
        }
        s
    };
    RunResult {
        schema: RESULT_SCHEMA,
        engine: "sim".into(),
        spec_name: spec.name.clone(),
        seed: spec.run.seed,
        duration_ns: end_ns,
        vmstat_delta,
        samples,
        trace_counts: trace_counts.clone(),
        sim_work: sim_work(e),
        lock_stat: lock_stat(e),
        pageblock_maps: {
            let mut v = rec.maps.borrow().clone();
            if v.last().is_none_or(|m| m.t_ns != end_ns) {
                v.push(pageblock_snapshot(&e.mm, end_ns));
            }
            v
        },
        proc_start,
        proc_end: {
            let mut p = proc_snapshot(&e.mm);
            if !trace_text.is_empty() {
                p.insert("trace".into(), trace_text);
            }
            p
        },
        wall_ns: 0,
        // The snapshot booted from is in the cache by now (`boot` loaded it).
        snapshot: match &spec.machine.snapshot {
            Some(s) => crate::restore::load(spec)
                .ok()
                .map(|l| crate::restore::snapshot_match(&s.path, &l.reconstruction.report)),
            None => None,
        },
        ..Default::default()
    }
}

/// The engine's locks as /proc/lock_stat reports them ([`crate::lock`]); the drains skipped
/// because another CPU held `pcpu_drain_mutex` are its failed try-locks, async compaction's
/// trylocks that found the zone or LRU lock held are theirs.
fn lock_stat(e: &Engine) -> Vec<fraglab_spec::result::LockStatResult> {
    use crate::lock::LockId;
    LockId::ALL
        .iter()
        .map(|&id| {
            let s = e.locks.stat(id);
            fraglab_spec::result::LockStatResult {
                name: id.name().to_string(),
                acquisitions: s.acquisitions,
                contentions: s.contentions,
                waittime_min_ns: s.wait_min_ns,
                waittime_max_ns: s.wait_max_ns,
                waittime_total_ns: s.wait_total_ns,
                holdtime_max_ns: s.hold_max_ns,
                holdtime_total_ns: s.hold_total_ns,
                trylock_failed: match id {
                    LockId::PcpDrain => e.mm.work.sum.drains_skipped,
                    // Async compaction's `compact_lock_irqsave` (§24.5).
                    LockId::Zone | LockId::Lru => {
                        e.mm.cur
                            .locks_busy
                            .as_ref()
                            .map_or(s.trylock_failed, |b| b.trylock_failed[id as usize])
                    }
                },
            }
        })
        .collect()
}

/// The allocator's work that /proc/vmstat does not count, and the kernel threads' CPU time,
/// the time they were runnable but waited for a CPU (`[model] sched`) and the time their
/// steps waited on their CPU (locks, writeback; part of their CPU time).
fn sim_work(e: &Engine) -> BTreeMap<String, u64> {
    let w = &e.mm.work.sum;
    // Node 0's threads (a multi-node machine's other nodes' threads are in the task table).
    let (ks, kc) = (e.task_stats(e.kswapd[0]), e.task_stats(e.kcompactd[0]));
    [
        ("alloc_slowpaths", w.slowpaths),
        ("direct_reclaim_calls", w.reclaim_calls),
        ("drain_all_pages", w.drains),
        ("drain_all_pages_skipped", w.drains_skipped),
        ("pcp_pages_drained", w.drained_pages),
        ("kswapd_cpu_ns", ks.cpu_ns),
        ("kswapd_runq_wait_ns", ks.runq_wait_ns),
        ("kswapd_wait_ns", ks.wait_ns),
        ("kswapd_steps", ks.steps),
        ("kcompactd_cpu_ns", kc.cpu_ns),
        ("kcompactd_runq_wait_ns", kc.runq_wait_ns),
        ("kcompactd_wait_ns", kc.wait_ns),
        ("kcompactd_steps", kc.steps),
    ]
    .into_iter()
    // `[run] debug_vm`: the invariant checks made (every `debug_vm_every` steps and at the end).
    .chain((e.check_every > 0).then_some(("debug_vm_checks", e.checks)))
    .chain(reporting_work(e))
    .chain(bdev_work(&e.mm))
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Free page reporting's figures for `sim_work` (none without a device).
fn reporting_work(e: &Engine) -> Vec<(&'static str, u64)> {
    let r = &e.mm.reporting;
    let Some(order) = r.order() else {
        return Vec::new();
    };
    let s = r.stats;
    vec![
        ("page_reporting_order", order as u64),
        ("page_reporting_passes", s.passes),
        ("page_reporting_reports", s.reports),
        ("page_reporting_chunks", s.chunks),
        ("page_reporting_reported_kib", s.pages * 4),
        ("page_reporting_retyped_blocks", s.retyped_blocks),
        ("page_reporting_zones_skipped", s.zones_skipped),
        ("page_reporting_isolate_refused", s.isolate_refused),
        ("page_reporting_budget_spent", s.budget_spent),
        (
            "page_reporting_reported_free_kib_end",
            e.mm.reported_free_pages() * 4,
        ),
        ("host_discarded_kib_end", e.mm.host_discarded_pages() * 4),
        ("host_fault_pages", s.host_fault_pages),
        ("host_fault_ns", s.host_fault_pages * e.cost.host_fault_ns),
    ]
}

/// With ext4 metadata in the block device's page cache (docs/model §33, mm's `bdev.rs`):
/// the bdev folios allocated UNMOVABLE and MOVABLE over the run, those cached at its end, the
/// cold inode-table reads, jbd2's commits and the `buffer_head` slab pages at the end. Nothing
/// for a run without an ext4 filesystem.
fn bdev_work(mm: &Mm) -> Vec<(&'static str, u64)> {
    let fs = &mm.cache.bdev.fs;
    if fs.is_empty() {
        return Vec::new();
    }
    let sum = |f: fn(&fraglab_mm::bdev::Ext4Stats) -> u64| fs.iter().map(|x| f(&x.stats)).sum::<u64>();
    let cached: u64 = mm
        .folios
        .census_of(fraglab_mm::folio::FolioKind::Bdev)
        .iter()
        .sum();
    vec![
        ("bdev_alloc_unmovable", sum(|s| s.unmovable())),
        ("bdev_alloc_movable", sum(|s| s.movable())),
        ("bdev_pages_end", cached),
        ("bdev_inode_table_reads", sum(|s| s.itable_reads)),
        ("jbd2_commits", sum(|s| s.commits)),
        ("buffer_head_slab_pages_end", mm.bh_census().1),
    ]
}

/// How much ftrace text of `[run] trace` a timed run keeps (in `proc_end["trace"]`).
pub const TRACE_KEEP_BYTES: usize = 4 << 20;

/// Moves the mm's trace records into the run's counts per event name and the kept text, and
/// with a sink, all of their text to it (with the measure marker once the measure step ran).
fn drain_trace(
    mm: &mut Mm,
    (counts, text): &mut (BTreeMap<String, u64>, String),
    sink: &mut Option<TraceSink>,
    metrics: &RefCell<Metrics>,
) {
    let records = mm.take_trace();
    let measure_ns = match sink {
        Some(s) if !s.marked && !records.is_empty() => metrics
            .try_borrow()
            .ok()
            .and_then(|m| m.measure.as_ref().map(|m| m.t_ns)),
        _ => None,
    };
    for r in records {
        *counts.entry(r.event.name().to_string()).or_default() += 1;
        if text.len() < TRACE_KEEP_BYTES {
            r.render(text);
        }
        if let Some(s) = sink.as_mut() {
            s.record(&r, measure_ns);
        }
    }
}

/// The result's `policy` section (issue 37): `None` for the kernel's own policy.
pub fn policy_result(mm: &fraglab_mm::Mm) -> Option<fraglab_spec::result::PolicyResult> {
    let p = mm.policy();
    let name = p.name();
    (name != fraglab_mm::policy::KERNEL_POLICY).then(|| fraglab_spec::result::PolicyResult {
        name,
        counters: p.counters().into_iter().collect(),
    })
}

/// The result's `blame` section (issue 37): every source interned, in interning order.
pub fn blame_result(b: &fraglab_mm::blame::Blame) -> Vec<fraglab_spec::result::BlameSource> {
    use fraglab_mm::blame::BLAME_KIND_NAMES;
    const MTS: [&str; 3] = ["Unmovable", "Movable", "Reclaimable"];
    (0..b.nr_sources())
        .map(|i| {
            let s = &b.stats[i];
            let by_kind = |v: &[u64]| {
                BLAME_KIND_NAMES
                    .iter()
                    .zip(v)
                    .map(|(k, &n)| (k.to_string(), n))
                    .collect()
            };
            fraglab_spec::result::BlameSource {
                source: b.name(i as u32).to_string(),
                events: by_kind(&s.counts),
                pages: by_kind(&s.pages),
                by_migratetype: MTS.iter().zip(s.by_mt).map(|(k, n)| (k.to_string(), n)).collect(),
                mixed_blocks: s.mixed_blocks.len() as u64,
                compact_blocked_blocks: s.compact_blocked.len() as u64,
                thp_fault_fail: s.thp_fault_fail,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(t_ns: u64) -> PageblockMap {
        PageblockMap {
            t_ns,
            ..Default::default()
        }
    }

    #[test]
    fn map_cadence_keeps_a_bounded_evenly_spaced_set() {
        // The bound: 240 on small machines, MAP_CELLS / blocks on large ones, never below 16.
        assert_eq!(MapCadence::new(512).max, 240);
        assert_eq!(MapCadence::new(524_288).max, 128);
        assert_eq!(MapCadence::new(u64::MAX).max, 16);
        // Events every 30 ms for 1,000 s: maps at 100 ms steps, thinned as the run goes on.
        let mut c = MapCadence::new(512);
        let mut maps = vec![map(0)];
        let mut now = 0;
        while now < 1_000_000_000_000 {
            now += 30_000_000;
            c.tick(now, &mut maps, || map(now));
            assert!(maps.len() <= 240);
            if now == 3_000_000_000 {
                // 3 s in: one map per 100 ms step (at the first event past each).
                assert_eq!(maps.len(), 31);
                assert_eq!(maps[1].t_ns, 120_000_000);
            }
        }
        assert!(maps.len() >= 120, "{} maps", maps.len());
        assert_eq!(maps[0].t_ns, 0, "the boot map is kept");
        // One map per step of the final cadence: 100 ms doubled until 240 cover the run.
        assert_eq!(c.step, 6_400_000_000);
        for w in maps.windows(2) {
            assert!(
                w[1].t_ns / c.step == w[0].t_ns / c.step + 1,
                "{} then {}",
                w[0].t_ns,
                w[1].t_ns
            );
        }
    }
}
