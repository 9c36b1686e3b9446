#!/usr/bin/env python3
"""Measures cost-model constants on the live kernel from tracepoint timestamps (docs/costs.md).

This kernel has no kprobes (CONFIG_KPROBE_EVENTS is off) and no function_graph tracer, so
function latencies are taken from tracepoints only:

  reclaim    a cgroup-v1 memory group limited to 128 MiB reads a 1 GiB file that is not cached;
             vmscan:mm_vmscan_memcg_reclaim_begin/end give the time of each memcg reclaim,
             vmscan:mm_vmscan_lru_shrink_inactive the pages scanned and reclaimed inside it:
             time per reclaimed clean page-cache page (scan included).
  compaction 1.5 GiB of anonymous memory is touched, every other 4 KiB page is freed with
             MADV_DONTNEED, and /proc/sys/vm/compact_memory is written with the compaction
             tracepoints on; each cycle (one mm_compaction_isolate_migratepages to the next on
             the same CPU) is fitted by least squares to
             t = a + b*migrate_scanned + c*free_scanned + d*isolated + e*migrated.
  pcp drain  kmem:mm_page_pcpu_drain fires once per page that free_pcppages_bulk returns to the
             buddy lists; events on one CPU less than 5 us apart form one bulk free; time per
             page = burst duration / (pages - 1).
  write I/O  4 KiB O_DIRECT pwrite + fdatasync to a file on the root file system: median.
  alloc/free MAP_POPULATE of 512 MiB (allocate + zero + map, per page) and MADV_DONTNEED of it
             (unmap + free, per page), MADV_NOHUGEPAGE: per-page times (upper bounds for the
             allocator's share).

Run as root: python3 tools/measure/kernel_costs.py [RUNS]. Everything it changes (tracing
state, the cgroup, the files) is restored or removed at the end, also on error.
"""
import ctypes
import mmap
import os
import statistics
import subprocess
import sys
import tempfile
import time

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
PAGE = 4096
libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
MADV_DONTNEED, MADV_NOHUGEPAGE = 4, 15


def tracefs():
    for line in open("/proc/mounts"):
        f = line.split()
        if f[2] == "tracefs":
            return f[1], False
    d = tempfile.mkdtemp(prefix="fraglab-tracefs-")
    subprocess.run(["mount", "-t", "tracefs", "nodev", d], check=True)
    return d, True


def wr(path, text):
    with open(path, "w") as f:
        f.write(text)


class Trace:
    def __init__(self, root, events):
        self.root, self.events = root, events

    def __enter__(self):
        wr(f"{self.root}/tracing_on", "0")
        wr(f"{self.root}/trace", "")
        self.old_size = open(f"{self.root}/buffer_size_kb").read().strip()
        wr(f"{self.root}/buffer_size_kb", "65536")
        for e in self.events:
            wr(f"{self.root}/events/{e}/enable", "1")
        wr(f"{self.root}/tracing_on", "1")
        return self

    def lines(self):
        wr(f"{self.root}/tracing_on", "0")
        return open(f"{self.root}/trace").read().splitlines()

    def __exit__(self, *a):
        wr(f"{self.root}/tracing_on", "0")
        for e in self.events:
            wr(f"{self.root}/events/{e}/enable", "0")
        wr(f"{self.root}/trace", "")
        wr(f"{self.root}/buffer_size_kb", self.old_size.split()[0])
        wr(f"{self.root}/tracing_on", "1")


def parse(line):
    """(cpu, ts_ns, event, {field: value}) of an ftrace text line, or None."""
    if line.startswith("#") or ": " not in line:
        return None
    head, _, rest = line.partition(": ")
    try:
        cpu = int(head[head.index("[") + 1: head.index("]")])
        ts = float(head.split()[-1]) * 1e9
    except ValueError:
        return None
    ev, _, args = rest.partition(": ")
    fields = {}
    for tok in args.split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            fields[k] = v
    return cpu, ts, ev, fields


def reclaim(root, datafile):
    cg = "/sys/fs/cgroup/memory/fraglab-measure"
    os.makedirs(cg, exist_ok=True)
    try:
        wr(f"{cg}/memory.limit_in_bytes", str(128 << 20))
        fd = os.open(datafile, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
        ev = ["vmscan/mm_vmscan_memcg_reclaim_begin", "vmscan/mm_vmscan_memcg_reclaim_end",
              "vmscan/mm_vmscan_lru_shrink_inactive"]
        with Trace(root, ev) as t:
            code = f"import os\nopen('{cg}/cgroup.procs','w').write(str(os.getpid()))\n" \
                   f"f=open('{datafile}','rb',buffering=0)\nwhile f.read(1<<20): pass\n"
            subprocess.run([sys.executable, "-c", code], check=True)
            lines = t.lines()
    finally:
        # Empty the group (the reader has exited) and remove it.
        os.rmdir(cg)
    begin, total_ns, reclaimed, scanned, n = {}, 0.0, 0, 0, 0
    for line in lines:
        p = parse(line)
        if not p:
            continue
        cpu, ts, e, f = p
        if e == "mm_vmscan_memcg_reclaim_begin":
            begin[cpu] = ts
        elif e == "mm_vmscan_memcg_reclaim_end" and cpu in begin:
            total_ns += ts - begin.pop(cpu)
            n += 1
        elif e == "mm_vmscan_lru_shrink_inactive":
            scanned += int(f.get("nr_scanned", 0))
            reclaimed += int(f.get("nr_reclaimed", 0))
    return total_ns, scanned, reclaimed, n


def fragment_and_compact(root):
    size = 1536 << 20
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    libc.madvise(ctypes.c_void_p(addr), size, MADV_NOHUGEPAGE)
    for off in range(0, size, PAGE):
        m[off] = 1
    for off in range(0, size, 2 * PAGE):
        libc.madvise(ctypes.c_void_p(addr + off), PAGE, MADV_DONTNEED)
    ev = ["compaction/mm_compaction_isolate_migratepages", "compaction/mm_compaction_isolate_freepages",
          "compaction/mm_compaction_migratepages", "kmem/mm_page_pcpu_drain"]
    with Trace(root, ev) as t:
        wr("/proc/sys/vm/compact_memory", "1")
        lines = t.lines()
    del addr
    m.close()
    return lines


def fit_compaction(lines):
    cycles, cur = [], {}
    drains = {}
    for line in lines:
        p = parse(line)
        if not p:
            continue
        cpu, ts, e, f = p
        if e == "mm_page_pcpu_drain":
            drains.setdefault(cpu, []).append(ts)
            continue
        if e == "mm_compaction_isolate_migratepages":
            c = cur.get(cpu)
            if c:
                c["t"] = ts - c["start"]
                cycles.append(c)
            cur[cpu] = {"start": ts, "ms": int(f.get("nr_scanned", 0)), "iso": int(f.get("nr_taken", 0)),
                        "fs": 0, "mig": 0}
        elif cpu in cur:
            if e == "mm_compaction_isolate_freepages":
                cur[cpu]["fs"] += int(f.get("nr_scanned", 0))
                cur[cpu]["iso"] += int(f.get("nr_taken", 0))
            elif e == "mm_compaction_migratepages":
                cur[cpu]["mig"] += int(f.get("nr_migrated", 0))
    import numpy as np
    cycles = [c for c in cycles if c["t"] < 50e6]
    X = np.array([[1, c["ms"], c["fs"], c["iso"], c["mig"]] for c in cycles], dtype=float)
    y = np.array([c["t"] for c in cycles])
    coef = np.linalg.lstsq(X, y, rcond=None)[0] if len(cycles) > 5 else [float("nan")] * 5
    bursts = []
    for ts in drains.values():
        ts.sort()
        start, prev, n = ts[0], ts[0], 1
        for x in ts[1:]:
            if x - prev < 5000:
                n += 1
            else:
                if n >= 8:
                    bursts.append((prev - start) / (n - 1))
                start, n = x, 1
            prev = x
    return len(cycles), coef, statistics.median(bursts) if bursts else float("nan"), len(bursts)


def write_io(path):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o600)
    buf = mmap.mmap(-1, PAGE)
    buf.write(b"x" * PAGE)
    lat = []
    try:
        for i in range(500):
            t = time.perf_counter_ns()
            os.pwritev(fd, [buf], (i % 256) * PAGE)
            os.fdatasync(fd)
            lat.append(time.perf_counter_ns() - t)
    finally:
        os.close(fd)
        os.unlink(path)
    return statistics.median(lat)


def populate_free():
    size = 512 << 20
    MAP_POPULATE = 0x8000
    t = time.perf_counter_ns()
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_POPULATE)
    pop = (time.perf_counter_ns() - t) / (size / PAGE)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    t = time.perf_counter_ns()
    libc.madvise(ctypes.c_void_p(addr), size, MADV_DONTNEED)
    free = (time.perf_counter_ns() - t) / (size / PAGE)
    del addr
    m.close()
    return pop, free


def main():
    root, mounted = tracefs()
    datafile = "/var/tmp/fraglab-measure-reclaim.dat"
    try:
        with open(datafile, "wb") as f:
            chunk = os.urandom(1 << 20)
            for _ in range(1024):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        for run in range(RUNS):
            ns, sc, rc, n = reclaim(root, datafile)
            print(f"reclaim run {run + 1}: {n} memcg reclaims, {sc} scanned, {rc} reclaimed, "
                  f"{ns / 1e6:.1f} ms: {ns / max(rc, 1):.0f} ns per reclaimed page, {ns / max(sc, 1):.0f} ns per scanned page")
        for run in range(RUNS):
            ncyc, coef, drain, nb = fit_compaction(fragment_and_compact(root))
            print(f"compaction run {run + 1}: {ncyc} cycles; fit ns: fixed {coef[0]:.0f}, per migrate pfn {coef[1]:.2f}, "
                  f"per free pfn {coef[2]:.2f}, per isolated page {coef[3]:.1f}, per migrated page {coef[4]:.0f}; "
                  f"pcp bulk free: {drain:.0f} ns per page (median of {nb} bursts)")
        for run in range(RUNS):
            print(f"write I/O run {run + 1}: median {write_io('/var/tmp/fraglab-measure-write.dat'):.0f} ns per 4 KiB O_DIRECT write + fdatasync")
        for run in range(RUNS):
            pop, free = populate_free()
            print(f"populate/free run {run + 1}: MAP_POPULATE {pop:.0f} ns per page, MADV_DONTNEED {free:.0f} ns per page")
    finally:
        if os.path.exists(datafile):
            os.unlink(datafile)
        if mounted:
            subprocess.run(["umount", root])
            os.rmdir(root)


if __name__ == "__main__":
    main()
