#!/usr/bin/env python3
"""TPS over time around checkpoints, from `fraglab compare ... --results-dir DIR`.

For every configuration (files LABEL-runN.json in DIR, in the order of their first appearance
sorted by label as compare wrote them) it averages, over all checkpoints of all runs, the
transactions per second at each second from BEFORE seconds before a checkpoint starts to AFTER
seconds after, and prints a markdown table (rows: seconds from the checkpoint's start; columns:
configurations). Usage:

    python3 experiments/costly-pagecache/tps_around_checkpoints.py DIR [BEFORE AFTER STEP]
"""
import json
import os
import re
import sys

d = sys.argv[1]
before, after, step = (int(x) for x in (sys.argv[2:5] if len(sys.argv) >= 5 else (5, 25, 1)))
configs = {}
for f in sorted(os.listdir(d)):
    m = re.fullmatch(r"(.+)-run(\d+)\.json", f)
    if m:
        configs.setdefault(m.group(1), []).append((int(m.group(2)), os.path.join(d, f)))
if not configs:
    sys.exit(f"{d}: no LABEL-runN.json files")
order = sorted(configs, key=lambda c: (c != "baseline" and c != "base", c))
table = {}
for c in order:
    sums, counts = {}, {}
    for _, path in sorted(configs[c]):
        p = json.load(open(path)).get("pgbench")
        if not p:
            sys.exit(f"{path}: no pgbench result")
        tps, ck = p["tps"], set(p.get("checkpoint_secs", []))
        starts = [s for s in sorted(ck) if s - 1 not in ck]
        for s in starts:
            for off in range(-before, after + 1):
                t = s + off
                if 0 <= t < len(tps):
                    sums[off] = sums.get(off, 0) + tps[t]
                    counts[off] = counts.get(off, 0) + 1
    table[c] = {o: sums[o] / counts[o] for o in sums}
print("| s from checkpoint start | " + " | ".join(order) + " |")
print("|---:|" + "---:|" * len(order))
for off in range(-before, after + 1, step):
    cells = [f"{table[c][off]:,.0f}" if off in table[c] else "" for c in order]
    print(f"| {off:+d} | " + " | ".join(cells) + " |")
