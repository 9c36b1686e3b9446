//! Kernel-model.md §33 through the workload generators: the block-device page cache that the
//! file workloads' metadata makes (mm's `bdev.rs`), at the rates §33.3 gives, none on XFS, and
//! the pageblocks it mixes — counted as the kernel's census by content counts them.

use std::collections::BTreeMap;

use fraglab_mm::folio::FolioKind;
use fraglab_spec::parse_spec;
use fraglab_spec::result::RunResult;

fn run(text: &str) -> RunResult {
    let spec = parse_spec(text, "t.toml").unwrap();
    fraglab_sim::timed::run_workload(&spec).unwrap()
}

fn work(r: &RunResult, k: &str) -> u64 {
    r.sim_work.get(k).copied().unwrap_or(0)
}

/// One task creating `count` files of 4 KiB in set `s` (mapping `mapping`), then idling past
/// the first jbd2 commit.
fn files_spec(count: u64, extra: &str, mapping: &str) -> String {
    format!(
        r#"
[machine]
memory = "512MiB"
cpus = 2
{extra}
[run]
seed = 1
[workload]
duration = "8s"
[[workload.task]]
name = "w"
steps = [{{ files = "s", count = {count}, size = "4KiB", op = "create"{mapping} }}, {{ sleep = "7s" }}]
"#
    )
}

#[test]
fn s33_3_files_make_bdev_pages_at_the_rates_on_a_small_machine() {
    let r = run(&files_spec(4096, "", ""));
    // §33.3 item 1: 4096 names of 1–4 digits, 12-byte entries, 2817 bytes a leaf at 69 % fill:
    // the htree root and 18 leaves — 19 UNMOVABLE directory blocks (the first from mkdir, as
    // the host makes the set's directory before the run).
    assert_eq!(work(&r, "bdev_alloc_unmovable"), 19);
    // MOVABLE: the inode table, 1/16 page a file (the directory's inode and the files'
    // 12..=4107 fill blocks 0..=256), the group's two bitmaps, and per commit a descriptor per
    // 254 journalled buffers and a commit block.
    let commits = work(&r, "jbd2_commits");
    assert!(commits >= 1);
    let movable = work(&r, "bdev_alloc_movable");
    assert!(
        (257 + 2 + 2 * commits..=257 + 2 + 3 * commits).contains(&movable),
        "{movable} MOVABLE bdev pages, {commits} commits"
    );
    // Table block 0 holds mkfs's reserved inodes: read once (its readahead window ends at the
    // used table); every later block is zeroed.
    assert_eq!(work(&r, "bdev_inode_table_reads"), 1);
    // Nothing reclaimed on this machine: all still cached, one buffer head each, 39 a slab page.
    let pages = work(&r, "bdev_pages_end");
    assert_eq!(pages, 19 + movable);
    assert_eq!(work(&r, "buffer_head_slab_pages_end"), pages.div_ceil(39));
}

#[test]
fn s33_3_xfs_files_make_no_bdev_pages() {
    let loop_images = "[host]\nloop_images = true\n";
    // Files on an XFS loop image: XFS metadata buffers are not page cache (§33.3).
    let r = run(&files_spec(512, loop_images, ", mapping = \"xfs\""));
    assert!(
        r.sim_work.keys().all(|k| !k.starts_with("bdev")),
        "{:?}",
        r.sim_work
    );
    // The run directory on XFS (no loop images), or the model before §33.
    for m in ["xfs", "off"] {
        let r = run(&files_spec(512, &format!("[model]\nfs_metadata = \"{m}\"\n"), ""));
        assert!(
            r.sim_work.keys().all(|k| !k.starts_with("bdev")),
            "{m}: {:?}",
            r.sim_work
        );
    }
    // The same files on the ext4 images (large_folios; no_large_folios is ext4 data=journal),
    // or in the default ext4 run directory, make them.
    for (extra, mapping) in [
        (loop_images, ", mapping = \"large_folios\""),
        (loop_images, ", mapping = \"no_large_folios\""),
        ("", ""),
        (
            "[model]\nfs_metadata = \"xfs\"\n[host]\nloop_images = true\n",
            ", mapping = \"large_folios\"",
        ),
    ] {
        let r = run(&files_spec(512, extra, mapping));
        assert!(work(&r, "bdev_alloc_unmovable") > 0, "{extra} {mapping}");
    }
}

/// Two tasks building fragmentation side by side on a 1 GiB machine, the thp-frag scenario's
/// file part (experiments/validation/thp-frag-dm1.toml, scaled down): small files, slab (the
/// host's empty files) and pipes; `keep` frees every other slab object and pipe, `drop`
/// deletes its files.
const SMALL_FILES: &str = r#"
[machine]
memory = "1GiB"
cpus = 2
[model]
fs_metadata = "FS"
[run]
seed = 1
[workload]
duration = "60s"
[[workload.task]]
name = "keep"
steps = [
  { files = "keep", count = 4096, size = "16KiB", op = "create" },
  { slab = 2048 },
  { pipes = 1024 },
  { free = "slab", every = 2 },
  { free = "pipes", every = 2 },
  { sleep = "40s" },
]
[[workload.task]]
name = "drop"
steps = [
  { files = "drop", count = 4096, size = "16KiB", op = "create" },
  { slab = 2048 },
  { pipes = 1024 },
  { files = "drop", count = 4096, size = "16KiB", op = "delete" },
]
"#;

/// Blocks of the run's last pageblock map by their character (lower case: mixed).
fn map_chars(r: &RunResult) -> BTreeMap<char, usize> {
    let mut m = BTreeMap::new();
    for c in r.pageblock_maps.last().unwrap().types.chars() {
        *m.entry(c).or_default() += 1;
    }
    m
}

#[test]
fn s33_small_file_workload_on_a_small_machine_mixes_unmovable_blocks() {
    let before = run(&SMALL_FILES.replace("FS", "off"));
    let after = run(&SMALL_FILES.replace("FS", "ext4"));
    // Before §33 no allocator path mixed a block in this workload (vm.defrag_mode 0, enough
    // free memory: no steal); with ext4's metadata, the directory blocks and inode-table
    // readahead are LRU pages inside Unmovable blocks: 1 mixed block (an Unmovable one) at the
    // end of the run, seed 1.
    assert_eq!(before.samples.last().unwrap().mixed_blocks, 0);
    assert_eq!(map_chars(&before).get(&'u'), None);
    assert_eq!(after.samples.last().unwrap().mixed_blocks, 1);
    assert_eq!(map_chars(&after).get(&'u'), Some(&1));
    assert!(work(&after, "bdev_alloc_unmovable") > 0);
}

/// The census by content, on both sides: a kpageflags snapshot whose Unmovable block holds
/// slab and page-cache (LRU) pages is mixed in the reconstruction's census (the kernel side,
/// docs/model §30.2: slab + LRU), and the simulator booted from it counts the same block
/// mixed in its samples and lower-cases it in its pageblock map.
#[test]
fn s33_unmovable_block_with_lru_pages_is_mixed_in_both_censuses() {
    use fraglab_state::page::PageClass;
    use fraglab_state::reconstruct::{reconstruct, ReconstructOptions};
    use fraglab_state::snapshot::{Snapshot, SnapshotHeader, ZoneSpan};
    let n = 4096u64;
    let mut pages = vec![PageClass::Anon as u8; n as usize];
    // Block 0: slab, then 4 directory-block pages (page cache), then other kernel pages.
    pages[..256].fill(PageClass::Slab as u8);
    pages[256..260].fill(PageClass::File as u8);
    pages[260..512].fill(PageClass::Kernel as u8);
    let pti = "Free pages count per migrate type at order       0      1      2      3      4      5      6      7      8      9     10 \n\
        Node    0, zone   Normal, type    Unmovable      0      0      0      0      0      0      0      0      0      0      0 \n\n\
        Number of blocks type     Unmovable      Movable  Reclaimable   HighAtomic      Isolate \n\
        Node 0, zone   Normal            1            7            0            0            0 \n";
    let buddy = "Node 0, zone   Normal      0      0      0      0      0      0      0      0      0      0      0\n";
    let proc: BTreeMap<String, String> = [
        ("pagetypeinfo".to_string(), pti.to_string()),
        ("buddyinfo".to_string(), buddy.to_string()),
    ]
    .into();
    let snap = Snapshot {
        header: SnapshotHeader {
            end_pfn: n,
            ram_ranges: vec![[0, n]],
            zones: vec![ZoneSpan {
                name: "Normal".into(),
                start_pfn: 0,
                spanned: n,
                present: n,
                managed: n,
                ..Default::default()
            }],
            proc_before: proc.clone(),
            proc_after: proc,
            ..Default::default()
        },
        pages,
        dirty: Vec::new(),
    };
    let rec = reconstruct(&snap, &ReconstructOptions::default()).unwrap();
    assert_eq!(rec.block_types[0], 0, "block 0 fitted Unmovable");
    assert_eq!(rec.report.mixed_blocks, 1);
    let r = fraglab_sim::restore::to_restore(&rec).unwrap();
    let cfg = fraglab_mm::MmConfig::new(fraglab_mm::MachineConfig {
        cpu_node: Vec::new(),
        zones: r.zones.clone(),
        nr_cpus: 1,
    });
    let mm = fraglab_mm::Mm::from_restore(&cfg, &r).unwrap();
    assert_eq!(fraglab_sim::snapshot::sample(&mm, 0).mixed_blocks, 1);
    let map = fraglab_sim::snapshot::pageblock_snapshot(&mm, 0);
    assert_eq!(map.types.chars().next(), Some('u'));
    assert_eq!(map.types.chars().filter(|c| c.is_lowercase()).count(), 1);
    // The simulator's own bdev pages count the same way: content by what a page is (an LRU
    // page) whatever it was allocated as.
    assert_eq!(fraglab_mm::folio::folio_mobility(FolioKind::Bdev, 0), 1);
}

/// Both of the simulator's maps count a directory block in an Unmovable block as mixing it:
/// the timed engine's census by content (samples, result maps) and the timeless engine's text
/// map (`print = "pageblocks"`), although the page was allocated UNMOVABLE, as every page
/// beside it was (no fallback: page_owner's "mixed" would not count it).
#[test]
fn s33_both_engines_maps_count_a_directory_block_in_an_unmovable_block() {
    use fraglab_mm::{Gfp, MachineConfig, Mm, Tunables, ZoneConfig, ZoneType};
    let pages = 64 * 512;
    let zone = ZoneConfig {
        zone_type: ZoneType::Dma32,
        nid: 0,
        start_pfn: 4096,
        spanned: pages,
        present: pages,
        managed: pages,
    };
    let mut mm = Mm::new(
        &MachineConfig {
            cpu_node: Vec::new(),
            zones: vec![zone],
            nr_cpus: 1,
        },
        Tunables::default(),
    )
    .unwrap();
    // An Unmovable block with a kernel page in it.
    mm.alloc_folio(0, Gfp::GFP_KERNEL, 0, FolioKind::Kernel, false)
        .unwrap();
    // The map's rows (after the legend), one character a block.
    let bangs = |mm: &Mm| {
        fraglab_sim::timeless::pageblock_map(mm, None)
            .lines()
            .filter(|l| l.trim_start().starts_with("0x"))
            .map(|l| l.matches('!').count())
            .sum::<usize>()
    };
    assert_eq!(bangs(&mm), 0);
    assert_eq!(fraglab_sim::snapshot::sample(&mm, 0).mixed_blocks, 0);
    let e = mm.ext4_mount();
    mm.ext4_mkdir(0, e, 0, false);
    mm.check_invariants().unwrap();
    assert_eq!(bangs(&mm), 1);
    assert_eq!(fraglab_sim::snapshot::sample(&mm, 0).mixed_blocks, 1);
    let map = fraglab_sim::snapshot::pageblock_snapshot(&mm, 0);
    assert_eq!(map.types.matches('u').count(), 1);
}
