#!/usr/bin/env python3
"""Which kernel paths mix pageblocks (issue 20 item 6, docs/pageblock-mixing.md).

Runs a command (normally `fraglab host run SPEC --fit-memory`) with five kmem tracepoints in a
private tracefs instance and takes per-block censuses from /proc/kpageflags (docs/model §30)
before, during (every --every seconds) and after it. Root only; run it under the live lock:

    flock /work/wt/live.lock python3 tools/measure/pageblock_mixing.py --out /tmp/mix.json -- \
        ./target/release/fraglab host run experiments/validation/thp-frag-dm1.toml --fit-memory -o /tmp/r.json

Census (§30.2): per 512-page block, pages with SLAB, PGTABLE, LRU, BUDDY, and "bare" pages (no
flag at all, inside a block that is not all zeros: kernel allocations, and free pages on PCP
lists or under page reporting, which read as nothing). A block is *slab-mixed* when it holds SLAB
(or PGTABLE) pages and LRU pages, *bare-mixed* when it holds bare pages and LRU pages but no slab.
No procfs file gives a block's type (§30.4); the traces give the type a block had when pages left
its free lists (mm_page_alloc_zone_locked's migratetype is the list's type, which equals the
block's type under the zone lock, §1.4.2) or were drained to it (mm_page_pcpu_drain: the block's
type at drain time, §2.1.4), and claims (mm_page_alloc_extfrag with change_ownership).

Attribution, per allocation (mm_page_alloc: requested type r, pfn p): the block's last known
type t (from the events above, in trace order). r != t with an extfrag event on the same pfn
just before is a fallback; r != t otherwise is an allocation handed out from a per-CPU list under
a type the block no longer has (or a retype the traces do not show: merge, __isolate_free_page,
the high-atomic reserve). Each mixed block at a census is then attributed to: "pre-existing"
(slab-mixed at the first census), "fallback" (an extfrag event in the block during the run),
"stale-pcp" (foreign-type allocations into it without extfrag), "retyped" (its known type changed
without either), else "unexplained" (e.g. slab freed into a block that then took LRU pages by
its own type: the content is mixed but no allocation was of a foreign type).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from array import array

KPF_SLAB, KPF_LRU, KPF_BUDDY, KPF_PGTABLE = 1 << 7, 1 << 5, 1 << 10, 1 << 26
KPF_ANON, KPF_THP, KPF_SWAPBACKED = 1 << 12, 1 << 22, 1 << 14
EVENTS = [
    "mm_page_alloc",
    "mm_page_free",
    "mm_page_pcpu_drain",
    "mm_page_alloc_zone_locked",
    "mm_page_alloc_extfrag",
]
FIELD = re.compile(r"(\w+)=(0x[0-9a-f]+|-?\d+)")


def zones():
    out, name = [], None
    for line in open("/proc/zoneinfo"):
        m = re.match(r"Node \d+, zone\s+(\w+)", line)
        if m:
            name = m.group(1)
        m = re.match(r"\s+spanned\s+(\d+)", line)
        if m:
            spanned = int(m.group(1))
        m = re.match(r"\s+start_pfn:\s+(\d+)", line)
        if m and spanned:
            out.append((name, int(m.group(1)), int(m.group(1)) + spanned))
    return out


def pagetypeinfo_blocks():
    res = {}
    txt = open("/proc/pagetypeinfo").read()
    part = txt.split("Number of blocks type")[1]
    lines = part.strip().splitlines()
    cols = lines[0].split()
    for line in lines[1:]:
        m = re.match(r"Node\s+\d+, zone\s+(\w+)\s+(.*)", line)
        if m:
            res[m.group(1)] = dict(zip(cols, map(int, m.group(2).split())))
    return res


def census(zs):
    """Per-block content classes over DMA32 and Normal (§30.2)."""
    blocks = {}
    with open("/proc/kpageflags", "rb") as f:
        for name, start, end in zs:
            if name not in ("DMA32", "Normal"):
                continue
            b0 = (start + 511) // 512
            b1 = end // 512
            step = 2048  # blocks per read: 8 MiB of flags
            for bs in range(b0, b1, step):
                be = min(b1, bs + step)
                f.seek(bs * 512 * 8)
                a = array("Q")
                a.frombytes(f.read((be - bs) * 512 * 8))
                for i in range(be - bs):
                    seg = a[i * 512 : (i + 1) * 512]
                    slab = lru = buddy = bare = zero = 0
                    small = 0  # LRU pages of order-0, non-anon folios (e.g. block-device metadata)
                    for v in seg:
                        if v == 0:
                            zero += 1
                        elif v & KPF_BUDDY:
                            buddy += 1
                        elif v & (KPF_SLAB | KPF_PGTABLE):
                            slab += 1
                        elif v & KPF_LRU:
                            lru += 1
                            if not v & (KPF_ANON | KPF_THP | KPF_SWAPBACKED):
                                small += 1
                    if zero == 512:
                        continue  # hole or offline memory
                    bare = zero
                    blocks[bs + i] = (slab, lru, bare, buddy, small)
    return blocks


def summarise(blocks):
    s = {"blocks": len(blocks), "slab_mixed": 0, "bare_mixed": 0, "slab_mixed_lru_pages": 0}
    lru_hist = {"1-7": 0, "8-63": 0, "64-255": 0, "256+": 0}
    s["slab_mixed_only_small_file_lru"] = 0
    s["slab_mixed_small_file_lru_pages"] = 0
    for slab, lru, bare, buddy, small in blocks.values():
        if lru and slab:
            s["slab_mixed"] += 1
            s["slab_mixed_small_file_lru_pages"] += small
            if small == lru:
                s["slab_mixed_only_small_file_lru"] += 1
            s["slab_mixed_lru_pages"] += lru
            k = "1-7" if lru < 8 else "8-63" if lru < 64 else "64-255" if lru < 256 else "256+"
            lru_hist[k] += 1
        elif lru and bare:
            s["bare_mixed"] += 1
    s["slab_mixed_by_lru_pages"] = lru_hist
    return s


class Tracer:
    def __init__(self, inst, max_pfn):
        self.inst = inst
        self.nblk = max_pfn // 512 + 2
        self.known = bytearray(b"\xff" * self.nblk)  # last known block type, 255 = unknown
        self.changes = array("I", [0]) * self.nblk
        self.extfrag = array("I", [0]) * self.nblk
        self.foreign = array("I", [0]) * self.nblk  # pages allocated with r != known type
        self.last_extfrag_pfn = {}
        self.counts = {e: 0 for e in EVENTS}
        self.extfrag_frag = 0
        self.extfrag_claims = {}
        self.foreign_pages = {"fallback": 0, "stale": 0}
        self.alloc_pages_by_mt = [0] * 6
        self.stop = False
        self.closed = False

    def _set(self, blk, mt):
        old = self.known[blk]
        if old != mt:
            if old != 255:
                self.changes[blk] += 1
            self.known[blk] = mt

    def run(self):
        fd = os.open(os.path.join(self.inst, "trace_pipe"), os.O_RDONLY | os.O_NONBLOCK)
        buf = b""
        try:
            while True:
                try:
                    chunk = os.read(fd, 1 << 20)
                except BlockingIOError:
                    chunk = b""
                if not chunk:
                    if self.stop:
                        return
                    time.sleep(0.05)
                    continue
                buf += chunk
                lines = buf.split(b"\n")
                buf = lines.pop()
                for line in lines:
                    self.handle(line.decode("ascii", "replace"))
        finally:
            os.close(fd)
            self.closed = True

    def handle(self, line):
        i = line.find(" mm_page_")
        if i < 0:
            return
        j = line.find(":", i)
        ev = line[i + 1 : j]
        if ev not in self.counts:
            return
        self.counts[ev] += 1
        if ev == "mm_page_free":
            return
        f = dict(FIELD.findall(line[j:]))
        pfn = int(f.get("pfn", "0"), 16)
        blk = pfn >> 9
        if blk >= self.nblk:
            return
        if ev == "mm_page_alloc_zone_locked":
            self._set(blk, int(f["migratetype"]))
        elif ev == "mm_page_pcpu_drain":
            self._set(blk, int(f["migratetype"]))
        elif ev == "mm_page_alloc_extfrag":
            fo = int(f["fallback_order"])
            am = int(f["alloc_migratetype"])
            fm = int(f["fallback_migratetype"])
            co = int(f["change_ownership"])
            self.extfrag[blk] += 1
            if fo < 9:
                self.extfrag_frag += 1
            k = "%s->%d fo%s co%d" % (fm, am, "9+" if fo >= 9 else "<9", co)
            self.extfrag_claims[k] = self.extfrag_claims.get(k, 0) + 1
            self.last_extfrag_pfn[pfn] = True
            self._set(blk, am if co else fm)
        elif ev == "mm_page_alloc":
            mt = int(f["migratetype"])
            order = int(f["order"])
            n = 1 << order
            if 0 <= mt < 6:
                self.alloc_pages_by_mt[mt] += n
            t = self.known[blk]
            if mt < 3 and t != 255 and t < 3 and t != mt:
                self.foreign[blk] += n
                if self.last_extfrag_pfn.pop(pfn, None):
                    self.foreign_pages["fallback"] += n
                else:
                    self.foreign_pages["stale"] += n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--every", type=float, default=45.0)
    ap.add_argument("--buffer-kb", type=int, default=65536)
    ap.add_argument("--no-free-event", action="store_true", help="leave mm_page_free off (fewer lost events)")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    zs = zones()
    max_pfn = max(e for _, _, e in zs)
    rec = {
        "cmd": cmd,
        "reported_kib_before": open("/sys/module/page_reporting/parameters/reported_kib").read().strip(),
        "nr_kdamonds": open("/sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds").read().strip(),
        "pagetypeinfo_blocks_before": pagetypeinfo_blocks(),
    }
    # Private tracefs mount and instance.
    mnt = "/tmp/pbmix-tracefs"
    os.makedirs(mnt, exist_ok=True)
    mounted = False
    if not os.path.exists(os.path.join(mnt, "instances")):
        subprocess.run(["mount", "-t", "tracefs", "nodev", mnt], check=True)
        mounted = True
    inst = os.path.join(mnt, "instances", "pbmix%d" % os.getpid())
    os.mkdir(inst)
    try:
        open(os.path.join(inst, "buffer_size_kb"), "w").write(str(a.buffer_kb))
        for e in EVENTS:
            if e == "mm_page_free" and a.no_free_event:
                continue
            open(os.path.join(inst, "events/kmem", e, "enable"), "w").write("1")
        tr = Tracer(inst, max_pfn)
        th = threading.Thread(target=tr.run, daemon=True)
        th.start()
        t0 = time.time()
        first = census(zs)
        censuses = [{"t": 0.0, **summarise(first)}]
        rec["census_secs"] = round(time.time() - t0, 1)
        pre_mixed = {b for b, (s, l, *_) in first.items() if s and l}
        proc = subprocess.Popen(cmd)
        last = first
        while proc.poll() is None:
            time.sleep(min(a.every, 5.0))
            if time.time() - t0 - censuses[-1]["t"] >= a.every and proc.poll() is None:
                c = census(zs)
                censuses.append({"t": round(time.time() - t0, 1), **summarise(c)})
                if summarise(c)["slab_mixed"] >= summarise(last)["slab_mixed"]:
                    last = c
                print("pbmix census", censuses[-1], file=sys.stderr)
        rec["rc"] = proc.returncode
        end = census(zs)
        censuses.append({"t": round(time.time() - t0, 1), "after_exit": True, **summarise(end)})
        time.sleep(2)
        for e in EVENTS:
            open(os.path.join(inst, "events/kmem", e, "enable"), "w").write("0")
        tr.stop = True
        th.join()
        stats = {}
        for cpu in sorted(os.listdir(os.path.join(inst, "per_cpu"))):
            for line in open(os.path.join(inst, "per_cpu", cpu, "stats")):
                k, _, v = line.partition(":")
                if k.strip() in ("overrun", "dropped events"):
                    stats["%s %s" % (cpu, k.strip())] = v.strip()
        rec["trace_loss"] = stats
        rec["events"] = tr.counts
        rec["extfrag_fragmenting"] = tr.extfrag_frag
        rec["extfrag_kinds"] = tr.extfrag_claims
        rec["alloc_pages_by_requested_mt"] = tr.alloc_pages_by_mt
        rec["foreign_type_alloc_pages"] = tr.foreign_pages
        rec["censuses"] = censuses

        def attribute(blocks, label):
            cats = {"pre-existing": 0, "fallback": 0, "stale-pcp": 0, "retyped": 0, "unexplained": 0}
            detail = {}
            for b, (s, l, *_) in blocks.items():
                if not (s and l):
                    continue
                if b in pre_mixed:
                    cats["pre-existing"] += 1
                elif tr.extfrag[b]:
                    cats["fallback"] += 1
                elif tr.foreign[b]:
                    cats["stale-pcp"] += 1
                elif tr.changes[b]:
                    cats["retyped"] += 1
                else:
                    cats["unexplained"] += 1
                    f = first.get(b, (0, 0, 0, 0, 0))
                    t = tr.known[b]
                    # Which part was there at the first census, and the block's known type.
                    k = "%s before, type %s" % (
                        "slab" if f[0] else "LRU" if f[1] else "neither",
                        "UMRHCI"[t] if t < 6 else "?",
                    )
                    detail[k] = detail.get(k, 0) + 1
            rec["attribution_" + label] = cats
            rec["unexplained_" + label] = detail

        attribute(last, "peak")
        attribute(end, "after_exit")
        rec["blocks_retyped_during_run"] = sum(1 for x in tr.changes if x)
        rec["blocks_with_foreign_allocs"] = sum(1 for x in tr.foreign if x)
    finally:
        for e in EVENTS:
            try:
                open(os.path.join(inst, "events/kmem", e, "enable"), "w").write("0")
            except OSError:
                pass
        os.rmdir(inst)
        if mounted:
            subprocess.run(["umount", mnt])
    rec["reported_kib_after"] = open("/sys/module/page_reporting/parameters/reported_kib").read().strip()
    rec["pagetypeinfo_blocks_after"] = pagetypeinfo_blocks()
    json.dump(rec, open(a.out, "w"), indent=1)
    print(json.dumps(rec, indent=1))


if __name__ == "__main__":
    main()
