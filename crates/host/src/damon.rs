//! `[host] damon = "off"`: DAMON switched off for a run through its sysfs interface
//! (`/sys/kernel/mm/damon/admin/kdamonds/N/state`, Documentation/admin-guide/mm/damon/usage.rst)
//! and switched back on at its end. docs/model §27.3 says why: on these VMs a sysfs-made
//! kdamond pages out cold unmapped page cache behind the kernel's own reclaim.
//!
//! Writing `off` stops the kdamond thread; writing `on` starts a new one from the parameters
//! still in the sysfs tree (checked on this machine: the tree reads the same before, while off
//! and after, and a new kdamond pid appears). The monitoring state is not kept: regions and their
//! ages start afresh, so an aged scheme (age ≥ 60 s on S2) acts again only that long after the
//! restore. The state files turned off are recorded in the run's state file before the first is
//! written (a `kdamond` change of the run's journal, [`crate::journal`]), so `fraglab host
//! restore` turns them back on after a SIGKILL.
//!
//! [`capture_regions`]: the running kdamond's regions and ages for a snapshot (the same start
//! of `fraglab validate`), read from its `damon:damon_aggregated` tracepoint in a private
//! tracefs instance, without writing to DAMON's sysfs tree (`fraglab_state::damon` says why
//! not `update_schemes_tried_regions`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use fraglab_spec::result::confounders::HostConfounders;
use fraglab_spec::DamonSpec;
use fraglab_state::damon::{Batch, Batcher, DamonCapture, DAMON_AGGREGATED};

/// The directory of the kdamonds.
pub const KDAMONDS: &str = "/sys/kernel/mm/damon/admin/kdamonds";

/// Whether `p` is a kdamond's `state` file (`KDAMONDS/<N>/state`): the only paths a state file
/// may ask to write.
pub fn is_state_file(p: &Path) -> bool {
    p.file_name().is_some_and(|n| n == "state")
        && p.parent().is_some_and(|d| {
            d.parent() == Some(Path::new(KDAMONDS))
                && d.file_name()
                    .is_some_and(|n| !n.is_empty() && n.to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        })
}

fn read_state(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// The `state` files of the kdamonds that are on, in index order.
pub fn running() -> Vec<PathBuf> {
    running_under(Path::new("/"))
}

/// [`running`] on the machine under `root` (a fake in tests); the paths returned are the real
/// ones (`/sys/kernel/mm/damon/admin/kdamonds/N/state`).
pub fn running_under(root: &Path) -> Vec<PathBuf> {
    let under = root.join(KDAMONDS.trim_start_matches('/'));
    let mut v: Vec<(u32, PathBuf)> = std::fs::read_dir(&under)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| {
                    Some((
                        e.file_name().to_string_lossy().parse().ok()?,
                        e.path().join("state"),
                    ))
                })
                .filter(|(_, p)| read_state(p).as_deref() == Some("on"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v.into_iter()
        .map(|(i, _)| Path::new(KDAMONDS).join(i.to_string()).join("state"))
        .collect()
}

/// Writes `word` (`on`/`off`) to a kdamond's state file and checks it reads back.
pub fn set_state(p: &Path, word: &str) -> Result<(), String> {
    if !is_state_file(p) {
        return Err(format!("{} is not a kdamond state file", p.display()));
    }
    if read_state(p).as_deref() == Some(word) {
        return Ok(());
    }
    std::fs::write(p, word).map_err(|e| format!("{}: {e}", p.display()))?;
    match read_state(p) {
        Some(s) if s == word => Ok(()),
        s => Err(format!("{} reads back {s:?} after writing {word}", p.display())),
    }
}

/// docs/model §27.3: the simulator's `[damon]` for the DAMON a host run ran with, so that
/// `fraglab validate` runs the model with the same scheme. The first kdamond that was `on` at
/// the run's start (and not turned off by it, `[host] damon = "off"`) with a `paddr` context
/// and a `pageout` scheme gives the intervals, region bounds, access pattern, quotas,
/// watermarks and ops filters (the `anon`, `unmapped` and `young` filters that match; other
/// filter types are not modelled and left out), and the monitored ranges (`targets/*/regions`,
/// which the model clips to its memory). `None` when no such kdamond ran — as on a machine
/// with `nr_kdamonds` 0 — and the model's DAMON stays off.
pub fn damon_spec_for(c: &HostConfounders) -> Option<DamonSpec> {
    let d = c.start.damon.as_ref()?;
    let (ctx, scheme) = d
        .kdamonds
        .iter()
        .filter(|k| k.state == "on" && !c.damon_turned_off.contains(&k.index))
        .flat_map(|k| k.contexts.iter())
        .filter(|x| x.operations == "paddr")
        .find_map(|x| Some((x, x.schemes.iter().find(|s| s.action == "pageout")?)))?;
    let mut values = BTreeMap::new();
    let mut put = |k: &str, v: Option<u64>| {
        if let Some(v) = v {
            values.insert(k.to_string(), v);
        }
    };
    put("sample_us", ctx.sample_us);
    put("aggr_us", ctx.aggr_us);
    put("min_nr_regions", ctx.nr_regions.0);
    put("max_nr_regions", ctx.nr_regions.1);
    put("nr_accesses_min", scheme.nr_accesses.0);
    put(
        "nr_accesses_max",
        scheme.nr_accesses.1.map(|v| v.min(u32::MAX as u64)),
    );
    put("age_min", scheme.age.0);
    put("age_max", scheme.age.1.map(|v| v.min(u32::MAX as u64)));
    put("sz_min", scheme.sz.0);
    put("sz_max", scheme.sz.1);
    put("quota_ms", scheme.quota_ms);
    put("quota_bytes", scheme.quota_bytes);
    put("quota_reset_interval_ms", scheme.quota_reset_interval_ms);
    let free_mem_rate = scheme.watermark_metric == "free_mem_rate";
    if free_mem_rate {
        for (k, v) in ["wmarks_interval_us", "wmarks_high", "wmarks_mid", "wmarks_low"]
            .iter()
            .zip(scheme.watermarks)
        {
            put(k, v);
        }
    }
    let filters = scheme
        .filters
        .iter()
        .filter(|f| f.matching && ["anon", "unmapped", "young"].contains(&f.kind.as_str()))
        .map(|f| (f.kind.clone(), f.allow))
        .collect();
    // The ranges the kernel's kdamond monitors (the model clips them to its memory): S2's
    // leave out the PCI hole and the first 16 MiB, which a whole-memory range would sweep too.
    let regions =
        (!ctx.target_regions.is_empty()).then(|| ctx.target_regions.iter().map(|&[a, b]| (a, b)).collect());
    Some(DamonSpec {
        enabled: true,
        preset: "s2".into(),
        values,
        wmarks_free_mem_rate: Some(free_mem_rate),
        filters: Some(filters),
        regions,
    })
}

/// The kdamond a capture records the regions of (docs/model §27.2 item 3): the first one
/// that is `on`, with a running thread, a `paddr` context and a `pageout` scheme — the one
/// [`damon_spec_for`] gives the simulator the scheme of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureTarget {
    /// `kdamonds/N`.
    pub index: u32,
    /// Its thread (the `damon_aggregated` lines' pid).
    pub pid: u32,
    /// `monitoring_attrs/intervals/aggr_us`.
    pub aggr_us: u64,
    /// `targets/nr_targets`.
    pub nr_targets: u32,
    /// The pageout scheme's index (`schemes/N`).
    pub scheme: u32,
}

/// The [`CaptureTarget`] of the DAMON sysfs tree under `root` (`/` on the machine; a fake tree
/// in tests), if a kdamond runs such a scheme.
pub fn capture_target(root: &Path) -> Option<CaptureTarget> {
    let d = crate::confounders::read_at(root).damon?;
    d.kdamonds.iter().filter(|k| k.state == "on").find_map(|k| {
        let pid = u32::try_from(k.pid?).ok().filter(|&p| p > 0)?;
        let (ctx, scheme) = k
            .contexts
            .iter()
            .filter(|c| c.operations == "paddr")
            .find_map(|c| Some((c, c.schemes.iter().position(|s| s.action == "pageout")?)))?;
        Some(CaptureTarget {
            index: k.index,
            pid,
            aggr_us: ctx.aggr_us.filter(|&a| a > 0)?,
            nr_targets: ctx.nr_targets.unwrap_or(1).clamp(1, u32::MAX as u64) as u32,
            scheme: scheme as u32,
        })
    })
}

/// How long [`capture_regions`] waits for a whole aggregation: two aggregation intervals and a
/// second (the first may be joined part way), at most a minute.
pub fn capture_timeout(aggr_us: u64) -> Duration {
    Duration::from_micros(aggr_us.saturating_mul(2).saturating_add(1_000_000)).min(Duration::from_secs(60))
}

/// CLOCK_MONOTONIC in ns (the clock of a tracefs instance with `trace_clock` mono).
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Writes 0 to the event's `enable` file when dropped: on every way out of
/// [`read_aggregation`].
struct EventOff(PathBuf);

impl Drop for EventOff {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.0, "0");
    }
}

/// One whole aggregation of `t`'s regions from the tracefs instance directory `instance`
/// (made by the caller: [`capture_regions`]; a prepared directory in tests):
/// `damon:damon_aggregated` and, where the kernel has it, `damon:damos_before_apply` (the
/// aggregation's applications, which say where the scheme's sweep resumes) are enabled (with a
/// pid filter, where the kernel takes one) and `trace_pipe` read until [`Batcher`] has a
/// complete aggregation or `timeout` passes; the events are disabled again on every way out.
/// Read-only towards DAMON: nothing under /sys/kernel/mm/damon is written. Returns the
/// aggregation, or why there is none.
pub fn read_aggregation(instance: &Path, t: &CaptureTarget, timeout: Duration) -> Result<Batch, String> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt;
    let ev = instance.join("events/damon/damon_aggregated");
    let enable = ev.join("enable");
    if !enable.exists() {
        return Err(format!(
            "no {DAMON_AGGREGATED} tracepoint on this kernel ({} is missing)",
            enable.display()
        ));
    }
    // Other kdamonds' lines are skipped anyway; the filter only saves buffer space.
    let _ = std::fs::write(ev.join("filter"), format!("common_pid == {}", t.pid));
    std::fs::write(&enable, "1").map_err(|e| format!("{}: {e}", enable.display()))?;
    let _off = EventOff(enable);
    let ap = instance.join("events/damon/damos_before_apply");
    let _off_apply = if ap.join("enable").exists() {
        let _ = std::fs::write(ap.join("filter"), format!("common_pid == {}", t.pid));
        std::fs::write(ap.join("enable"), "1").map_err(|e| format!("{}: {e}", ap.display()))?;
        Some(EventOff(ap.join("enable")))
    } else {
        None
    };
    let pipe_path = instance.join("trace_pipe");
    let mut pipe = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&pipe_path)
        .map_err(|e| format!("{}: {e}", pipe_path.display()))?;
    let mut b = Batcher::new(t.pid, t.nr_targets, t.aggr_us, t.scheme);
    let start = std::time::Instant::now();
    let mut buf = vec![0u8; 64 << 10];
    let mut partial = String::new();
    loop {
        match pipe.read(&mut buf) {
            Ok(n) if n > 0 => {
                partial.push_str(&String::from_utf8_lossy(&buf[..n]));
                let complete = partial.rfind('\n').map_or(0, |i| i + 1);
                let text: String = partial.drain(..complete).collect();
                for line in text.lines() {
                    if b.line(line) {
                        return Ok(b.take().expect("complete"));
                    }
                }
                continue;
            }
            Ok(_) => {}
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("{}: {e}", pipe_path.display())),
        }
        if start.elapsed() >= timeout {
            return Err(format!(
                "no whole aggregation of kdamond {} (pid {}) within {} ms",
                t.index,
                t.pid,
                timeout.as_millis()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The running kdamond's regions and ages (docs/model §27.2 item 3), for a snapshot:
/// [`read_aggregation`] in a private tracefs instance `fraglab-damon-PID` (tracefs mounted for
/// it where none is; the instance removed on every way out, and one left by a killed process
/// removed by the next capture or `host record`). `None` when no kdamond runs a paddr pageout
/// scheme; regions empty, with the reason in `note`, when they could not be read. Waits up to
/// [`capture_timeout`] (one aggregation interval on average). The DAMON sysfs tree is read
/// under `sysfs_root` (`/`).
pub fn capture_regions(sysfs_root: &Path) -> Option<DamonCapture> {
    let t = capture_target(sysfs_root)?;
    let mut c = DamonCapture {
        kdamond: t.index,
        pid: t.pid,
        aggr_us: t.aggr_us,
        source: DAMON_AGGREGATED.into(),
        ..Default::default()
    };
    let pid = std::process::id();
    let got = (|| -> Result<Batch, String> {
        // The instance (and a tracefs mount) in a journal of their own, undone on every way
        // out and by `fraglab host restore` after a SIGKILL.
        let mut journal = crate::journal::Journal::new(
            crate::journal::Machine::live(),
            PathBuf::from(format!("/run/fraglab-host-{pid}-damon.restore")),
        );
        let instance = crate::trace::open_instance(
            &mut journal,
            &format!("fraglab-damon-tracefs-{pid}"),
            &format!("fraglab-damon-{pid}"),
        )
        .map_err(|e| e.to_string())?;
        if let Some(instances) = instance.parent() {
            crate::record::remove_stale_instances(instances);
        }
        let _ = std::fs::write(instance.join("trace_clock"), "mono");
        let r = read_aggregation(&instance, &t, capture_timeout(t.aggr_us));
        journal.undo_all().map_err(|e| e.to_string())?;
        r
    })();
    match got {
        Ok(b) => {
            c.aggregated_at_ns = b.ts_ns;
            c.regions = b.regions;
            c.applied = b.applied;
        }
        Err(e) => c.note = e,
    }
    Some(c)
}

/// Turns the kdamonds of `states` back on; returns the failures.
pub fn turn_on(states: &[PathBuf]) -> Vec<String> {
    states.iter().filter_map(|p| set_state(p, "on").err()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_kdamond_state_files() {
        assert!(is_state_file(Path::new(
            "/sys/kernel/mm/damon/admin/kdamonds/0/state"
        )));
        assert!(is_state_file(Path::new(
            "/sys/kernel/mm/damon/admin/kdamonds/12/state"
        )));
        for bad in [
            "/sys/kernel/mm/damon/admin/kdamonds/x/state",
            "/sys/kernel/mm/damon/admin/kdamonds/0/pid",
            "/sys/kernel/mm/damon/admin/kdamonds/0/contexts/0/state",
            "/proc/sys/vm/state",
            "/tmp/0/state",
        ] {
            assert!(!is_state_file(Path::new(bad)), "{bad}");
        }
        assert!(set_state(Path::new("/tmp/0/state"), "on").is_err());
    }

    /// A DAMON sysfs tree under `root` with one kdamond (S2's intervals and a pageout scheme),
    /// `state` and `pid` as given.
    fn fake_sysfs(root: &Path, state: &str, pid: i64) {
        let k = root.join("sys/kernel/mm/damon/admin/kdamonds");
        let c = k.join("0/contexts/0");
        for d in ["monitoring_attrs/intervals", "targets", "schemes/0"] {
            std::fs::create_dir_all(c.join(d)).unwrap();
        }
        let w = |p: PathBuf, v: &str| std::fs::write(p, format!("{v}\n")).unwrap();
        w(k.join("nr_kdamonds"), "1");
        w(k.join("0/state"), state);
        w(k.join("0/pid"), &pid.to_string());
        w(c.join("operations"), "paddr");
        w(c.join("monitoring_attrs/intervals/aggr_us"), "5000000");
        w(c.join("monitoring_attrs/intervals/sample_us"), "500000");
        w(c.join("targets/nr_targets"), "1");
        w(c.join("schemes/0/action"), "pageout");
        // S2's targets/0/regions (§27.3).
        for (i, (a, b)) in [(16u64 << 20, 3u64 << 30), (4 << 30, 25 << 30)]
            .iter()
            .enumerate()
        {
            let r = c.join(format!("targets/0/regions/{i}"));
            std::fs::create_dir_all(&r).unwrap();
            w(r.join("start"), &a.to_string());
            w(r.join("end"), &b.to_string());
        }
    }

    /// §27.3: the monitored ranges of the kernel's kdamond are recorded and given to the
    /// simulator (which clips them to its memory), so that its sweep leaves out what the
    /// kernel's does (the PCI hole, the first 16 MiB).
    #[test]
    fn s27_damon_spec_carries_the_monitored_ranges() {
        let root = tmp("ranges");
        fake_sysfs(&root, "on", 83);
        let reading = crate::confounders::read_at(&root);
        let ctx = &reading.damon.as_ref().unwrap().kdamonds[0].contexts[0];
        assert_eq!(ctx.target_regions, [[16 << 20, 3 << 30], [4 << 30, 25 << 30]]);
        let c = HostConfounders {
            start: reading.clone(),
            end: reading,
            ..Default::default()
        };
        let d = damon_spec_for(&c).unwrap();
        assert_eq!(d.regions, Some(vec![(16 << 20, 3 << 30), (4 << 30, 25 << 30)]));
        assert!(
            c.summary()
                .contains(", over 16777216-3221225472 4294967296-26843545600\n"),
            "{}",
            c.summary()
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fraglab-damon-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn agg(t: &str, nr: u32, s: u64, e: u64, age: u32) -> String {
        format!(
            "       kdamond.0-83      [001] ..... {t:>12}: damon_aggregated: target_id=0 nr_regions={nr} {s}-{e}: 0 {age}\n"
        )
    }

    /// §27.2 item 3: the kdamond a capture records is the one that is on with a paddr pageout
    /// scheme (its pid and aggregation interval from the sysfs tree); none when it is off.
    #[test]
    fn s27_capture_target_from_a_fake_sysfs_tree() {
        let root = tmp("target");
        fake_sysfs(&root, "on", 83);
        assert_eq!(
            capture_target(&root),
            Some(CaptureTarget {
                index: 0,
                pid: 83,
                aggr_us: 5_000_000,
                nr_targets: 1,
                scheme: 0
            })
        );
        fake_sysfs(&root, "off", -1);
        assert_eq!(capture_target(&root), None);
        assert_eq!(capture_target(&root.join("absent")), None);
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// §27.2 item 3: one whole aggregation of `damon_aggregated` lines is read from the
    /// instance (the first, joined part way, dropped at the 5 s gap); the event is enabled for
    /// the read only, filtered to the kdamond's pid; DAMON's sysfs tree is not written.
    #[test]
    fn s27_capture_reads_one_whole_aggregation_from_a_fake_instance() {
        let inst = tmp("inst");
        let ev = inst.join("events/damon/damon_aggregated");
        let ap = inst.join("events/damon/damos_before_apply");
        for d in [&ev, &ap] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("enable"), "0").unwrap();
        }
        let mib = 1u64 << 20;
        let apply = format!(
            "       kdamond.0-83      [001] .....   405.119000: damos_before_apply: ctx_idx=0 scheme_idx=0 target_idx=0 nr_regions=3 {}-{}: 0 83\n",
            24 * mib,
            40 * mib
        );
        let text = [
            agg("400.000001", 3, 40 * mib, 64 * mib, 77),
            apply,
            agg("405.120000", 3, 16 * mib, 24 * mib, 78),
            agg("405.120001", 3, 24 * mib, 40 * mib, 0),
            agg("405.120002", 3, 40 * mib, 64 * mib, 78),
            agg("410.240000", 3, 16 * mib, 24 * mib, 79),
        ]
        .concat();
        std::fs::write(inst.join("trace_pipe"), &text).unwrap();
        let t = CaptureTarget {
            index: 0,
            pid: 83,
            aggr_us: 5_000_000,
            nr_targets: 1,
            scheme: 0,
        };
        let b = read_aggregation(&inst, &t, Duration::from_secs(5)).unwrap();
        assert_eq!(b.ts_ns, 405_120_002_000);
        assert_eq!(
            b.regions
                .iter()
                .map(|r| (r.start / mib, r.end / mib, r.age))
                .collect::<Vec<_>>(),
            [(16, 24, 78), (24, 40, 0), (40, 64, 78)]
        );
        // The application before the report: the region that now has age 0.
        assert_eq!(
            b.applied
                .iter()
                .map(|r| (r.start / mib, r.end / mib, r.age))
                .collect::<Vec<_>>(),
            [(24, 40, 83)]
        );
        for d in [&ev, &ap] {
            assert_eq!(std::fs::read_to_string(d.join("enable")).unwrap(), "0");
            assert_eq!(
                std::fs::read_to_string(d.join("filter")).unwrap(),
                "common_pid == 83"
            );
        }
        // Only part of an aggregation in time: an error, and the event is off again.
        std::fs::write(inst.join("trace_pipe"), agg("1.000000", 3, 0, mib, 1)).unwrap();
        let e = read_aggregation(&inst, &t, Duration::from_millis(60)).unwrap_err();
        assert!(e.contains("no whole aggregation"), "{e}");
        assert_eq!(std::fs::read_to_string(ev.join("enable")).unwrap(), "0");
        // A kernel without the tracepoint.
        std::fs::remove_dir_all(inst.join("events")).unwrap();
        let e = read_aggregation(&inst, &t, Duration::from_millis(60)).unwrap_err();
        assert!(e.contains("no damon:damon_aggregated tracepoint"), "{e}");
        assert!(
            !inst.join("events").exists(),
            "nothing is created for a missing event"
        );
        std::fs::remove_dir_all(&inst).unwrap();
    }

    /// docs/model §27.3: the fixture's kdamond (S2's scheme, recorded while off) gives
    /// nothing; switched on, it gives the simulator S2's parameters; turned off by the run or
    /// absent (`nr_kdamonds` 0, as on this machine now), nothing.
    #[test]
    fn section_27_3_damon_spec_of_the_recorded_scheme() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/confounders");
        let reading = crate::confounders::read_at(&root);
        let mut c = HostConfounders {
            start: reading.clone(),
            end: reading,
            ..Default::default()
        };
        assert_eq!(damon_spec_for(&c), None, "recorded while off");
        c.start.damon.as_mut().unwrap().kdamonds[0].state = "on".into();
        let d = damon_spec_for(&c).expect("on");
        assert!(d.enabled);
        let v = |k: &str| d.values.get(k).copied();
        // The fixture's kdamond kept the sysfs defaults of the intervals, the region bounds
        // and the ranges it did not write (0..0, as the kernel's `damon_sysfs_ul_range_alloc`
        // leaves them): they are carried over as read.
        assert_eq!((v("sample_us"), v("aggr_us")), (Some(5_000), Some(100_000)));
        assert_eq!((v("min_nr_regions"), v("max_nr_regions")), (Some(10), Some(1000)));
        assert_eq!((v("nr_accesses_min"), v("nr_accesses_max")), (Some(0), Some(1)));
        assert_eq!((v("age_min"), v("age_max")), (Some(12), Some(0)));
        assert_eq!((v("sz_min"), v("sz_max")), (Some(0), Some(0)));
        assert_eq!(
            (v("quota_ms"), v("quota_bytes"), v("quota_reset_interval_ms")),
            (Some(50), Some(128 << 20), Some(1000))
        );
        assert_eq!(d.wmarks_free_mem_rate, Some(false));
        assert_eq!(
            d.filters,
            Some(vec![("anon".to_string(), false), ("unmapped".to_string(), true)])
        );
        // The fixture's kdamond has no target: the preset's ranges stay.
        assert_eq!(d.regions, None);
        c.damon_turned_off = vec![0];
        assert_eq!(damon_spec_for(&c), None, "turned off by the run");
        c.damon_turned_off.clear();
        c.start.damon.as_mut().unwrap().kdamonds.clear();
        c.start.damon.as_mut().unwrap().nr_kdamonds = 0;
        assert_eq!(damon_spec_for(&c), None, "no kdamond");
    }
}
