//! Fragmentation blame on the live side (issue 37): the kernel's page_owner dump
//! (`/sys/kernel/debug/page_owner` of a kernel with CONFIG_PAGE_OWNER booted with
//! `page_owner=on`, docs/model §30.4), read as text, and the pageblocks it shows mixed
//! attributed to the allocation stacks that made them so.
//!
//! The dump lists each allocated head page (mm/page_owner.c, `read_page_owner` and
//! `print_page_owner`), one record per allocation:
//!
//! ```text
//! Page allocated via order O, mask 0xG(gfp names), pid P, tgid T (comm), ts N ns
//! PFN 0xF type <gfp migratetype> Block <pfn >> pageblock_order> type <block migratetype> Flags ...
//!  frame+0x../0x..              (the stack, one frame per line, indented)
//! Page has been migrated, last migrate reason: ...     (optional)
//! Slab cache page / Charged ... memcg ...               (optional, memcg kernels)
//!                                                       (a blank line)
//! ```
//!
//! A page whose gfp migratetype differs from its block's type is *misplaced*: a fallback put it
//! there (a steal or a claim that did not take the whole block) or the block was claimed since.
//! A block with a misplaced page is mixed: the kernel's own "Number of mixed blocks" in
//! /proc/pagetypeinfo (`pagetypeinfo_showmixedcount_print`, a CONFIG_PAGE_OWNER kernel) uses the
//! same test, any page whose gfp migratetype is not the block's, HighAtomic blocks included. Each source (a stack) is charged once for every mixed
//! block it has misplaced pages in, and with those pages.
//!
//! A stack's name is its first frames outside the page and slab allocators (the frames of
//! [`ALLOCATOR_FRAMES`] are skipped; offsets are dropped), so the allocations of one call site
//! through different allocator paths count together. The file is read line by line: memory
//! grows with the number of distinct stacks and mixed blocks, not with the dump (which is about
//! 1 KB per allocation). Simplifications: free pages are not listed by the kernel, so a block
//! is seen only if it holds an allocation; the dump is not atomic (pages allocated or freed
//! while it is read may be missed or seen twice, as the kernel says of it).

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::StateError;

/// Frames of the page and slab allocators, skipped when naming a stack (prefixes of the
/// function name).
pub const ALLOCATOR_FRAMES: &[&str] = &[
    "post_alloc_hook",
    "prep_new_page",
    "get_page_from_freelist",
    "__alloc_pages",
    "__alloc_frozen_pages",
    "alloc_pages",
    "alloc_frozen_pages",
    "__folio_alloc",
    "folio_alloc",
    "alloc_slab_page",
    "allocate_slab",
    "new_slab",
    "___slab_alloc",
    "__slab_alloc",
    "kmem_cache_alloc",
    "__kmalloc",
    "kmalloc",
    "__kmem_cache_alloc",
    "alloc_pages_mpol",
    "vma_alloc_folio",
    "folio_alloc_mpol",
    "__page_cache_alloc",
    "filemap_alloc_folio",
];

/// How many frames outside the allocators name a stack.
pub const STACK_FRAMES: usize = 4;

/// One source of [`PageOwnerBlame`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageOwnerSource {
    /// The stack's name: its first frames outside the allocators, innermost first, joined by
    /// " < ".
    pub stack: String,
    /// The gfp migratetype of its misplaced pages (the most common one).
    pub page_type: String,
    /// The command name seen most often with it.
    pub comm: String,
    /// Mixed blocks it has misplaced pages in.
    pub mixed_blocks: u64,
    /// Its misplaced pages (each allocation counts its 2^order pages).
    pub misplaced_pages: u64,
    /// Its allocations listed in the dump, misplaced or not, and their pages.
    pub allocations: u64,
    pub pages: u64,
}

/// What [`read_page_owner`] finds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageOwnerBlame {
    /// Allocation records read.
    pub records: u64,
    /// Pageblocks holding at least one listed allocation, and those of them that are mixed, by
    /// the block's type.
    pub blocks_seen: u64,
    pub mixed_blocks: BTreeMap<String, u64>,
    /// The sources with misplaced pages, ranked: most mixed blocks first, then most misplaced
    /// pages, then by name.
    pub sources: Vec<PageOwnerSource>,
    /// Each seen block's type, in block order (the last record read wins: a block's type can
    /// change while the dump is read): what a snapshot keeps as `page_owner_blocks`.
    #[serde(skip)]
    pub block_types: Vec<(u64, String)>,
}

#[derive(Default)]
struct Acc {
    comms: HashMap<String, u64>,
    types: HashMap<String, u64>,
    misplaced_pages: u64,
    allocations: u64,
    pages: u64,
    mixed_blocks: u64,
}

/// The record being read.
#[derive(Default)]
struct Rec {
    line: usize,
    order: u32,
    comm: String,
    /// (pfn, page type, block, block type) from the PFN line.
    pfn: Option<(u64, String, u64, String)>,
    frames: Vec<String>,
    /// The stack's frames are over (a line that is not a frame came after them).
    stack_done: bool,
}

/// Reads the page_owner dump at `path` (module doc). Errors name the file and the line.
pub fn read_page_owner(path: &Path) -> Result<PageOwnerBlame, StateError> {
    let f =
        std::fs::File::open(path).map_err(|e| StateError::new(path, None, format!("cannot open: {e}")))?;
    read_from(path, std::io::BufReader::new(f))
}

/// [`read_page_owner`] of a stream (`path` names it in errors).
pub fn read_from(path: &Path, r: impl BufRead) -> Result<PageOwnerBlame, StateError> {
    let err = |line: usize, m: String| StateError::new(path, None, format!("line {line}: {m}"));
    let mut stacks: HashMap<String, usize> = HashMap::new();
    let mut accs: Vec<(String, Acc)> = Vec::new();
    // Per block: its type and the stacks with misplaced pages in it.
    let mut blocks: HashMap<u64, (String, Vec<usize>)> = HashMap::new();
    let mut records = 0u64;
    let mut cur: Option<Rec> = None;
    let finish = |rec: Rec,
                  stacks: &mut HashMap<String, usize>,
                  accs: &mut Vec<(String, Acc)>,
                  blocks: &mut HashMap<u64, (String, Vec<usize>)>|
     -> Result<(), StateError> {
        let Some((_pfn, page_type, block, block_type)) = rec.pfn else {
            return Err(err(
                rec.line,
                "an allocation record without its \"PFN 0x... type ... Block ...\" line".into(),
            ));
        };
        let name = stack_name(&rec.frames);
        let id = *stacks.entry(name.clone()).or_insert_with(|| {
            accs.push((name, Acc::default()));
            accs.len() - 1
        });
        let a = &mut accs[id].1;
        let pages = 1u64 << rec.order.min(40);
        a.allocations += 1;
        a.pages += pages;
        *a.comms.entry(rec.comm).or_default() += 1;
        let b = blocks
            .entry(block)
            .or_insert_with(|| (block_type.clone(), Vec::new()));
        b.0 = block_type.clone();
        if page_type != block_type {
            a.misplaced_pages += pages;
            *a.types.entry(page_type).or_default() += pages;
            if !b.1.contains(&id) {
                b.1.push(id);
            }
        }
        Ok(())
    };
    for (i, line) in r.lines().enumerate() {
        let n = i + 1;
        let line = line.map_err(|e| err(n, format!("cannot read: {e}")))?;
        if let Some(rest) = line.strip_prefix("Page allocated via order ") {
            if let Some(rec) = cur.take() {
                finish(rec, &mut stacks, &mut accs, &mut blocks)?;
            }
            records += 1;
            let (order, rest) = rest
                .split_once(',')
                .ok_or_else(|| err(n, "expected \"order O, mask ...\"".into()))?;
            let order: u32 = order
                .trim()
                .parse()
                .map_err(|_| err(n, format!("order {:?} is not a number", order.trim())))?;
            if order > 20 {
                return Err(err(n, format!("order {order} is not a page order")));
            }
            // The command name is between the last " (" before ", ts" and the ")" before it.
            let head = rest.rsplit_once(", ts ").map_or(rest, |(h, _)| h);
            let comm = head
                .rfind(" (")
                .map(|i| head[i + 2..].trim_end_matches(')').to_string())
                .ok_or_else(|| err(n, "expected \"(comm)\" after the tgid".into()))?;
            cur = Some(Rec {
                line: n,
                order,
                comm,
                ..Rec::default()
            });
        } else if let Some(rest) = line.strip_prefix("PFN ") {
            let rec = cur
                .as_mut()
                .ok_or_else(|| err(n, "a PFN line outside an allocation record".into()))?;
            let p = parse_pfn_line(rest).ok_or_else(|| {
                err(
                    n,
                    "expected \"PFN 0x<pfn> type <type> Block <n> type <type> Flags ...\"".into(),
                )
            })?;
            for t in [&p.1, &p.3] {
                if crate::procparse::type_index(t).is_none() {
                    return Err(err(n, format!("unknown migratetype {t:?}")));
                }
            }
            rec.pfn = Some(p);
        } else if line.starts_with(' ') || line.starts_with('\t') {
            if let Some(rec) = cur.as_mut().filter(|r| r.pfn.is_some() && !r.stack_done) {
                rec.frames.push(line.trim().to_string());
            }
        } else if line.is_empty() {
            if let Some(rec) = cur.take() {
                finish(rec, &mut stacks, &mut accs, &mut blocks)?;
            }
        } else if let Some(rec) = cur.as_mut() {
            // "Page has been migrated ...", memcg lines: the stack is over.
            rec.stack_done = true;
        } else {
            return Err(err(
                n,
                format!(
                    "not a page_owner line: {:?} (expected \"Page allocated via order ...\")",
                    line.chars().take(60).collect::<String>()
                ),
            ));
        }
    }
    if let Some(rec) = cur.take() {
        finish(rec, &mut stacks, &mut accs, &mut blocks)?;
    }
    let mut block_types: Vec<(u64, String)> = blocks.iter().map(|(&b, (t, _))| (b, t.clone())).collect();
    block_types.sort_unstable();
    let mut mixed_blocks: BTreeMap<String, u64> = BTreeMap::new();
    for (t, ids) in blocks.values() {
        if !ids.is_empty() {
            *mixed_blocks.entry(t.clone()).or_default() += 1;
            for &id in ids {
                accs[id].1.mixed_blocks += 1;
            }
        }
    }
    let most = |m: &HashMap<String, u64>| {
        m.iter()
            .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
            .map(|(k, _)| k.clone())
            .unwrap_or_default()
    };
    let mut sources: Vec<PageOwnerSource> = accs
        .into_iter()
        .filter(|(_, a)| a.misplaced_pages > 0)
        .map(|(stack, a)| PageOwnerSource {
            stack,
            page_type: most(&a.types),
            comm: most(&a.comms),
            mixed_blocks: a.mixed_blocks,
            misplaced_pages: a.misplaced_pages,
            allocations: a.allocations,
            pages: a.pages,
        })
        .collect();
    sources.sort_by(|a, b| {
        b.mixed_blocks
            .cmp(&a.mixed_blocks)
            .then(b.misplaced_pages.cmp(&a.misplaced_pages))
            .then_with(|| a.stack.cmp(&b.stack))
    });
    Ok(PageOwnerBlame {
        records,
        blocks_seen: blocks.len() as u64,
        mixed_blocks,
        sources,
        block_types,
    })
}

/// `0x<pfn> type <t> Block <n> type <t> Flags ...` → (pfn, page type, block, block type).
fn parse_pfn_line(rest: &str) -> Option<(u64, String, u64, String)> {
    let mut w = rest.split_whitespace();
    let pfn = u64::from_str_radix(w.next()?.strip_prefix("0x")?, 16).ok()?;
    (w.next()? == "type").then_some(())?;
    let page_type = w.next()?.to_string();
    (w.next()? == "Block").then_some(())?;
    let block: u64 = w.next()?.parse().ok()?;
    (w.next()? == "type").then_some(())?;
    let block_type = w.next()?.to_string();
    Some((pfn, page_type, block, block_type))
}

/// The name of a stack: its first [`STACK_FRAMES`] frames outside [`ALLOCATOR_FRAMES`],
/// without offsets; `(no stack)` for none.
pub fn stack_name(frames: &[String]) -> String {
    let names: Vec<&str> = frames
        .iter()
        .map(|f| f.split(['+', ' ']).next().unwrap_or(f))
        .filter(|f| !ALLOCATOR_FRAMES.iter().any(|a| f.starts_with(a)))
        .take(STACK_FRAMES)
        .collect();
    if names.is_empty() {
        "(no stack)".to_string()
    } else {
        names.join(" < ")
    }
}

/// The ranked sources as a text table.
pub fn table(b: &PageOwnerBlame) -> String {
    let mut out = format!(
        "# page_owner: {} allocations in {} pageblocks; mixed: {}\n",
        b.records,
        b.blocks_seen,
        if b.mixed_blocks.is_empty() {
            "none".to_string()
        } else {
            b.mixed_blocks
                .iter()
                .map(|(t, n)| format!("{n} {t}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    out.push_str(&format!(
        "{:>4}  {:>6}  {:>9}  {:<11}  {:<16}  {}\n",
        "rank", "mixed", "misplaced", "page_type", "comm", "stack"
    ));
    for (i, s) in b.sources.iter().enumerate() {
        out.push_str(&format!(
            "{:>4}  {:>6}  {:>9}  {:<11}  {:<16}  {}\n",
            i + 1,
            s.mixed_blocks,
            s.misplaced_pages,
            s.page_type,
            s.comm,
            s.stack
        ));
    }
    out
}

/// The ranked sources as CSV (a header row, then one row per source).
pub fn csv(b: &PageOwnerBlame) -> String {
    let q = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let mut out = String::from("rank,mixed_blocks,misplaced_pages,page_type,comm,allocations,pages,stack\n");
    for (i, s) in b.sources.iter().enumerate() {
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{}\n",
            i + 1,
            s.mixed_blocks,
            s.misplaced_pages,
            q(&s.page_type),
            q(&s.comm),
            s.allocations,
            s.pages,
            q(&s.stack)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One record in the kernel's format (`print_page_owner`), with a stack of `frames`.
    fn record(order: u32, comm: &str, pfn: u64, page_t: &str, block_t: &str, frames: &[&str]) -> String {
        let mut s = format!(
            "Page allocated via order {order}, mask 0xcc0(GFP_KERNEL), pid 42, tgid 42 ({comm}), ts 1000 ns\n\
             PFN 0x{pfn:x} type {page_t} Block {} type {block_t} Flags 0x0()\n",
            pfn >> 9
        );
        for f in frames {
            s.push_str(&format!(" {f}+0x10/0x20\n"));
        }
        s.push('\n');
        s
    }

    fn read(text: &str) -> Result<PageOwnerBlame, StateError> {
        read_from(Path::new("po.txt"), text.as_bytes())
    }

    #[test]
    fn misplaced_pages_make_their_blocks_mixed_and_are_charged_to_their_stacks() {
        let slab = [
            "post_alloc_hook",
            "get_page_from_freelist",
            "allocate_slab",
            "d_alloc",
            "lookup_open",
        ];
        let anon = [
            "post_alloc_hook",
            "alloc_pages_mpol",
            "do_anonymous_page",
            "handle_mm_fault",
        ];
        let mut t = String::new();
        // Block 1 (Movable): anon pages and one dentry slab page: mixed, charged to d_alloc.
        t += &record(0, "cc1", 512, "Movable", "Movable", &anon);
        t += &record(0, "cc1", 513, "Unmovable", "Movable", &slab);
        // Block 2 (Movable): two slab pages of order 1 and a migrated anon page.
        t += &record(1, "make", 1024, "Unmovable", "Movable", &slab);
        t += &record(1, "cc1", 1026, "Unmovable", "Movable", &slab);
        t += "Page allocated via order 0, mask 0x140dca(GFP_HIGHUSER_MOVABLE|__GFP_ZERO), pid 7, tgid 7 (a b), ts 5 ns\n\
              PFN 0x408 type Movable Block 2 type Movable Flags 0x0()\n do_anonymous_page+0x1/0x2\n\
              Page has been migrated, last migrate reason: compaction\n\n";
        // Block 3 (Unmovable): only unmovable pages: pure.
        t += &record(0, "kworker/0:1", 1536, "Unmovable", "Unmovable", &slab);
        let b = read(&t).unwrap();
        assert_eq!(b.records, 6);
        assert_eq!(b.blocks_seen, 3);
        assert_eq!(b.mixed_blocks, BTreeMap::from([("Movable".to_string(), 2)]));
        assert_eq!(b.sources.len(), 1);
        let s = &b.sources[0];
        assert_eq!(s.stack, "d_alloc < lookup_open");
        assert_eq!((s.mixed_blocks, s.misplaced_pages), (2, 1 + 2 + 2));
        assert_eq!((s.allocations, s.pages), (4, 1 + 2 + 2 + 1));
        assert_eq!((s.page_type.as_str(), s.comm.as_str()), ("Unmovable", "cc1"));
        let table = table(&b);
        assert!(
            table.contains("2 Movable") && table.contains("d_alloc < lookup_open"),
            "{table}"
        );
        assert_eq!(csv(&b).lines().count(), 2);
    }

    #[test]
    fn block_types_are_the_last_record_s() {
        let mut t = record(0, "x", 0x1000, "Unmovable", "Unmovable", &["f"]);
        t += &record(9, "y", 0x200400, "Movable", "Movable", &["g"]);
        t += &record(0, "z", 0x1001, "Unmovable", "Reclaimable", &["h"]);
        let b = read(&t).unwrap();
        assert_eq!(
            b.block_types,
            vec![(8, "Reclaimable".to_string()), (4098, "Movable".to_string())]
        );
        let e = read(&record(0, "x", 1, "Sticky", "Movable", &[]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("unknown migratetype"), "{e}");
    }

    #[test]
    fn sources_rank_by_mixed_blocks_then_pages() {
        let mut t = String::new();
        for blk in 1..=3u64 {
            t += &record(0, "x", blk * 512, "Unmovable", "Movable", &["a_fn"]);
        }
        t += &record(3, "y", 4 * 512, "Reclaimable", "Movable", &["b_fn"]);
        let b = read(&t).unwrap();
        let names: Vec<&str> = b.sources.iter().map(|s| s.stack.as_str()).collect();
        assert_eq!(names, ["a_fn", "b_fn"]);
        assert_eq!(b.sources[1].misplaced_pages, 8);
    }

    #[test]
    fn bad_input_names_the_line() {
        let e = read("hello\n").unwrap_err().to_string();
        assert!(
            e.contains("po.txt") && e.contains("line 1") && e.contains("not a page_owner line"),
            "{e}"
        );
        let e = read("Page allocated via order 0, mask 0x0(), pid 1, tgid 1 (x), ts 1 ns\nPFN zz\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("PFN 0x"), "{e}");
        let e = read("Page allocated via order 0, mask 0x0(), pid 1, tgid 1 (x), ts 1 ns\n\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1") && e.contains("without its"), "{e}");
        let e = read("Page allocated via order x, mask\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1") && e.contains("not a number"), "{e}");
        assert_eq!(read("").unwrap(), PageOwnerBlame::default());
    }
}
