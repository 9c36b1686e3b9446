//! Free page reporting in the engines (§32): the delayed pass in virtual time,
//! the host-fault cost of first writes, the result's figures, the spec key, a snapshot boot
//! and the default (no device) leaving results as they were.

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;

use fraglab_mm::mmzone::{MachineConfig, ZoneConfig};
use fraglab_mm::types::ZoneType;
use fraglab_mm::{Gfp, Mm, MmConfig, Tunables};
use fraglab_sim::anon::{AllocPath, AnonVma};
use fraglab_sim::cost::CostModel;
use fraglab_sim::engine::{Cx, Engine, Step, TaskBody, MS, SEC};
use fraglab_sim::metrics::Metrics;
use fraglab_sim::restore::{loaded, preload};
use fraglab_sim::workload::common::touch_range;
use fraglab_spec::parse_spec;
use fraglab_state::reconstruct::{MatchReport, RFree, RZone, Reconstruction};
use fraglab_state::snapshot::SnapshotHeader;

const BASE: u32 = 4096;
const PB: u32 = 512;

/// One DMA32 zone of `blocks` pageblocks at pfn 4096, min_free_kbytes 128, a reporting device at
/// `order` (None: none), debug-vm on.
fn machine(blocks: u32, order: Option<u32>) -> Mm {
    let cfg = MmConfig {
        tun: Tunables {
            min_free_kbytes: Some(128),
            ..Tunables::default()
        },
        page_reporting_order: order,
        ..MmConfig::new(MachineConfig {
            cpu_node: Vec::new(),
            zones: vec![ZoneConfig {
                zone_type: ZoneType::Dma32,
                nid: 0,
                start_pfn: BASE,
                spanned: blocks * PB,
                present: blocks * PB,
                managed: blocks * PB,
            }],
            nr_cpus: 1,
        })
    };
    let mut mm = Mm::from_config(&cfg).unwrap();
    mm.debug_vm = true;
    mm
}

/// Sleeps until `at`, then frees the order-`order` chunk at `pfn` and exits.
struct FreeAt {
    at: u64,
    pfn: u32,
    order: u32,
}

impl TaskBody for FreeAt {
    fn comm(&self) -> &str {
        "free-at"
    }
    fn step(&mut self, cx: &mut Cx) -> Step {
        if cx.now < self.at {
            return Step::Sleep {
                ran: 0,
                sleep: self.at - cx.now,
            };
        }
        cx.mm.free_pages(cx.cpu, self.pfn, self.order);
        Step::Exit(0)
    }
}

fn passes(e: &Engine) -> u64 {
    e.mm.reporting.stats.passes
}

/// §32.1–§32.2: the device's first pass runs 2 s after boot; a free that merges to the
/// reporting order while it is idle schedules the next one 2 s after the free.
#[test]
fn s32_pass_runs_2_s_after_the_request_in_virtual_time() {
    let mut mm = machine(64, Some(9));
    let chunk = mm.alloc_pages(0, Gfp::GFP_HIGHUSER_MOVABLE, 10).unwrap();
    // No context-switch charge, so the task frees at 5 s exactly.
    let cost = CostModel {
        context_switch_ns: 0,
        ..CostModel::default()
    };
    let mut e = Engine::new(mm, cost, 1);
    e.spawn(Box::new(FreeAt {
        at: 5 * SEC,
        pfn: chunk,
        order: 10,
    }));
    e.run(2 * SEC - 1, |_| false);
    assert_eq!(passes(&e), 0);
    e.run(2 * SEC, |_| false);
    assert_eq!(passes(&e), 1);
    assert!(e.mm.reporting.stats.chunks > 0);
    e.run(7 * SEC - 1, |_| false);
    assert_eq!(
        passes(&e),
        1,
        "idle after the first pass; the free at 5 s asks for one"
    );
    e.run(7 * SEC, |_| false);
    assert_eq!(passes(&e), 2);
    e.run(30 * SEC, |_| false);
    assert_eq!(passes(&e), 2, "nothing freed since");
}

/// §32.2 item 4 and 8: a pass that spends a list's budget asks for another, which runs 2 s
/// after it; the device goes idle after the pass that reports the rest.
#[test]
fn s32_a_spent_budget_schedules_the_next_pass_2_s_later() {
    let mut mm = machine(16, Some(0));
    while mm
        .rmqueue(
            0,
            1,
            0,
            fraglab_mm::AllocFlags(0),
            fraglab_mm::MigrateType::Movable,
        )
        .is_some()
    {}
    for i in 0..200 {
        mm.free_pages(0, BASE + 1 + 2 * i, 0);
    }
    mm.drain_all_pages();
    let mut e = Engine::new(mm, CostModel::default(), 1);
    let mut seen = Vec::new();
    for t in [2, 4, 6, 8, 10, 12] {
        e.run(t * SEC - 1, |_| false);
        let before = passes(&e);
        e.run(t * SEC, |_| false);
        seen.push((t, passes(&e) - before));
    }
    assert_eq!(seen, vec![(2, 1), (4, 1), (6, 1), (8, 1), (10, 0), (12, 0)]);
    assert_eq!(e.mm.reporting.stats.chunks, 200);
    assert_eq!(e.mm.reported_free_pages(), 200);
}

/// Touches `pages` pages of its mapping in one step, then (second step) drops them with
/// MADV_DONTNEED and touches them again; records each step's charge.
struct Toucher {
    vma: AnonVma,
    pages: u64,
    step: u32,
    metrics: Rc<RefCell<Metrics>>,
    charged: Rc<RefCell<Vec<u64>>>,
}

impl TaskBody for Toucher {
    fn comm(&self) -> &str {
        "toucher"
    }
    fn step(&mut self, cx: &mut Cx) -> Step {
        self.step += 1;
        if self.step == 2 {
            let n = self.vma.nr_pages;
            self.vma.dontneed(cx.mm, cx.cpu, 0, n);
        }
        let ns = touch_range(cx, &mut self.vma, 0, self.pages, &mut self.metrics.borrow_mut()).cpu_ns;
        self.charged.borrow_mut().push(ns);
        if self.step == 2 {
            Step::Exit(ns)
        } else {
            Step::Ran(ns)
        }
    }
}

/// What a THP fault twice (the second time on the memory the first one freed) charged, and the
/// run's metrics, on a machine whose free memory the host discarded (with a device) or not.
fn touch_twice(order: Option<u32>) -> (Vec<u64>, Metrics, Mm) {
    let mut mm = machine(64, order);
    // Every page allocated, then 16 order-10 chunks and 100 single pages free: the pass reports
    // all 16 chunks (the single pages keep the zone above min + 1024 for the last one).
    while mm
        .rmqueue(
            0,
            1,
            0,
            fraglab_mm::AllocFlags(0),
            fraglab_mm::MigrateType::Movable,
        )
        .is_some()
    {}
    for p in BASE + 32 * PB..BASE + 64 * PB {
        mm.free_pages(0, p, 0);
    }
    for i in 0..100 {
        mm.free_pages(0, BASE + 1 + 2 * i, 0);
    }
    mm.drain_all_pages();
    let p = mm.page_reporting_process();
    if order.is_some() {
        assert_eq!(p.chunks, 16);
        assert_eq!(mm.host_discarded_pages(), 16 * 1024);
    }
    mm.take_wakeups();
    let metrics = Rc::new(RefCell::new(Metrics::default()));
    let charged = Rc::new(RefCell::new(Vec::new()));
    let mut e = Engine::new(mm, CostModel::default(), 1);
    e.spawn(Box::new(Toucher {
        vma: AnonVma::new(512, true),
        pages: 512,
        step: 0,
        metrics: metrics.clone(),
        charged: charged.clone(),
    }));
    e.run(10 * SEC, |e| e.workload_done());
    assert!(e.workload_done());
    let c = charged.borrow().clone();
    let m = metrics.borrow().clone();
    (c, m, e.mm)
}

/// §32.3 item 6: the first write to a page whose backing the host discarded costs
/// `host_fault_ns`, once; the fault's latency includes it and the result keeps it apart. No
/// device, no charge.
#[test]
fn s32_first_touch_costs_a_host_fault_once_per_page_and_only_with_reporting() {
    let cost = CostModel::default();
    let (off, m_off, mm_off) = touch_twice(None);
    let (on, m_on, mm_on) = touch_twice(Some(9));
    assert_eq!(mm_off.reporting.stats.host_fault_pages, 0);
    assert!(m_off.host_faults.is_empty());
    // The THP (512 pages) and its page table (one page, from a discarded chunk too).
    let host = mm_on.reporting.stats.host_fault_pages;
    assert_eq!(host, 513);
    assert_eq!(on[0], off[0] + host * cost.host_fault_ns);
    // The second fault gets the freed THP back: backed, no host fault.
    assert_eq!(on[1], off[1]);
    let (n, ns) = m_on.host_faults[&(9, AllocPath::Fast)];
    assert_eq!((n, ns), (1, host * cost.host_fault_ns));
    let h = m_on
        .fault_latency
        .iter()
        .find(|(k, _)| **k == (9, AllocPath::Fast))
        .unwrap()
        .1;
    let h_off = m_off
        .fault_latency
        .iter()
        .find(|(k, _)| **k == (9, AllocPath::Fast))
        .unwrap()
        .1;
    assert_eq!(h.count, 2);
    assert_eq!(h.sum_ns, h_off.sum_ns + host * cost.host_fault_ns);
}

/// Allocates an order-9 kernel chunk in one step (no fault): its host faults lengthen the step.
struct KernelAlloc;

impl TaskBody for KernelAlloc {
    fn comm(&self) -> &str {
        "kalloc"
    }
    fn step(&mut self, cx: &mut Cx) -> Step {
        cx.mm.alloc_pages(cx.cpu, Gfp::GFP_KERNEL, 9).unwrap();
        Step::Exit(1000)
    }
}

/// §32.3 item 6: a write that is not a fault (here a kernel allocation's) is charged to the
/// step that made it.
#[test]
fn s32_other_first_writes_lengthen_the_step() {
    let cost = CostModel {
        context_switch_ns: 0,
        ..CostModel::default()
    };
    for (order, want) in [(None, 1000), (Some(9), 1000 + 512 * cost.host_fault_ns)] {
        let mut mm = machine(64, order);
        mm.page_reporting_process();
        mm.take_wakeups();
        // The first chunk an allocation takes is the unreported one the pass stopped at.
        let skip = mm.alloc_pages(0, Gfp::GFP_HIGHUSER_MOVABLE, 10).unwrap();
        assert!(mm.host_backed(skip));
        mm.take_host_faults();
        let mut e = Engine::new(mm, cost.clone(), 1);
        let id = e.spawn(Box::new(KernelAlloc));
        e.run(SEC, |e| e.workload_done());
        assert_eq!(e.task_stats(id).cpu_ns, want, "{order:?}");
    }
}

const TIMED: &str = r#"
name = "t"
[machine]
memory = "512MiB"
cpus = 2
REPORTING
[knobs]
"transparent_hugepage/enabled" = "madvise"
[run]
seed = 3
[workload]
duration = "20s"
[[workload.thp_burst]]
interval = "500ms"
size = "64MiB"
hold = "200ms"
bursts = 12
"#;

fn timed_json(reporting: &str) -> (String, fraglab_spec::result::RunResult) {
    let spec = parse_spec(&TIMED.replace("REPORTING", reporting), "t.toml").unwrap();
    let r = fraglab_sim::timed::run_workload(&spec).unwrap();
    (serde_json::to_string(&r).unwrap(), r)
}

/// The default is no device: a spec without the key, and one with `"off"`, give the same bytes
/// as each other (and as before the key existed: no new field appears), and with a device the
/// result carries its figures.
#[test]
fn s32_default_off_leaves_results_unchanged() {
    let (absent, r) = timed_json("");
    let (off, _) = timed_json("page_reporting_order = \"off\"");
    assert_eq!(absent, off);
    assert!(!absent.contains("host_fault"), "no new field without a device");
    assert!(!absent.contains("page_reporting"));
    assert!(r.fault_latency.iter().all(|h| h.host_faults == 0));
    let (on, r) = timed_json("page_reporting_order = 9");
    assert_ne!(absent, on);
    assert_eq!(r.sim_work["page_reporting_order"], 9);
    // The boot request's pass at 2 s spends its budget (120 order-10 chunks), the next one at
    // 4 s finishes; the bursts' THPs go back to the PCP lists, which notify nobody.
    assert!(r.sim_work["page_reporting_passes"] >= 2, "{:?}", r.sim_work);
    assert!(r.sim_work["page_reporting_reported_kib"] > 0);
    // The bursts' THP faults land on discarded memory: the slow mode is there and accounted.
    let host: u64 = r.fault_latency.iter().map(|h| h.host_faults).sum();
    let host_ns: u64 = r.fault_latency.iter().map(|h| h.host_fault_ns).sum();
    assert!(host > 0 && host_ns > 0, "{:?}", r.fault_latency);
    assert!(host_ns <= r.sim_work["host_fault_ns"]);
    // Deterministic with a device too.
    assert_eq!(on, timed_json("page_reporting_order = 9").0);

    // A timeless example: absent and "off" print the same.
    let text = fraglab_spec::examples::example("claim-steal-merge").unwrap();
    let with_off = text.replacen("[machine]\n", "[machine]\npage_reporting_order = \"off\"\n", 1);
    assert_ne!(text, with_off);
    let a = fraglab_sim::run_ops(&parse_spec(text, "a.toml").unwrap()).unwrap();
    let b = fraglab_sim::run_ops(&parse_spec(&with_off, "b.toml").unwrap()).unwrap();
    assert_eq!(a, b);
}

/// `[machine] page_reporting_order`: 0..=10 or "off"; anything else names file, line and key.
#[test]
fn s32_spec_key_range_and_errors() {
    let spec = |v: &str| {
        parse_spec(
            &format!("[machine]\nmemory = \"64MiB\"\npage_reporting_order = {v}\n"),
            "m.toml",
        )
    };
    assert_eq!(spec("0").unwrap().machine.page_reporting_order, Some(0));
    assert_eq!(spec("10").unwrap().machine.page_reporting_order, Some(10));
    let off = spec("\"off\"").unwrap();
    assert_eq!(
        (off.machine.page_reporting_order, off.machine.page_reporting_given),
        (None, true)
    );
    let absent = parse_spec("[machine]\nmemory = \"64MiB\"\n", "m.toml").unwrap();
    assert_eq!(
        (
            absent.machine.page_reporting_order,
            absent.machine.page_reporting_given
        ),
        (None, false)
    );
    assert_eq!(
        spec("11").unwrap_err().to_string(),
        "m.toml:3: key machine.page_reporting_order: 11 is out of range (expected 0..=10 or \"off\")"
    );
    assert_eq!(
        spec("-1").unwrap_err().to_string(),
        "m.toml:3: key machine.page_reporting_order: -1 is out of range (expected 0..=10 or \"off\")"
    );
    assert_eq!(
        spec("\"on\"").unwrap_err().to_string(),
        "m.toml:3: key machine.page_reporting_order: \"on\" is not an order (expected 0..=10 or \"off\")"
    );
    assert!(spec("true")
        .unwrap_err()
        .to_string()
        .starts_with("m.toml:3: key machine.page_reporting_order: expected an order 0..=10 or \"off\""));
    // The timeless op runs the pending pass.
    let s = parse_spec(
        "[machine]\nmemory = \"256MiB\"\npage_reporting_order = 9\n[[op]]\npage_reporting = true\n[[op]]\npage_reporting = true\n",
        "o.toml",
    )
    .unwrap();
    let out = fraglab_sim::run_ops(&s).unwrap();
    assert!(out.contains("# op[0] page_reporting: pass at order 9:"), "{out}");
    assert!(
        out.contains("# op[1] page_reporting: idle, no pass pending"),
        "{out}"
    );
    let s = parse_spec(
        "[machine]\nmemory = \"256MiB\"\n[[op]]\npage_reporting = true\n",
        "o.toml",
    )
    .unwrap();
    assert!(fraglab_sim::run_ops(&s)
        .unwrap()
        .contains("# op[0] page_reporting: no reporting device"));
}

/// A stand-in snapshot file (its reconstruction preloaded: one DMA32 zone of 32 free blocks)
/// whose header records `confounders`.
fn snapshot_dir(name: &str, confounders: serde_json::Value) -> PathBuf {
    snapshot_dir_reported(name, confounders, None)
}

/// [`snapshot_dir`] whose capture recorded which free chunks were reported (`Some`: their head
/// pfns), as a capture with `reported_bits` does.
fn snapshot_dir_reported(name: &str, confounders: serde_json::Value, reported: Option<Vec<u32>>) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fraglab-s32-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let file = d.join("state.fsnap");
    std::fs::write(&file, b"stand-in").unwrap();
    let base = BASE as u64;
    let end = base + 32 * 512;
    let rec = Reconstruction {
        end_pfn: end,
        zones: vec![RZone {
            node: 0,
            name: "DMA32".into(),
            start_pfn: base,
            spanned: end - base,
            present: end - base,
            managed: end - base,
        }],
        reserved: Vec::new(),
        holes: Vec::new(),
        block_types: vec![1; (end / 512) as usize],
        free: (base..end)
            .step_by(1024)
            .map(|pfn| RFree { pfn, order: 10 })
            .collect(),
        folios: Vec::new(),
        report: MatchReport::default(),
    };
    let header = SnapshotHeader {
        nr_cpus: 2,
        end_pfn: end,
        confounders,
        ..Default::default()
    };
    let mut l = loaded(&file, header, rec).unwrap();
    l.restore.free_reported = reported;
    preload(&file, l).unwrap();
    d
}

/// A snapshot boot takes the captured page_reporting_order unless the spec gives one; a
/// snapshot without the record boots without a device.
#[test]
fn s32_snapshot_boot_takes_the_captured_order() {
    let recorded = serde_json::json!({
        "page_reporting": {"order": 9, "cmdline_order": 11, "reported_kib": 123, "active": true, "parameters": {}}
    });
    let d = snapshot_dir("recorded", recorded);
    let boot = |body: &str| {
        let file = d.join("spec.toml");
        let text = format!("[machine]\nsnapshot = \"state.fsnap\"\n{body}");
        fraglab_sim::boot(&parse_spec(&text, file.to_str().unwrap()).unwrap()).unwrap()
    };
    assert_eq!(boot("").reporting.order(), Some(9), "the snapshot's");
    assert_eq!(
        boot("page_reporting_order = 5\n").reporting.order(),
        Some(5),
        "the spec's"
    );
    assert_eq!(
        boot("page_reporting_order = \"off\"\n").reporting.order(),
        None,
        "the spec's off"
    );
    // A capture that did not record which chunks were reported boots with none reported,
    // every page host-backed, and the device's first pass pending, as a fresh boot.
    let mut mm = boot("");
    assert!(mm.take_wakeups().contains(&fraglab_mm::Wakeup::PageReporting));
    assert_eq!(mm.reported_free_pages(), 0);
    assert!(mm.host_backed(BASE));
    let _ = std::fs::remove_dir_all(&d);

    // No device when the snapshot was taken (sysfs read -1), or no record at all.
    for (name, c) in [
        (
            "unset",
            serde_json::json!({"page_reporting": {"order": null, "parameters": {"page_reporting_order": "-1"}}}),
        ),
        ("none", serde_json::Value::Null),
    ] {
        let d = snapshot_dir(name, c);
        let file = d.join("spec.toml");
        let spec = parse_spec("[machine]\nsnapshot = \"state.fsnap\"\n", file.to_str().unwrap()).unwrap();
        assert_eq!(
            fraglab_sim::boot(&spec).unwrap().reporting.order(),
            None,
            "{name}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}

/// The engine's clock constants the tests above rely on.
#[test]
fn s32_delay_is_2_s() {
    assert_eq!(fraglab_mm::page_reporting::PAGE_REPORTING_DELAY_MS * MS, 2 * SEC);
}

/// §32.3 on a snapshot boot: the chunks the capture saw reported (KPF_UPTODATE on a free page)
/// boot reported and not host-backed, the others unreported and backed; the device's first pass
/// is pending as on a fresh boot, so the rest is reported 2 s in.
#[test]
fn s32_snapshot_boot_restores_the_captured_reported_chunks() {
    let recorded = serde_json::json!({
        "page_reporting": {"order": 9, "cmdline_order": 11, "reported_kib": 123, "active": true, "parameters": {}}
    });
    let first = BASE;
    let d = snapshot_dir_reported("captured", recorded, Some(vec![first]));
    let file = d.join("spec.toml");
    let spec = parse_spec("[machine]\nsnapshot = \"state.fsnap\"\n", file.to_str().unwrap()).unwrap();
    let mut mm = fraglab_sim::boot(&spec).unwrap();
    assert_eq!(mm.reported_free_pages(), 1024);
    assert!(mm.pages.is_reported(first));
    assert!(!mm.host_backed(first) && !mm.host_backed(first + 1023));
    assert!(mm.host_backed(first + 1024));
    assert!(mm.take_wakeups().contains(&fraglab_mm::Wakeup::PageReporting));
    // The reported chunk is at the tail of its list: an order-10 allocation takes the first
    // unreported one (the lowest pfn after it), with no host fault.
    let faults = mm.reporting.stats.host_fault_pages;
    let zi = mm.zones.iter().position(|z| z.populated()).unwrap();
    let got = mm
        .rmqueue(
            0,
            zi,
            10,
            fraglab_mm::AllocFlags(0),
            fraglab_mm::MigrateType::Movable,
        )
        .expect("an order-10 chunk");
    assert_eq!(got, first + 1024);
    assert_eq!(mm.reporting.stats.host_fault_pages, faults);
    let _ = std::fs::remove_dir_all(&d);
}
