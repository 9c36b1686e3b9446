#!/usr/bin/env python3
"""Measures the mm cost-model constants on the live kernel (docs/costs.md, "measured here").

This kernel has no function_graph tracer and no kprobes, so function times come from sampling:
`perf record -g -e cpu-clock/period=200000/` of the measuring task only (one sample per 200 us of
its CPU time, with the kernel call chain; at 20 us the sampling interrupts slowed the VM's faults
10-fold). The time of function F = 200 us x the number of samples
whose call chain contains F (inclusive). Samples inside perf's own tracepoint code (perf_* or
*trace_event* in the chain) are measurement overhead and are dropped. The work done (pages
allocated, isolated, migrated, scanned, reclaimed, drained) is counted with tracepoints recorded
in the same perf session without call chains, or is known from the workload.

  faults   mm_costs faults 256 8: 8 rounds of 65,536 4 KiB faults (MADV_NOHUGEPAGE), each timed,
           then freed with one MADV_DONTNEED; 128 THP faults (MADV_HUGEPAGE), freed and faulted again at once.
           alloc_fast = time in __alloc_frozen_pages_noprof under do_anonymous_page, zeroing
           (clear_page_*) excluded, per 4 KiB fault; zero = clear_page_* under do_anonymous_page
           per fault; free = free_unref_folios under the MADV_DONTNEED per page;
           pcp bulk free = free_pcppages_bulk per kmem:mm_page_pcpu_drain event.
  compact  mm_costs frag 512 N K (free K of every N pages of 512 MiB) then compact_memory:
           time in isolate_migratepages_block (migration scanner incl. isolation), migrate_pages
           (compaction_alloc excluded), compaction_alloc (free scanner + free-page isolation) against the sums of nr_scanned / nr_taken /
           nr_migrated of the compaction tracepoints. Two patterns give the two unknowns of
           T_migscan = a x scanned + b x taken.
  reclaim  a cgroup-v1 memory group (fraglab-costs-helper) limited to LIMIT reads a file of 3 x
           LIMIT: seq (1 MiB reads, large folios) and rand4k (order-0 folios, no readahead).
           Per page reclaimed (vmscan:mm_vmscan_lru_shrink_inactive nr_reclaimed): wall time of
           memcg reclaim (mm_vmscan_memcg_reclaim_begin/end) and CPU time in
           try_to_free_mem_cgroup_pages, isolate_lru_folios (scan), shrink_folio_list.
  drain    echo 1 > hugepages-1048576kB/nr_hugepages (alloc_contig_range calls drain_all_pages;
           compact_memory does not drain), then back to the old value, with
           kmem:mm_page_pcpu_drain on in a private tracefs instance: the bursts of events of the
           writing task are the per-CPU drains (pages, duration).
  wio      mm_costs wio FILE 500: O_DIRECT 4 KiB pwrite (+fdatasync) latencies, buffered write
           throughput.

Usage (root): python3 tools/measure/mm_costs.py [PHASE ...] [--runs N]   (default: all phases, 3 runs)
Needs perf and gcc. Restores what it changes: nr_hugepages back to its old value, the cgroup and
the data files removed. Anonymous memory used: at most 512 MiB at a time.
"""
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = "/tmp/fraglab-mm-costs"
BIN = f"{WORK}/mm_costs"
PERIOD_NS = 200000
CG = "/sys/fs/cgroup/memory/fraglab-costs-helper"
HUGE1G = "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def perf_run(tag, cmd, tracepoints=(), tp_callgraph=()):
    """Runs cmd under perf record; returns (stdout of cmd, list of samples).

    A sample is (event, time_s, tid, trace_text, [symbols of the chain, leaf first])."""
    data = f"{WORK}/{tag}.data"
    ev = ["-e", f"cpu-clock/period={PERIOD_NS}/"]
    for t in tracepoints:
        ev += ["-e", f"{t}/call-graph=no/"]
    for t in tp_callgraph:
        ev += ["-e", t]
    p = subprocess.run(["perf", "record", "-q", "-o", data, "-g"] + ev + ["--"] + cmd,
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd}: {p.stderr}")
    out = subprocess.run(["perf", "script", "-i", data, "-F", "tid,time,event,trace,ip,sym"],
                         capture_output=True, text=True).stdout
    os.unlink(data)
    samples, cur = [], None
    head = re.compile(r"^\s*(\d+)\s+([\d.]+):\s+(\S+):\s?(.*)$")
    for line in out.splitlines():
        m = head.match(line)
        if m:
            if cur:
                samples.append(cur)
            trace = m.group(4)
            # perf prints the ip and symbol after the trace text when there is no chain
            cur = (m.group(3), float(m.group(2)), int(m.group(1)), trace, [])
        elif cur and line.startswith("\t"):
            f = line.split()
            if len(f) >= 2:
                cur[4].append(f[1])
    if cur:
        samples.append(cur)
    return p.stdout, samples


def is_overhead(chain):
    return any(s.startswith("perf_") or "trace_event" in s or s.startswith("__perf") for s in chain)


def clock_samples(samples):
    return [s[4] for s in samples if s[0].startswith("cpu-clock") and not is_overhead(s[4])]


def t_ns(chains, need, exclude=()):
    """Inclusive time (ns) of the samples whose chain has every name in need and none of exclude.

    A name ending in '*' matches as a prefix."""
    def has(chain, name):
        if name.endswith("*"):
            return any(c.startswith(name[:-1]) for c in chain)
        return any(c == name or c.startswith(name + ".") for c in chain)
    n = sum(1 for c in chains if all(has(c, x) for x in need) and not any(has(c, x) for x in exclude))
    return n * PERIOD_NS


def field(trace, name):
    m = re.search(rf"\b{name}=(\d+)", trace)
    return int(m.group(1)) if m else 0


def tp(samples, name):
    return [s for s in samples if s[0].endswith(name)]


def faults(runs):
    rows = []
    for r in range(runs):
        out, smp = perf_run(f"faults{r}", [BIN, "faults", "256", "8"], ["kmem:mm_page_pcpu_drain"])
        ch = clock_samples(smp)
        n = 65536 * 8
        kv = {}
        for line in out.splitlines():
            w = line.split()
            if w[0] in ("fault4k", "fault2m", "fault2m_again"):
                kv[w[0]] = int(w[3].split("=")[1])  # p50
            if w[0] == "dontneed4k_ns_per_page":
                kv["dontneed4k"] = float(w[1])
        alloc = t_ns(ch, ["do_anonymous_page", "__alloc_frozen_pages_noprof"], ["clear_page*"]) / n
        gpff = t_ns(ch, ["do_anonymous_page", "get_page_from_freelist"], ["clear_page*"]) / n
        zero = t_ns(ch, ["do_anonymous_page", "clear_page*"]) / n
        charge = t_ns(ch, ["do_anonymous_page", "__mem_cgroup_charge"]) / n
        free = t_ns(ch, ["unmap_page_range", "free_unref_folios"]) / n
        putrefs = t_ns(ch, ["unmap_page_range", "folios_put_refs"]) / n
        drains = len(tp(smp, "mm_page_pcpu_drain"))
        bulk = t_ns(ch, ["free_pcppages_bulk"])
        thp_zero = t_ns(ch, ["do_huge_pmd_anonymous_page", "clear_page*"]) / (2 * 128 * 512)
        row = dict(fault4k_p50=kv.get("fault4k"), alloc_fast=alloc, get_page_from_freelist=gpff,
                   zero4k=zero, memcg_charge=charge, free_unref_folios=free, folios_put_refs=putrefs,
                   dontneed4k=kv.get("dontneed4k"), bulk_per_page=bulk / drains if drains else None,
                   pcpu_drain_events=drains, thp_p50_reported=kv.get("fault2m"),
                   thp_p50_again=kv.get("fault2m_again"), thp_zero_per_page_both_passes=thp_zero)
        print("faults run", r, {k: (round(v) if isinstance(v, float) else v) for k, v in row.items()})
        print(out, end="")
        rows.append(row)
    return rows


def compact(runs, patterns=((2, 1), (8, 7))):
    rows = []
    for r in range(runs):
        for every, k in patterns:
            out, smp = perf_run(f"compact{r}", [BIN, "frag", "512", str(every), str(k)],
                                ["compaction:mm_compaction_isolate_migratepages",
                                 "compaction:mm_compaction_isolate_freepages",
                                 "compaction:mm_compaction_fast_isolate_freepages",
                                 "compaction:mm_compaction_migratepages",
                                 "compaction:mm_compaction_begin"])
            ch = clock_samples(smp)
            im = tp(smp, "mm_compaction_isolate_migratepages")
            isf = tp(smp, "mm_compaction_isolate_freepages") + tp(smp, "mm_compaction_fast_isolate_freepages")
            mg = tp(smp, "mm_compaction_migratepages")
            row = dict(pattern=f"{k}/{every}",
                       mscanned=sum(field(s[3], "nr_scanned") for s in im),
                       mtaken=sum(field(s[3], "nr_taken") for s in im),
                       fscanned=sum(field(s[3], "nr_scanned") for s in isf),
                       ftaken=sum(field(s[3], "nr_taken") for s in isf),
                       migrated=sum(field(s[3], "nr_migrated") for s in mg),
                       failed=sum(field(s[3], "nr_failed") for s in mg),
                       runs=len(tp(smp, "mm_compaction_begin")),
                       T_compact=t_ns(ch, ["sysctl_compaction_handler"]),
                       T_migscan=t_ns(ch, ["sysctl_compaction_handler", "isolate_migratepages_block"]),
                       T_migrate=t_ns(ch, ["sysctl_compaction_handler", "migrate_pages"],
                                      ["compaction_alloc"]),
                       T_freescan=t_ns(ch, ["sysctl_compaction_handler", "compaction_alloc"]),
                       T_drain=t_ns(ch, ["sysctl_compaction_handler", "__drain_all_pages*"]),
                       wall=int(out.split()[1]))
            row["migrate_per_page"] = row["T_migrate"] / max(row["migrated"], 1)
            row["migscan_per_taken"] = row["T_migscan"] / max(row["mtaken"], 1)
            row["freescan_per_pfn"] = row["T_freescan"] / max(row["fscanned"], 1)
            print("compact run", r, {k2: (round(v, 2) if isinstance(v, float) else v) for k2, v in row.items()})
            rows.append(row)
    # Least squares T_migscan = a*scanned + b*taken over all runs.
    sxx = sum(x["mscanned"] ** 2 for x in rows)
    syy = sum(x["mtaken"] ** 2 for x in rows)
    sxy = sum(x["mscanned"] * x["mtaken"] for x in rows)
    sxt = sum(x["mscanned"] * x["T_migscan"] for x in rows)
    syt = sum(x["mtaken"] * x["T_migscan"] for x in rows)
    det = sxx * syy - sxy * sxy
    if det:
        a = (sxt * syy - syt * sxy) / det
        b = (syt * sxx - sxt * sxy) / det
        print(f"compact fit T_migscan = {a:.3f} ns/pfn scanned + {b:.1f} ns/page isolated")
    return rows


def reclaim(runs, limit_mib=256):
    rows = []
    f = f"{WORK}/reclaim.dat"
    sh([BIN, "mkfile", f, str(3 * limit_mib)])
    try:
        for r in range(runs):
            for mode in ("seq", "rand4k"):
                lim = limit_mib if mode == "seq" else 64
                os.makedirs(CG, exist_ok=True)
                try:
                    with open(f"{CG}/memory.limit_in_bytes", "w") as fh:
                        fh.write(str(lim << 20))
                    fsize = 3 * lim << 20
                    # rand4k reads only the first 3 x 64 MiB of the file (order-0 folios, slow I/O)
                    cmd = [BIN, "read", f if mode == "seq" else f + ".small", mode, f"{CG}/cgroup.procs"]
                    if mode == "rand4k" and not os.path.exists(f + ".small"):
                        sh([BIN, "mkfile", f + ".small", str(3 * lim)])
                    out, smp = perf_run(f"reclaim{r}", cmd,
                                        ["vmscan:mm_vmscan_lru_shrink_inactive",
                                         "vmscan:mm_vmscan_memcg_reclaim_begin",
                                         "vmscan:mm_vmscan_memcg_reclaim_end"])
                finally:
                    os.rmdir(CG)
                ch = clock_samples(smp)
                si = tp(smp, "mm_vmscan_lru_shrink_inactive")
                scanned = sum(field(s[3], "nr_scanned") for s in si)
                reclaimed = sum(field(s[3], "nr_reclaimed") for s in si)
                wall, begin, calls = 0.0, None, 0
                for s in sorted(tp(smp, "memcg_reclaim_begin") + tp(smp, "memcg_reclaim_end"), key=lambda s: s[1]):
                    if s[0].endswith("begin"):
                        begin = s[1]
                    elif begin is not None:
                        wall += (s[1] - begin) * 1e9
                        calls += 1
                        begin = None
                T = t_ns(ch, ["try_to_free_mem_cgroup_pages"])
                row = dict(mode=mode, limit_mib=lim, scanned=scanned, reclaimed=reclaimed, calls=calls,
                           wall_per_page=wall / max(reclaimed, 1), cpu_per_page=T / max(reclaimed, 1),
                           scan_per_page=t_ns(ch, ["try_to_free_mem_cgroup_pages", "isolate_lru_folios"]) / max(scanned, 1),
                           T_samples=T // PERIOD_NS,
                           shrink_folio_list_per_page=t_ns(ch, ["try_to_free_mem_cgroup_pages", "shrink_folio_list"]) / max(reclaimed, 1),
                           read=out.strip())
                print("reclaim run", r, {k: (round(v, 1) if isinstance(v, float) else v) for k, v in row.items()})
                rows.append(row)
    finally:
        for x in (f, f + ".small"):
            if os.path.exists(x):
                os.unlink(x)
    return rows


def tracefs():
    for line in open("/proc/mounts"):
        f = line.split()
        if f[2] == "tracefs":
            return f[1], False
    d = f"{WORK}/tracefs"
    os.makedirs(d, exist_ok=True)
    subprocess.run(["mount", "-t", "tracefs", "nodev", d], check=True)
    return d, True


def drain(runs):
    """Each drain_all_pages call frees every CPU's PCP pages with free_pcppages_bulk, which fires
    kmem:mm_page_pcpu_drain once per page: in a private tracefs instance, the events of the
    writing task form one burst per CPU drained (gaps under 20 us). Burst duration / (pages - 1)
    is the time per page drained (including the event's own cost); the burst is the per-CPU
    drain. Checked with perf call chains: these events come from drain_pages_zone <-
    __drain_all_pages <- alloc_contig_range_noprof."""
    rows = []
    old = open(HUGE1G).read().strip()
    root, mounted = tracefs()
    inst = f"{root}/instances/fraglab-costs-helper"
    os.mkdir(inst)
    try:
        for r in range(runs):
            with open(f"{inst}/events/kmem/mm_page_pcpu_drain/enable", "w") as fh:
                fh.write("1")
            p = subprocess.Popen(["sh", "-c", f"echo 1 > {HUGE1G}; echo {old} > {HUGE1G}"])
            p.wait()
            with open(f"{inst}/events/kmem/mm_page_pcpu_drain/enable", "w") as fh:
                fh.write("0")
            lines = open(f"{inst}/trace").read().splitlines()
            with open(f"{inst}/trace", "w") as fh:
                fh.write("")
            ts = []
            for line in lines:
                m = re.match(r"^\s*(\S+)-(\d+)\s+\[(\d+)\].*?([\d.]+): mm_page_pcpu_drain", line)
                if m and int(m.group(2)) == p.pid:
                    ts.append(float(m.group(4)))
            bursts, last = [], None
            for t in ts:
                if last is None or t - last > 20e-6:
                    bursts.append([])
                bursts[-1].append(t)
                last = t
            big = [b for b in bursts if len(b) >= 100]
            per_page = [(b[-1] - b[0]) * 1e9 / (len(b) - 1) for b in big]
            row = dict(events=len(ts), bursts=len(bursts),
                       big_bursts=[(len(b), round((b[-1] - b[0]) * 1e6, 1)) for b in big][:10],
                       per_page_ns=[round(x) for x in per_page][:10],
                       per_page_median=statistics.median(per_page) if per_page else None)
            print("drain run", r, row)
            rows.append(row)
    finally:
        with open(HUGE1G, "w") as fh:
            fh.write(old)
        with open(f"{inst}/events/kmem/mm_page_pcpu_drain/enable", "w") as fh:
            fh.write("0")
        os.rmdir(inst)
        if mounted:
            subprocess.run(["umount", root], check=True)
            os.rmdir(root)
    return rows


def wio(runs):
    for r in range(runs):
        print("wio run", r)
        print(sh([BIN, "wio", f"{WORK}/wio.dat", "500"]), end="")


def main():
    args = sys.argv[1:]
    runs = 3
    if "--runs" in args:
        i = args.index("--runs")
        runs = int(args[i + 1])
        del args[i:i + 2]
    phases = args or ["faults", "compact", "reclaim", "drain", "wio"]
    os.makedirs(WORK, exist_ok=True)
    sh(["gcc", "-O2", "-Wall", "-o", BIN, f"{HERE}/mm_costs.c"])
    print("kernel", os.uname().release, "thp", open("/sys/kernel/mm/transparent_hugepage/enabled").read().strip(),
          "reported_kib", open("/sys/module/page_reporting/parameters/reported_kib").read().strip())
    try:
        for p in phases:
            globals()[p](runs)
    finally:
        for x in os.listdir(WORK):
            os.unlink(f"{WORK}/{x}")
        os.rmdir(WORK)


if __name__ == "__main__":
    main()
