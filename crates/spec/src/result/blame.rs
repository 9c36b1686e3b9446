//! The ranked tables of a result's `blame` section (issue 37, docs/blame.md), shared by
//! `fraglab blame` and the replay's text report.

use super::BlameSource;

/// The kinds in column order (the result's names, as the model counts them).
pub const KINDS: [&str; 6] = fraglab_types::blame::BLAME_KIND_NAMES;

/// The ranking: mixed blocks caused, then blocks compaction could not empty, then the THP
/// faults that failed on its pages, then the events (steals first), then the name (a stable
/// order for ties).
pub fn ranked(sources: &[BlameSource]) -> Vec<&BlameSource> {
    let ev = |s: &BlameSource, k: &str| s.events.get(k).copied().unwrap_or(0);
    let mut v: Vec<&BlameSource> = sources.iter().collect();
    v.sort_by(|a, b| {
        b.mixed_blocks
            .cmp(&a.mixed_blocks)
            .then(b.compact_blocked_blocks.cmp(&a.compact_blocked_blocks))
            .then(b.thp_fault_fail.cmp(&a.thp_fault_fail))
            .then_with(|| {
                let key = |s: &BlameSource| KINDS.map(|k| ev(s, k));
                key(b).cmp(&key(a))
            })
            .then(a.source.cmp(&b.source))
    });
    v
}

fn ev(s: &BlameSource, k: &str) -> u64 {
    s.events.get(k).copied().unwrap_or(0)
}

pub fn csv(v: &[&BlameSource]) -> String {
    let mut out = format!(
        "rank,source,mixed_blocks,compact_blocked_blocks,{},thp_fault_fail\n",
        KINDS.join(",")
    );
    for (i, s) in v.iter().enumerate() {
        let name = if s.source.contains([',', '"']) {
            format!("\"{}\"", s.source.replace('"', "\"\""))
        } else {
            s.source.clone()
        };
        out += &format!("{},{name},{},{}", i + 1, s.mixed_blocks, s.compact_blocked_blocks);
        for k in KINDS {
            out += &format!(",{}", ev(s, k));
        }
        out += &format!(",{}\n", s.thp_fault_fail);
    }
    out
}

pub fn table(v: &[&BlameSource]) -> String {
    let w = v.iter().map(|s| s.source.len()).max().unwrap_or(6).max(6);
    let heads = [
        "mixed", "cblk", "thp_fail", "steal", "claim_p", "claim_w", "nofb", "pc_unmov", "c_fail",
    ];
    let mut out = format!("{:>4}  {:<w$}", "rank", "source");
    for h in heads {
        out += &format!(" {h:>9}");
    }
    out.push('\n');
    for (i, s) in v.iter().enumerate() {
        out += &format!("{:>4}  {:<w$}", i + 1, s.source);
        out += &format!(
            " {:>9} {:>9} {:>9}",
            s.mixed_blocks, s.compact_blocked_blocks, s.thp_fault_fail
        );
        for k in KINDS {
            out += &format!(" {:>9}", ev(s, k));
        }
        out.push('\n');
    }
    out += "\nmixed: distinct pageblocks its events made mixed; cblk: distinct pageblocks compaction\n\
could not empty because of its pages; thp_fail: PMD THP faults that failed after their\n\
compaction met its pages in such a block; steal, claim_p(artial), claim_w(hole): fallbacks (§6.3-§6.5);\n\
nofb: placed in a block of another type without a fallback; pc_unmov: block-device page cache\n\
in a non-Movable block (§33); c_fail: migrate-scanner failures on its pages (§9, §25).\n";
    out
}
