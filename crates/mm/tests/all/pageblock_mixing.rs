//! The allocator paths that put pages of one mobility into a pageblock of another
//! (docs/pageblock-mixing.md; docs/model §1.7, §2.1, §5.1, §6.3, §8). Each test builds the
//! state through the public API and checks what the kernel does: which page an allocation gets,
//! the block's type afterwards, and the migratetype the page was allocated with (the model's
//! stand-in for page_owner, from which the census counts a block as mixed).

use crate::common;

use common::*;
use fraglab_mm::gfp::AllocFlags as AF;
use fraglab_mm::mmzone::order_to_pindex;
use fraglab_mm::{MigrateType, Mm};

use MigrateType::{Movable, Unmovable};

/// 32 pageblocks, one CPU (PCP batch 3), min_free_kbytes 128.
fn lab() -> Mm {
    dma32(32, 1, tun_kb(128))
}

/// Every page allocated; then the upper half of block 5 freed (one order-8 MOVABLE chunk) and
/// pages `p` freed onto CPU 0's MOVABLE order-0 PCP list (not drained). Returns the block's
/// first pfn.
fn half_free_block_with_pcp_pages(mm: &mut Mm, p: &[u32]) -> u32 {
    fill(mm, DMA32, 0);
    let b = block(5);
    free_range(mm, 0, b + 256, 256);
    assert_eq!(list(mm, DMA32, 8, Movable), vec![b + 256]);
    for &q in p {
        mm.free_pages(0, q, 0);
    }
    assert_eq!(
        pcp_list(mm, DMA32, 0, order_to_pindex(Movable, 0)),
        p.iter().rev().copied().collect::<Vec<_>>()
    );
    b
}

/// Whether the allocated page `pfn` makes its block mixed (as the census counts it).
/// (`fraglab_spec::result::pageblock::alloc_mixes`: a mergeable block, another type.)
fn mixes(mm: &Mm, pfn: u32) -> bool {
    let bmt = mm.block_mt(pfn);
    bmt.is_mergeable() && mm.pages.alloc_migratetype(pfn) != bmt as u32
}

#[test]
fn section_2_3_stale_pcp_page_handed_out_under_old_type() {
    // §2.1.2, §2.3, §6.3: PCP lists are per migratetype and `__rmqueue_pcplist` takes the list's
    // head without looking at the page's block. A page freed onto the MOVABLE list while its
    // block was MOVABLE stays there when an UNMOVABLE request claims the block (free 256 +
    // alike 256 ≥ 256: the PCP pages count as neither free nor movable), and the next MOVABLE
    // allocation gets it: a movable page in an UNMOVABLE block, with no extfrag event for it.
    let mut mm = lab();
    let b = half_free_block_with_pcp_pages(&mut mm, &[block(5) + 7, block(5) + 9]);
    let u = mm.rmqueue(0, DMA32, 0, AF(0), Unmovable).expect("claim");
    assert_eq!(mm.block_mt(b), Unmovable, "the claim retyped the block");
    assert!(u >= b + 256 && u < b + 512);
    let m = mm.rmqueue(0, DMA32, 0, AF(0), Movable).expect("pcp hit");
    assert_eq!(m, b + 9, "the MOVABLE list's head, a page of the claimed block");
    assert_eq!(mm.block_mt(m), Unmovable);
    assert_eq!(mm.pages.alloc_migratetype(m), Movable as u32);
    assert!(mixes(&mm, m));
    check(&mm);
}

#[test]
fn section_8_nofragment_leaves_the_block_and_its_pcp_pages_alone() {
    // §6.2, §6.3.1, §8: under ALLOC_NOFRAGMENT (defrag_mode = 1 keeps it to the end of the slow
    // path) a claim needs a whole free block (min_order 9) and stealing is off: the half-free
    // block is not claimed, the UNMOVABLE request fails here (the slow path would reclaim or
    // compact), and the PCP pages stay in a MOVABLE block, so the movable allocation that takes
    // one mixes nothing.
    let mut mm = lab();
    let b = half_free_block_with_pcp_pages(&mut mm, &[block(5) + 7, block(5) + 9]);
    assert_eq!(mm.rmqueue(0, DMA32, 0, AF(AF::NOFRAGMENT), Unmovable), None);
    assert_eq!(mm.block_mt(b), Movable, "the half-free block keeps its type");
    let m = mm
        .rmqueue(0, DMA32, 0, AF(AF::NOFRAGMENT), Movable)
        .expect("pcp hit");
    assert_eq!(m, b + 9);
    assert!(!mixes(&mm, m));
    check(&mm);
}

#[test]
fn section_6_3_claim_leaves_movable_pages_behind() {
    // §6.3.2c: an UNMOVABLE claim of a MOVABLE block needs free + (512 − free − movable) ≥ 256,
    // i.e. it ignores how many LRU pages the block holds once half of it is free: the LRU pages
    // stay in the now-UNMOVABLE block (mixed, change_ownership = 1, fallback_order < 9).
    let mut mm = lab();
    fill(&mut mm, DMA32, 0);
    let b = block(5);
    set_lru(&mut mm, b..b + 256);
    free_range(&mut mm, 0, b + 256, 256);
    let u = mm.rmqueue(0, DMA32, 0, AF(0), Unmovable).expect("claim");
    assert_eq!(u >> 9, b >> 9);
    assert_eq!(mm.block_mt(b), Unmovable);
    assert!(
        (b..b + 256).all(|p| mixes(&mm, p)),
        "every LRU page is now foreign to its block"
    );
    check(&mm);
}

#[test]
fn section_2_1_3_free_path_uses_the_block_type_at_free_time() {
    // §2.1.3 (`__free_frozen_pages` → `get_pfnblock_migratetype`): a page allocated UNMOVABLE
    // from an UNMOVABLE block that has since become MOVABLE is freed onto the MOVABLE list, and
    // the next MOVABLE allocation gets it: the PCP list follows the block, not the page's
    // allocation type, so this path re-homes pages rather than mixing blocks.
    let mut mm = lab();
    fill(&mut mm, DMA32, 0);
    let b = block(7);
    let p = b + 3;
    set_type(&mut mm, b, Unmovable);
    mm.free_pages(0, p, 0);
    assert_eq!(pcp_list(&mm, DMA32, 0, order_to_pindex(Unmovable, 0)), vec![p]);
    assert_eq!(mm.rmqueue(0, DMA32, 0, AF(0), Unmovable), Some(p));
    assert_eq!(mm.pages.alloc_migratetype(p), Unmovable as u32);
    // The block turns MOVABLE while p is in use (e.g. a movable claim of the block).
    mm.set_block_mt(b, Movable);
    mm.free_pages(0, p, 0);
    assert_eq!(pcp_list(&mm, DMA32, 0, order_to_pindex(Movable, 0)), vec![p]);
    assert!(pcp_list(&mm, DMA32, 0, order_to_pindex(Unmovable, 0)).is_empty());
    assert_eq!(mm.rmqueue(0, DMA32, 0, AF(0), Movable), Some(p));
    assert!(!mixes(&mm, p));
    check(&mm);
}
