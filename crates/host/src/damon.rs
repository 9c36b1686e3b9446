//! `[host] damon = "off"`: DAMON switched off for a run through its sysfs interface
//! (`/sys/kernel/mm/damon/admin/kdamonds/N/state`, Documentation/admin-guide/mm/damon/usage.rst)
//! and switched back on at its end. kernel-model.md §27.3 says why: on these VMs a sysfs-made
//! kdamond pages out cold unmapped page cache behind the kernel's own reclaim.
//!
//! Writing `off` stops the kdamond thread; writing `on` starts a new one from the parameters
//! still in the sysfs tree (checked on this machine: the tree reads the same before, while off
//! and after, and a new kdamond pid appears). The monitoring state is not kept: regions and their
//! ages start afresh, so an aged scheme (age ≥ 60 s on S2) acts again only that long after the
//! restore. The state files turned off are recorded in the run's state file before the first is
//! written ([`crate::Cleanup::damon_on`]), so `fraglab host restore` turns them back on after a
//! SIGKILL.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fraglab_spec::result::confounders::HostConfounders;
use fraglab_spec::DamonSpec;

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
    let mut v: Vec<(u32, PathBuf)> = std::fs::read_dir(KDAMONDS)
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
    v.into_iter().map(|(_, p)| p).collect()
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

/// kernel-model.md §27.3: the simulator's `[damon]` for the DAMON a host run ran with, so that
/// `fraglab validate` runs the model with the same scheme. The first kdamond that was `on` at
/// the run's start (and not turned off by it, `[host] damon = "off"`) with a `paddr` context
/// and a `pageout` scheme gives the intervals, region bounds, access pattern, quotas,
/// watermarks and ops filters (the `anon`, `unmapped` and `young` filters that match; other
/// filter types are not modelled and left out). `None` when no such kdamond ran — as on a
/// machine with `nr_kdamonds` 0 — and the model's DAMON stays off. The monitored ranges are not
/// carried over: the model monitors its whole memory (§27.4).
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
    Some(DamonSpec {
        enabled: true,
        preset: "s2".into(),
        values,
        wmarks_free_mem_rate: Some(free_mem_rate),
        filters: Some(filters),
    })
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

    /// kernel-model.md §27.3: the fixture's kdamond (S2's scheme, recorded while off) gives
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
        c.damon_turned_off = vec![0];
        assert_eq!(damon_spec_for(&c), None, "turned off by the run");
        c.damon_turned_off.clear();
        c.start.damon.as_mut().unwrap().kdamonds.clear();
        c.start.damon.as_mut().unwrap().nr_kdamonds = 0;
        assert_eq!(damon_spec_for(&c), None, "no kdamond");
    }
}
