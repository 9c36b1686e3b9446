//! The built-in example shows, in the /proc files it prints, the claim rule, the steal rule and
//! full merging (issue "physical memory model", Done when).

use fraglab_sim::run_ops;
use fraglab_spec::parse_spec;

const EXAMPLE: &str = include_str!("../../../../examples/claim-steal-merge.toml");

/// The text printed by op `i` (up to the next op's log line).
fn section(out: &str, i: usize) -> &str {
    let start = out.find(&format!("# op[{i}] ")).expect("op log line");
    let rest = &out[start..];
    let body = &rest[rest.find('\n').unwrap() + 1..];
    &body[..body.find("# op[").unwrap_or(body.len())]
}

/// Number of blocks per type of a zone from a pagetypeinfo text.
fn blocks(pagetypeinfo: &str, zone: &str) -> Vec<u64> {
    let tail = &pagetypeinfo[pagetypeinfo.find("Number of blocks type").unwrap()..];
    let line = tail
        .lines()
        .find(|l| l.trim_end().starts_with(&format!("Node 0, zone {zone:>8}")))
        .unwrap();
    line.split_whitespace()
        .skip(4)
        .map(|v| v.parse().unwrap())
        .collect()
}

/// Free-chunk counts per order of one (zone, type) row.
fn free_row(pagetypeinfo: &str, zone: &str, mt: &str) -> Vec<u64> {
    let prefix = format!("Node    0, zone {zone:>8}, type {mt:>12} ");
    let line = pagetypeinfo.lines().find(|l| l.starts_with(&prefix)).unwrap();
    line[prefix.len()..]
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect()
}

#[test]
fn example_shows_claim_steal_and_merge() {
    let spec = parse_spec(EXAMPLE, "claim-steal-merge.toml").unwrap();
    let out = run_ops(&spec).unwrap();

    // Fresh boot: every block of Normal is MOVABLE.
    assert_eq!(blocks(section(&out, 0), "Normal"), vec![0, 640, 0, 0, 0]);

    // Claim: 100000 UNMOVABLE pages converted whole free blocks, two per order-10 chunk
    // (change_pageblock_range), and nothing was polluted.
    let after_slab = section(&out, 3);
    let b = blocks(after_slab, "Normal");
    assert!(
        b[0] >= 196 && b[0].is_multiple_of(2),
        "unmovable blocks after the claim: {b:?}"
    );
    assert_eq!(b[0] + b[1], 640);
    let summary = section(&out, 2);
    assert!(
        summary.contains("fallback claimer Unmovable-from-Movable: "),
        "{summary}"
    );
    assert!(!summary.contains("pollute"), "{summary}");

    // Steal: Movable requests took order-0 chunks out of UNMOVABLE blocks, which kept their type.
    let summary = section(&out, 8);
    let pollute: u64 = summary
        .lines()
        .find_map(|l| l.strip_prefix("fallback pollute Movable-from-Unmovable: "))
        .expect("steals happened")
        .parse()
        .unwrap();
    assert!(pollute > 10_000, "{summary}");
    let after_user = section(&out, 9);
    let unmovable_free = free_row(after_user, "Normal", "Unmovable");
    assert!(
        unmovable_free[0] < 50_000 - 10_000,
        "order-0 unmovable holes were stolen: {unmovable_free:?}"
    );
    assert!(
        blocks(after_user, "Normal")[0] >= 190,
        "polluted blocks keep their type"
    );
    assert!(
        section(&out, 10).contains('!'),
        "the block map shows mixed blocks"
    );

    // Merge: after freeing everything, Normal is 320 order-10 chunks again.
    let buddy = section(&out, 14);
    let normal = buddy.lines().find(|l| l.contains("Normal")).unwrap();
    let counts: Vec<u64> = normal
        .split_whitespace()
        .skip(4)
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(counts, vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 320]);
}

#[test]
fn runs_are_deterministic() {
    let spec = parse_spec(EXAMPLE, "claim-steal-merge.toml").unwrap();
    assert_eq!(run_ops(&spec).unwrap(), run_ops(&spec).unwrap());
}
