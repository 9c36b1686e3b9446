//! `fraglab soak`: a long random sequence of model operations with the debug-vm checker on
//! (issue 23 item 6): a bench, not a CI test (a short CI test runs 10^4 operations).
//!
//! The operation mix is the union of the random-operation tests' (crates/mm/tests/all/props.rs,
//! compaction_props.rs, slab_shrinker_props.rs) and the timeless engine's operations, each one
//! model call: kernel allocations (unmovable, reclaimable slab, atomic, page tables) of order
//! 0-10 on random CPUs and frees of random ones, anonymous faults in eight 8 MiB mappings (half
//! MADV_HUGEPAGE: THP faults, splits on partial MADV_DONTNEED), MADV_DONTNEED of random ranges,
//! munmap, swap-in faults, buffered page-cache reads with readahead and writes (throttled above
//! the dirty limit) on four files, truncations, kswapd runs, direct compaction at each priority,
//! kcompactd wake-ups, `compact_memory`, writeback passes, PCP drains and high decay, and
//! occasionally `drop_caches`. The mappings (64 MiB), the files (60 MiB) and the kernel
//! allocations (up to a quarter of memory) overcommit the 128 MiB machine, so allocations
//! reclaim (to 64 MiB of swap), compact and sometimes fail. Anonymous memory lives in
//! `fraglab_sim::anon::AnonVma`s, which follow their pages through reclaim, splits and swap.
//! A virtual clock advances 20 µs per operation (writeback expiry and device time).
//!
//! The checker ([`fraglab_mm::Mm::check_invariants`], docs/model's debug-vm) runs every
//! `check_every` operations (a check walks every page and folio, about 100 times an operation
//! on the default 128 MiB machine) and once at the end; the first violation stops the soak.
//! Deterministic: the same options give the same operations and counts. The last line on
//! standard output is a JSON object: operations, checks, violations and counts per operation.

use std::collections::BTreeMap;

use fraglab_mm::compaction::CompactPriority;
use fraglab_mm::filemap::ReadaheadState;
use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::{AllocFlags, Gfp, Mm, ZoneType};
use fraglab_sim::anon::AnonVma;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// `fraglab soak`'s options.
pub struct SoakOptions {
    pub ops: u64,
    pub seed: u64,
    pub check_every: u64,
    pub memory: String,
    /// Tests: after this operation, corrupt the model (a HighAtomic free count no free list
    /// backs), to show that the checker catches it.
    pub corrupt_at: Option<u64>,
}

/// The operations of the mix, with their weights (out of their sum).
const MIX: &[(&str, u32)] = &[
    ("alloc", 150),
    ("free", 120),
    ("fault", 250),
    ("dontneed", 40),
    ("munmap", 2),
    ("read", 100),
    ("write", 100),
    ("truncate", 5),
    ("kswapd", 30),
    ("compact", 20),
    ("kcompactd", 10),
    ("compact_memory", 1),
    ("writeback", 30),
    ("drain", 10),
    ("decay", 20),
    ("drop_caches", 1),
];

/// The kernel GFP masks of the property tests (props.rs) and the folio kind each allocates
/// (movable memory comes from the mappings' faults and the page cache).
const GFPS: [(Gfp, FolioKind); 4] = [
    (Gfp::GFP_KERNEL, FolioKind::Kernel),
    (Gfp(Gfp::GFP_KERNEL.0 | Gfp::RECLAIMABLE.0), FolioKind::Slab),
    (Gfp::GFP_ATOMIC, FolioKind::Kernel),
    (Gfp::GFP_NOWAIT, FolioKind::PageTable),
];

/// The anonymous mappings: how many, pages each.
const VMAS: usize = 8;
const VMA_PAGES: u64 = 2048;

/// The page-cache files: sizes in pages (4, 8, 16 and 32 MiB).
const FILE_PAGES: [u64; 4] = [1024, 2048, 4096, 8192];

/// The soak's state: the model, the live folios it allocated or faulted (id, token, order) and
/// their pages, the files (mapping, readahead state), the operations run.
struct Soak {
    mm: Mm,
    rng: ChaCha8Rng,
    live: Vec<(FolioId, u64, u32)>,
    live_pages: u64,
    vmas: Vec<AnonVma>,
    files: Vec<(u32, ReadaheadState)>,
    counts: BTreeMap<&'static str, u64>,
    failed_allocs: u64,
}

/// Runs the soak; prints the JSON summary. An error if an invariant was violated.
pub fn soak(o: SoakOptions) -> Result<(), String> {
    if o.ops == 0 || o.check_every == 0 {
        return Err("soak: --ops and --check-every must be at least 1".into());
    }
    let text = format!(
        "name = \"soak\"\n[machine]\nmemory = \"{}\"\ncpus = 2\nswap = \"64MiB\"\n[knobs]\n\"transparent_hugepage/enabled\" = \"madvise\"\n[run]\nseed = {}\ndebug_vm = true\n",
        o.memory, o.seed
    );
    let spec = fraglab_spec::parse_spec(&text, "soak (--memory)").map_err(|e| e.to_string())?;
    let mm = fraglab_sim::boot(&spec).map_err(|e| e.to_string())?;
    let mut s = Soak {
        mm,
        rng: ChaCha8Rng::seed_from_u64(o.seed),
        live: Vec::new(),
        live_pages: 0,
        vmas: (0..VMAS).map(|i| AnonVma::new(VMA_PAGES, i % 2 == 0)).collect(),
        files: Vec::new(),
        counts: BTreeMap::new(),
        failed_allocs: 0,
    };
    for _ in FILE_PAGES {
        let mapping = s.mm.add_mapping(fraglab_mm::filemap::Mapping::large_folios());
        let ra = s.mm.file_ra_state_init();
        s.files.push((mapping, ra));
    }
    s.mm.cache.writeback.io_ns = fraglab_sim::cost::CostModel::default().write_io_ns;
    let managed: u64 = s.mm.zones.iter().map(|z| z.managed).sum();
    let total_weight: u32 = MIX.iter().map(|m| m.1).sum();
    let t0 = std::time::Instant::now();
    let mut bar = crate::progress::Bar::new();
    let (mut checks, mut violation) = (0u64, None);
    let mut wall_by_op: BTreeMap<&str, u64> = BTreeMap::new();
    let mut check_ns = 0u64;
    for i in 1..=o.ops {
        let mut pick = s.rng.gen_range(0..total_weight);
        let op = MIX
            .iter()
            .find(|(_, w)| {
                if pick < *w {
                    true
                } else {
                    pick -= w;
                    false
                }
            })
            .expect("pick < total weight")
            .0;
        // Past a quarter of memory in kernel allocations, a free instead: pressure without
        // pinning all of it.
        let op = if s.live_pages > managed / 4 && op == "alloc" {
            "free"
        } else {
            op
        };
        let t = std::time::Instant::now();
        s.op(op);
        *s.counts.entry(op).or_default() += 1;
        *wall_by_op.entry(op).or_default() += t.elapsed().as_nanos() as u64;
        s.mm.cur.now_ns += 20_000;
        if o.corrupt_at == Some(i) {
            let z =
                s.mm.zones
                    .iter()
                    .rposition(|z| z.managed > 0)
                    .expect("a populated zone");
            s.mm.zones[z].nr_free_highatomic += 1;
        }
        if i.is_multiple_of(o.check_every) || i == o.ops {
            checks += 1;
            let t = std::time::Instant::now();
            let r = s.mm.check_invariants();
            check_ns += t.elapsed().as_nanos() as u64;
            if let Err(v) = r {
                violation = Some(format!("after operation {i} ({op}): {v}"));
                break;
            }
        }
        if i.is_multiple_of(4096) {
            bar.set(
                i as f64 / o.ops as f64,
                &format!("{i} of {} operations, {checks} checks", o.ops),
            );
        }
    }
    bar.finish();
    let wall = t0.elapsed().as_secs_f64();
    let ops: u64 = s.counts.values().sum();
    let summary = serde_json::json!({
        "soak": {
            "memory": o.memory,
            "seed": o.seed,
            "check_every": o.check_every,
        },
        "operations": ops,
        "checks": checks,
        "violations": violation.is_some() as u64,
        "violation": violation,
        "failed_allocations": s.failed_allocs,
        "live_folios_at_end": s.live.len(),
        "free_pages_at_end": s.mm.zones.iter().map(|z| z.nr_free_pages()).sum::<i64>(),
        "swap_pages_at_end": s.mm.reclaim.swap.used,
        "counts": s.counts,
        // Wall time (not deterministic): mean µs per operation of each kind and per check.
        "mean_us": wall_by_op
            .iter()
            .map(|(k, ns)| (k.to_string(), (*ns as f64 / s.counts[k] as f64 / 100.0).round() / 10.0))
            .chain([("check".to_string(), (check_ns as f64 / checks.max(1) as f64 / 100.0).round() / 10.0)])
            .collect::<BTreeMap<String, f64>>(),
        "wall_s": (wall * 10.0).round() / 10.0,
        "ops_per_s": (ops as f64 / wall.max(1e-9)).round(),
    });
    println!("{summary}");
    match violation {
        Some(v) => Err(format!("soak: invariant violated {v}")),
        None => Ok(()),
    }
}

impl Soak {
    fn cpu(&mut self) -> u32 {
        self.rng.gen_range(0..self.mm.nr_cpus)
    }

    /// An order as the property tests draw it: mostly small, sometimes costly or a THP.
    fn order(&mut self) -> u32 {
        match self.rng.gen_range(0..10) {
            0..=5 => self.rng.gen_range(0..=3),
            6..=7 => self.rng.gen_range(4..=8),
            _ => self.rng.gen_range(9..=10),
        }
    }

    fn keep(&mut self, id: FolioId) {
        let f = self.mm.folios.get(id);
        self.live_pages += 1 << f.order;
        self.live.push((id, f.token(), f.order as u32));
    }

    /// Runs one operation of the mix.
    fn op(&mut self, op: &str) {
        let cpu = self.cpu();
        match op {
            "alloc" => {
                let (gfp, kind) = GFPS[self.rng.gen_range(0..GFPS.len())];
                let order = self.order();
                match self.mm.alloc_folio(cpu, gfp, order, kind, false) {
                    Some(id) => self.keep(id),
                    None => self.failed_allocs += 1,
                }
            }
            "free" => {
                if self.live.is_empty() {
                    return;
                }
                let (id, token, order) = self.live.swap_remove(self.rng.gen_range(0..self.live.len()));
                self.live_pages -= 1 << order;
                if self.mm.folio_is(id, token) {
                    self.mm.free_folio(cpu, id);
                }
            }
            "fault" => {
                // A page fault at a random page of a mapping (a swap-in if reclaim swapped it
                // out; a THP where the mapping is madvised and the 2 MiB range is empty).
                let v = self.rng.gen_range(0..VMAS);
                let page = self.rng.gen_range(0..VMA_PAGES);
                self.vmas[v].touch(&mut self.mm, cpu, page);
            }
            "dontneed" => {
                let v = self.rng.gen_range(0..VMAS);
                let start = self.rng.gen_range(0..VMA_PAGES);
                let n = self.rng.gen_range(1..=512).min(VMA_PAGES - start);
                self.vmas[v].dontneed(&mut self.mm, cpu, start, n);
            }
            "munmap" => {
                let v = self.rng.gen_range(0..VMAS);
                self.vmas[v].unmap(&mut self.mm, cpu);
                self.vmas[v] = AnonVma::new(VMA_PAGES, v % 2 == 0);
            }
            "read" => {
                let f = self.rng.gen_range(0..self.files.len());
                let pages = FILE_PAGES[f];
                let index = self.rng.gen_range(0..pages);
                let nr = self.rng.gen_range(1..=64);
                let (mapping, mut ra) = self.files[f];
                self.mm.filemap_read(cpu, mapping, &mut ra, index, nr, pages);
                self.files[f].1 = ra;
            }
            "write" if self.mm.dirty_exceeded() => {
                // balance_dirty_pages: above the dirty limit the writer waits for writeback.
                self.mm.writeback_settle();
            }
            "write" => {
                let f = self.rng.gen_range(0..self.files.len());
                let index = self.rng.gen_range(0..FILE_PAGES[f]);
                let len = self.rng.gen_range(1..=64) * 4096;
                self.mm.filemap_write(cpu, self.files[f].0, index, len);
            }
            "truncate" => {
                let f = self.rng.gen_range(0..self.files.len());
                self.mm.filemap_truncate(cpu, self.files[f].0);
                self.files[f].1 = self.mm.file_ra_state_init();
            }
            "kswapd" => {
                self.mm.kswapd_until_sleep(0, 4);
            }
            "compact" => {
                let order = [2, 3, 4, 9][self.rng.gen_range(0..4)];
                let prio = [
                    CompactPriority::Async,
                    CompactPriority::SyncLight,
                    CompactPriority::SyncFull,
                ][self.rng.gen_range(0..3)];
                let af = AllocFlags(AllocFlags::WMARK_MIN);
                let (_, page, _) =
                    self.mm
                        .try_to_compact_pages(cpu, Gfp::GFP_HIGHUSER_MOVABLE, order, af, prio);
                // A captured page goes straight back, as the timeless engine's `compact` does.
                if let Some(p) = page {
                    self.mm.free_pages(cpu, p, order);
                }
            }
            "kcompactd" => {
                let order = [3, 9][self.rng.gen_range(0..2)];
                if self.mm.wakeup_kcompactd(0, order, ZoneType::Normal.idx()) {
                    self.mm.kcompactd_until_wait(0);
                }
            }
            "compact_memory" => {
                self.mm.compact_memory();
            }
            "writeback" => {
                self.mm.writeback_settle();
                self.mm.writeback_expired();
                let (bg, _) = self.mm.dirty_thresholds();
                self.mm.writeback_oldest(bg);
            }
            "drain" => {
                self.mm.drain_all_pages();
            }
            "decay" => {
                let zi = self.rng.gen_range(0..self.mm.zones.len());
                if self.mm.zones[zi].populated() {
                    self.mm.decay_pcp_high(cpu, zi);
                }
            }
            "drop_caches" => {
                self.mm.drop_caches(cpu);
            }
            other => unreachable!("{other} is not in MIX"),
        }
    }
}
