#!/usr/bin/env python3
"""Live against simulated: the rows of the README's live checks (the 8 GiB thpchallenge-fio
and buildlike ones), as mean +- standard deviation over the live runs of each configuration
with Welch's t of the change, beside the simulator's figures for the same spec and overrides
(and, when the runs have bursts, the Hugealloc time and the bursts' THP share). Usage, from the repository root:

    python3 experiments/defrag-mode/live/summary.py LIVE_DIR SIM_DIR

LIVE_DIR holds run-pairs.sh's vanilla-K.json and dm1-K.json; SIM_DIR the result files of
`fraglab compare vanilla=... wmark=... --results-dir SIM_DIR` (vanilla-run1.json,
wmark-run1.json; the command is in the README)."""
import glob
import json
import statistics
import sys

from livestats import counter, welch_t

live_dir, sim_dir = sys.argv[1], sys.argv[2]
ROWS = [("THP fault alloc", "thp_fault_alloc"), ("THP fault fallback", "thp_fault_fallback"),
        ("Direct compact stall", "compact_stall"), ("Direct compact fail", "compact_fail"),
        ("Direct compact success", "compact_success"), ("Alloc stall", "allocstall_*"),
        ("Pages kswapd scanned", "pgscan_kswapd"), ("Pages direct scanned", "pgscan_direct"),
        ("Kcompactd wake", "compact_daemon_wake"),
        ("Compact daemon scanned migrate", "compact_daemon_migrate_scanned"),
        ("Pages allocated", "pgalloc_*")]


def value(r, key):
    return counter(r["vmstat_delta"], key)


def free_in(r, mt):
    """Mean MiB free in pageblocks of migratetype index mt over the samples after 20 s."""
    s = [x["free_by_type"][mt] * 4 / 1024 for x in r["samples"] if x["t_ns"] >= 20e9]
    return statistics.mean(s) if s else 0.0


def burst_us(r):
    """Mean allocation time of a burst (Hugealloc Time), in microseconds."""
    b = [x["alloc_ns"] / 1000 for x in r.get("bursts", [])]
    return statistics.mean(b) if b else 0.0


def burst_huge_pct(r):
    """Per cent of the bursts' 2 MiB steps that got a THP."""
    b = r.get("bursts", [])
    faults = sum(x["faults"] for x in b)
    return 100.0 * sum(x["huge"] for x in b) / faults if faults else 0.0


def load(pattern):
    return [json.load(open(f)) for f in sorted(glob.glob(pattern))]


live = {c: load(f"{live_dir}/{c}-*.json") for c in ["vanilla", "dm1"]}
sim = {c: json.load(open(f"{sim_dir}/{c}-run1.json")) for c in ["vanilla", "wmark"]}
if not live["vanilla"] or not live["dm1"]:
    sys.exit(f"no vanilla-K.json / dm1-K.json in {live_dir}")


def ms(xs):
    m = statistics.mean(xs)
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return m, sd


def change(a, b):
    return f"{(b - a) / a * 100:+.0f}%" if a else "n/a"


print(f"| row | kernel vanilla (n={len(live['vanilla'])}) | kernel defrag_mode=1 (n={len(live['dm1'])}) "
      "| change (Welch's t) | fraglab vanilla | fraglab defrag_mode=1 | change |")
print("|---|---:|---:|---:|---:|---:|---:|")
extra = [("Free in movable blocks, MiB", 1), ("Free in reclaimable blocks, MiB", 2)]
if any(r.get("bursts") for r in live["vanilla"]):
    extra += [("Hugealloc Time mean, us per burst", burst_us), ("Burst steps getting a THP, %", burst_huge_pct)]
for name, key in ROWS + extra:
    if callable(key):
        f = key
    elif isinstance(key, int):
        f = lambda r: free_in(r, key)
    else:
        f = lambda r: value(r, key)
    a, b = [f(r) for r in live["vanilla"]], [f(r) for r in live["dm1"]]
    lv, ld = ms(a), ms(b)
    sv, sd = f(sim["vanilla"]), f(sim["wmark"])
    print(f"| {name} | {lv[0]:,.0f} ± {lv[1]:,.0f} | {ld[0]:,.0f} ± {ld[1]:,.0f} "
          f"| {change(lv[0], ld[0])} ({welch_t(a, b):+.1f}) | {sv:,.0f} | {sd:,.0f} | {change(sv, sd)} |")
