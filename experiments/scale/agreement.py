#!/usr/bin/env python3
"""Issue 35, item 3: the scale model's agreement table from the results agreement.sh wrote.

  python3 experiments/scale/agreement.py OUT [--markdown]

Per-GiB work counters (each result's vmstat_delta over the memory it ran with: the exact run's
over its full memory, a scale model's raw counters over its scaled memory, which is the same as
its scale.vmstat_delta_scaled_up over the full memory), the THP fault success rate, and free
memory at the end by order (pages in free chunks of each order per GiB, from proc_end's
buddyinfo). Each K column gives the value and its ratio to the exact run's.
"""
import json
import os
import sys

COUNTERS = [
    ("pgalloc (all zones)", lambda d: sum(v for k, v in d.items() if k.startswith("pgalloc_"))),
    ("pgalloc without THP faults (- 512 x thp_fault_alloc)",
     lambda d: sum(v for k, v in d.items() if k.startswith("pgalloc_")) - 512 * d["thp_fault_alloc"]),
    ("pgfree", lambda d: d["pgfree"]),
    ("pgscan_kswapd", lambda d: d["pgscan_kswapd"]),
    ("pgscan_direct", lambda d: d["pgscan_direct"]),
    ("pgsteal_kswapd", lambda d: d["pgsteal_kswapd"]),
    ("pgsteal_direct", lambda d: d["pgsteal_direct"]),
    ("allocstall (all zones)", lambda d: sum(v for k, v in d.items() if k.startswith("allocstall_"))),
    ("pswpout", lambda d: d["pswpout"]),
    ("workingset_refault_file", lambda d: d["workingset_refault_file"]),
    ("compact_stall", lambda d: d["compact_stall"]),
    ("compact_success", lambda d: d["compact_success"]),
    ("compact_fail", lambda d: d["compact_fail"]),
    ("compact_migrate_scanned", lambda d: d["compact_migrate_scanned"]),
    ("compact_free_scanned", lambda d: d["compact_free_scanned"]),
    ("compact_daemon_wake", lambda d: d["compact_daemon_wake"]),
    ("compact_daemon_migrate_scanned", lambda d: d["compact_daemon_migrate_scanned"]),
    ("thp_fault_alloc", lambda d: d["thp_fault_alloc"]),
    ("thp_fault_fallback", lambda d: d["thp_fault_fallback"]),
    ("nr_free_pages (delta)", lambda d: d.get("nr_free_pages", 0)),
]


def buddy_by_order(text):
    orders = [0] * 11
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0] != "Node":
            continue
        counts = [int(x) for x in parts[4:]]
        for o, n in enumerate(counts):
            orders[o] += n << o  # pages in free chunks of order o
    return orders


def fmt(v):
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 0.1:
        return f"{v:.2f}"
    return f"{v:.4f}"


def main():
    out = sys.argv[1]
    names = sorted(
        (f[:-5] for f in os.listdir(out) if f.endswith(".json") and f[:-5].startswith("k")),
        key=lambda n: int(n[1:]),
    )
    results = {n: json.load(open(os.path.join(out, n + ".json"))) for n in ["exact"] + names}
    full_bytes = next(r["scale"]["full_memory_bytes"] for n, r in results.items() if n != "exact")
    mem = {n: (r["scale"]["memory_bytes"] if r.get("scale") else full_bytes) for n, r in results.items()}
    gib = {n: m / (1 << 30) for n, m in mem.items()}
    cols = ["exact"] + names
    head = ["per GiB", "exact"] + [f"1/{n[1:]} (x exact)" for n in names]
    rows = []

    def row(label, vals):
        ex = vals["exact"]
        cells = [label, fmt(ex)]
        for n in names:
            v = vals[n]
            ratio = (f"{v / ex:.2f}" if ex else ("=" if v == 0 else "inf"))
            cells.append(f"{fmt(v)} ({ratio})")
        rows.append(cells)

    for label, f in COUNTERS:
        row(label, {n: f(results[n]["vmstat_delta"]) / gib[n] for n in cols})
    def thp_rate(d):
        a, b = d["thp_fault_alloc"], d["thp_fault_fallback"]
        return 100.0 * a / (a + b) if a + b else 0.0
    rates = {n: thp_rate(results[n]["vmstat_delta"]) for n in cols}
    rows.append(["THP fault success %", fmt(rates["exact"])] + [f"{fmt(rates[n])} ({rates[n] - rates['exact']:+.1f} pp)" for n in names])
    if all(results[n].get("pgbench") for n in cols):
        row("pgbench transactions per s", {n: results[n]["pgbench"]["mean_tps"] / gib[n] for n in cols})
    if all(results[n].get("bursts") for n in cols):
        row("THP bursts started", {n: len(results[n]["bursts"]) * 1.0 for n in cols})
        row("THP burst faults (2 MiB steps) done", {n: sum(b["faults"] for b in results[n]["bursts"]) / gib[n] for n in cols})
    buddy = {n: buddy_by_order(results[n]["proc_end"]["buddyinfo"]) for n in cols}
    for o in range(11):
        row(f"free pages in order-{o} chunks at end", {n: buddy[n][o] / gib[n] for n in cols})
    row("free pages at end (all orders)", {n: sum(buddy[n]) / gib[n] for n in cols})
    sim = {n: results[n]["duration_ns"] / 1e9 for n in cols}
    print(f"simulated: {', '.join(f'{n} {sim[n]:.1f} s' for n in cols)}; memory: " + ", ".join(f"{n} {gib[n]:g} GiB" for n in cols))
    print("| " + " | ".join(head) + " |")
    print("|---|" + "---:|" * (len(head) - 1))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    tsv = os.path.join(out, "runs.tsv")
    if os.path.exists(tsv):
        print()
        print("| run | CPU user s | CPU sys s | wall s | peak RSS MiB | load avg before | load avg after |")
        print("|---|---:|---:|---:|---:|---|---|")
        for line in open(tsv).read().splitlines()[1:]:
            f = line.split("\t")
            print(f"| {f[0]} | {f[1]} | {f[2]} | {f[3]} | {int(f[4]) // 1024:,} | {f[5]} | {f[6]} |")


if __name__ == "__main__":
    main()
