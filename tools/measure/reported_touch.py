#!/usr/bin/env python3
"""Measures what a first write to memory the hypervisor discarded costs: free page reporting's
host faults (§32.3 item 6), the default of the cost model's `host_fault_ns`
(docs/costs.md).

Each run:
  1. waits until free page reporting has reported the free memory: with a `reported_kib`
     parameter, until it has not grown for --settle seconds (at least 2 reporting passes after a
     change, at most --wait seconds); without one, --wait seconds (an idle machine has all its
     free memory reported after about 16 passes of 2 s, ~30 s);
  2. `reported_touch thp MIB`: 2 MiB MADV_HUGEPAGE faults on that memory ("fresh"), each timed,
     then the same range dropped and faulted again at once ("refault": the THPs come back before
     a pass can report them, so the host backs them);
  3. waits again, then `reported_touch 4k MIB_4K`: the same with 4 KiB MADV_NOHUGEPAGE faults.

Per run it prints the phases' percentiles and medians, and two estimates of the cost of one
host fault of a 4 KiB page: (THP fresh p50 - THP refault p50) / 512, and 4 KiB fresh mean - 4 KiB
refault mean (a mean, because fresh 4 KiB faults mix pages the host discarded with pages it
still backs: per-CPU lists, memory freed since the last pass). Then the median of each figure
over the runs. It records page_reporting_order (sysfs and command line), reported_kib and its
delta per phase, nr_kdamonds, the THP setting and the load average.

Usage: python3 tools/measure/reported_touch.py [--runs N] [--mib N] [--mib-4k N] [--wait S]
       [--settle S]
Defaults: 3 runs, 512 MiB of THPs (256 faults), 256 MiB of 4 KiB pages (65,536 faults), wait at
most 90 s, settle 6 s. Needs gcc; not root (it reads sysfs and /proc only, and changes nothing
on the machine). Refuses to run without a reporting device (page_reporting_order reads -1 or
is absent) or with less than twice the largest mapping available (MemAvailable).
"""
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = "/tmp/fraglab-reported-touch"
PARAMS = "/sys/module/page_reporting/parameters"


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def reported_kib():
    v = read(f"{PARAMS}/reported_kib")
    return int(v) if v is not None and v.lstrip("-").isdigit() else None


def reporting_order():
    v = read(f"{PARAMS}/page_reporting_order")
    return int(v) if v is not None and v.lstrip("-").isdigit() else None


def cmdline_order():
    for w in (read("/proc/cmdline") or "").split():
        if w == "--":
            break
        if w.startswith("page_reporting.page_reporting_order="):
            return w.split("=", 1)[1]
    return None


def confounders():
    thp = read("/sys/kernel/mm/transparent_hugepage/enabled")
    return (
        f"page_reporting_order {reporting_order()} (command line {cmdline_order()}) "
        f"reported_kib {reported_kib()} "
        f"nr_kdamonds {read('/sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds') or '-'} "
        f"thp [{thp}] loadavg {read('/proc/loadavg')}"
    )


def mem_available_mib():
    for line in (read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    return 0


def wait_reported(max_s, settle_s):
    """Until reported_kib has not changed for settle_s (after a change), or max_s."""
    t0 = time.monotonic()
    last = reported_kib()
    if last is None:
        time.sleep(max_s)
        return f"waited {max_s} s (no reported_kib)"
    changed_at = t0
    while time.monotonic() - t0 < max_s:
        time.sleep(1)
        now = reported_kib()
        if now != last:
            last, changed_at = now, time.monotonic()
        elif time.monotonic() - changed_at >= settle_s and time.monotonic() - t0 >= settle_s:
            break
    return f"waited {time.monotonic() - t0:.0f} s, reported_kib {last}"


def run_phase(mode, mib):
    out = subprocess.run([BIN, mode, str(mib)], check=True, capture_output=True, text=True).stdout
    phases = {}
    for line in out.splitlines():
        print("   ", line)
        w = line.split()
        if "=" not in line or w[0] == "timer_overhead_ns":
            continue
        phases[w[0]] = {k: float(v) for k, v in (x.split("=") for x in w[1:] if "=" in x)}
    return phases


def main():
    args = sys.argv[1:]

    def opt(name, default):
        if name in args:
            i = args.index(name)
            v = args[i + 1]
            del args[i:i + 2]
            return type(default)(v)
        return default

    runs = opt("--runs", 3)
    mib = opt("--mib", 512)
    mib4k = opt("--mib-4k", 256)
    wait = opt("--wait", 90)
    settle = opt("--settle", 6)
    if args:
        sys.exit(f"unknown arguments {args}\n{__doc__}")
    order = reporting_order()
    if order is None or order < 0:
        sys.exit(f"no free page reporting device (page_reporting_order {order}): nothing to measure")
    avail = mem_available_mib()
    if avail < 2 * max(mib, mib4k):
        sys.exit(f"MemAvailable {avail} MiB is less than twice the mapping ({max(mib, mib4k)} MiB)")
    subprocess.run(["gcc", "-O2", "-Wall", "-o", BIN, f"{HERE}/reported_touch.c"], check=True)
    print("kernel", os.uname().release)
    print("start:", confounders())
    figures = {k: [] for k in ("thp_fresh_p50", "thp_refault_p50", "4k_fresh_p50", "4k_refault_p50",
                               "4k_fresh_mean", "4k_refault_mean", "host_fault_ns_thp", "host_fault_ns_4k")}
    try:
        for r in range(runs):
            print(f"run {r + 1}: {wait_reported(wait, settle)}; {confounders()}")
            thp = run_phase("thp", mib)
            print(f"run {r + 1}: {wait_reported(wait, settle)}; {confounders()}")
            small = run_phase("4k", mib4k)
            f = {
                "thp_fresh_p50": thp["thp_fresh"]["p50"],
                "thp_refault_p50": thp["thp_refault"]["p50"],
                "4k_fresh_p50": small["4k_fresh"]["p50"],
                "4k_refault_p50": small["4k_refault"]["p50"],
                "4k_fresh_mean": small["4k_fresh"]["mean"],
                "4k_refault_mean": small["4k_refault"]["mean"],
            }
            f["host_fault_ns_thp"] = (f["thp_fresh_p50"] - f["thp_refault_p50"]) / 512
            f["host_fault_ns_4k"] = f["4k_fresh_mean"] - f["4k_refault_mean"]
            print(f"run {r + 1}: " + ", ".join(f"{k} {v:.0f}" for k, v in f.items())
                  + f"; THPs fresh {thp['thp_fresh']['anon_huge_kib']:.0f} KiB"
                  + f", reported_kib_delta thp {thp['thp_fresh']['reported_kib_delta']:.0f}"
                  + f" 4k {small['4k_fresh']['reported_kib_delta']:.0f}")
            for k, v in f.items():
                figures[k].append(v)
    finally:
        try:
            os.unlink(BIN)
        except OSError:
            pass
    print("end:", confounders())
    print(f"median of {runs} runs: " + ", ".join(
        f"{k} {statistics.median(v):.0f}" for k, v in figures.items() if v))


if __name__ == "__main__":
    main()
