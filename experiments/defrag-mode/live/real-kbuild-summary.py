#!/usr/bin/env python3
"""Seed 001's rows for the real kernel build (real-kbuild.sh) beside fraglab's run of the same
experiment (../real-kbuild.toml), per build as the seed counts them: mean +- standard deviation
over the complete builds of each configuration, the change of defrag_mode=1 against vanilla
with Welch's t, and the seed's change (+ 5/5, the series). Usage, from the repository root:

    python3 experiments/defrag-mode/live/real-kbuild-summary.py LIVE_DIR[,LIVE_DIR...] [SIM_DIR]

Each LIVE_DIR holds real-kbuild.sh's output for CONFIG vanilla and dm1 (one series of each;
the builds of several directories are pooled); SIM_DIR the result files of
`fraglab compare vanilla=... wmark=... --results-dir SIM_DIR` (the command is in the README).
`--sim-runs N` pools the builds of fraglab's runs 1..N. `--skip N` leaves out each series' (and
each fraglab run's) first N builds (the first build of a series starts with
memory the run before left)."""
import argparse
import json
import statistics

from livestats import counter as get, welch_t

ap = argparse.ArgumentParser()
ap.add_argument("live_dir")
ap.add_argument("sim_dir", nargs="?")
ap.add_argument("--skip", type=int, default=0)
ap.add_argument("--sim-runs", type=int, default=1,
                help="pool the builds of SIM_DIR's runs 1..N (fraglab compare --runs N)")
args = ap.parse_args()

# (row, vmstat key or function of a build, the seed's change with + 5/5 in per cent)
SEED = {
    "Hugealloc Time mean": -45.19, "Hugealloc Time stddev": -40.81, "Kbuild Real time": -0.44,
    "THP fault alloc": 35.30, "THP fault fallback": -75.29, "Direct compact fail": -69.48,
    "Direct compact success": -57.46, "Compact daemon scanned migrate": -32.71,
    "Compact daemon scanned free": -53.90, "Alloc stall": -73.02, "Pages kswapd scanned": 85.21,
    "File refaults": 36.35,
}
COUNTERS = [("THP fault alloc", "thp_fault_alloc"), ("THP fault fallback", "thp_fault_fallback"),
            ("Direct compact stall", "compact_stall"), ("Direct compact fail", "compact_fail"),
            ("Direct compact success", "compact_success"),
            ("Compact daemon scanned migrate", "compact_daemon_migrate_scanned"),
            ("Compact daemon scanned free", "compact_daemon_free_scanned"),
            ("Kcompactd wake", "compact_daemon_wake"), ("Alloc stall", "allocstall_*"),
            ("Pages kswapd scanned", "pgscan_kswapd"), ("Pages direct scanned", "pgscan_direct"),
            ("File refaults", "workingset_refault_file")]


def vmstat(path):
    with open(path) as f:
        return {k: int(v) for k, v in (line.split() for line in f)}


def live_builds(c):
    """Per complete build of every LIVE_DIR: its vmstat delta, real time (s) and its bursts'
    alloc times (us)."""
    out = []
    for d in args.live_dir.split(","):
        out += live_series(d, c)
    return out


def live_series(d, c):
    """The complete builds of one series, less the first --skip."""
    with open(f"{d}/{c}.json") as f:
        run = json.load(f)
    with open(f"{d}/{c}-launch.txt") as f:
        t0 = float(f.read())
    out = []
    with open(f"{d}/{c}-builds.txt") as f:
        for line in f:
            k, s, _, e, complete = line.split()
            if complete != "1":
                continue
            a, b = vmstat(f"{d}/{c}-build{k}.vmstat0"), vmstat(f"{d}/{c}-build{k}.vmstat1")
            delta = {x: b[x] - a.get(x, 0) for x in b}
            lo, hi = (float(s) - t0) * 1e9, (float(e) - t0) * 1e9
            bursts = [x["alloc_ns"] / 1000 for x in run["bursts"] if lo <= x["start_ns"] < hi]
            out.append((delta, float(e) - float(s), bursts))
    return out[args.skip:]


def sim_builds(name):
    """The builds of runs 1..--sim-runs, less each run's first --skip."""
    out = []
    for i in range(1, args.sim_runs + 1):
        with open(f"{args.sim_dir}/{name}-run{i}.json") as f:
            run = json.load(f)
        builds = []
        for b in run["builds"]:
            lo, hi = b["start_ns"], b["end_ns"]
            bursts = [x["alloc_ns"] / 1000 for x in run["bursts"] if lo <= x["start_ns"] < hi]
            builds.append((b["vmstat_delta"], (hi - lo) / 1e9, bursts))
        out += builds[args.skip:]
    return out


def rows(builds):
    """Row name -> per-build values."""
    r = {
        "Hugealloc Time mean": [statistics.mean(x[2]) if x[2] else 0.0 for x in builds],
        "Hugealloc Time stddev": [statistics.stdev(x[2]) if len(x[2]) > 1 else 0.0 for x in builds],
        "Kbuild Real time": [x[1] for x in builds],
    }
    for name, key in COUNTERS:
        r[name] = [get(x[0], key) for x in builds]
    r["Direct compact success rate %"] = [
        100 * get(x[0], "compact_success") / (get(x[0], "compact_success") + get(x[0], "compact_fail"))
        if get(x[0], "compact_success") + get(x[0], "compact_fail") else 0.0 for x in builds]
    return r


def cell(xs):
    return f"{statistics.mean(xs):,.1f} ± {statistics.stdev(xs) if len(xs) > 1 else 0:,.1f}"


def change(a, b):
    ma, mb = statistics.mean(a), statistics.mean(b)
    return f"{(mb - ma) / ma * 100:+.1f}% ({welch_t(a, b):+.1f})" if ma else "n/a"


lv, ld = rows(live_builds("vanilla")), rows(live_builds("dm1"))
sv = sd = None
if args.sim_dir:
    sv, sd = rows(sim_builds("vanilla")), rows(sim_builds("wmark"))
n_v, n_d = len(lv["THP fault alloc"]), len(ld["THP fault alloc"])
head = f"| row | seed + 5/5 | kernel vanilla (n={n_v}) | kernel defrag_mode=1 (n={n_d}) | change (t) |"
if sv:
    head += f" fraglab vanilla (n={len(sv['THP fault alloc'])}) | fraglab defrag_mode=1 | change (t) |"
print(head)
print("|---|---:|---:|---:|---:|" + ("---:|---:|---:|" if sv else ""))
for name in lv:
    seed = f"{SEED[name]:+.2f}%" if name in SEED else ""
    line = f"| {name} | {seed} | {cell(lv[name])} | {cell(ld[name])} | {change(lv[name], ld[name])} |"
    if sv:
        line += f" {cell(sv[name])} | {cell(sd[name])} | {change(sv[name], sd[name])} |"
    print(line)
print()
print("Per-build THP fault alloc:")
for label, r in [("kernel vanilla", lv), ("kernel defrag_mode=1", ld)] + (
        [("fraglab vanilla", sv), ("fraglab defrag_mode=1", sd)] if sv else []):
    print(f"  {label:22} " + " ".join(f"{v:6d}" for v in r["THP fault alloc"]))
