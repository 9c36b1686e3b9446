#!/usr/bin/env python3
"""Measures the read device of the suite's cold-read scenarios: a loop device over a file on vda
(docs/costs.md, `read_req_ns` and `read_page_ns`).

The set-up is the host engine's (`crates/host/src/loops.rs`, `run.rs` make_read_file): a sparse
image file on the root filesystem (vda) attached with `losetup --find --show` (buffered: no
direct I/O, so the image's blocks sit in vda's page cache once written), `mkfs.ext4 -E
nodiscard`, mounted without `discard`, a 1 GiB file written in 1 MiB writes, fdatasync'ed and
dropped from the (inner) page cache with POSIX_FADV_DONTNEED.

  direct   O_DIRECT preads of the inner file at random aligned offsets, sizes 4 KiB .. 1 MiB,
           each timed (N per size): the device's time per request of B bytes, with no page-cache
           work of the reader. Least squares of the per-size medians: t = a + b x pages gives
           read_req_ns (a) and read_page_ns (b).
  buffered the suite's two reads for comparison (not used for any constant): a sequential read of
           the cold file in 128 KiB reads (read_ahead_kb 128, the loop device's setting in
           cold-read-ext4) and, after POSIX_FADV_DONTNEED, 65,536 random 4 KiB reads; MiB/s.

  vda      (`--vda`) the same O_DIRECT preads of a 1 GiB file on the root filesystem (vda, the
           virtio disk: the device of scenarios without loop images), then the buffered reads.

Usage (root): python3 tools/measure/loop_read.py [--runs N] [--per-size N] [--vda]
Records free page reporting (reported_kib) and DAMON (nr_kdamonds) before and after. Uses
about 1 GiB of disk and up to 2 GiB of page cache (the inner file and the image's blocks);
unmounts, detaches and removes everything on every exit path.
"""
import mmap
import os
import random
import statistics
import subprocess
import sys
import time

WORK = "/var/tmp/fraglab-loop-read"
IMG = f"{WORK}/img.ext4"
MNT = f"{WORK}/mnt"
FILE = f"{MNT}/big"
SIZE = 1 << 30
SIZES_KIB = [4, 16, 64, 128, 512, 1024]


def sh(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def confounders():
    rep = open("/sys/module/page_reporting/parameters/reported_kib").read().strip()
    try:
        damon = open("/sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds").read().strip()
    except OSError:
        damon = "-"
    return f"reported_kib {rep} nr_kdamonds {damon}"


def setup():
    os.makedirs(MNT, exist_ok=True)
    with open(IMG, "wb") as f:
        f.truncate(SIZE + (256 << 20))
    dev = sh("losetup", "--find", "--show", IMG)
    try:
        sh("mkfs.ext4", "-q", "-F", "-E", "nodiscard", dev)
        sh("mount", dev, MNT)
        name = os.path.basename(dev)
        with open(f"/sys/block/{name}/queue/read_ahead_kb", "w") as f:
            f.write("128")
        fd = os.open(FILE, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        b = b"\x3c" * (1 << 20)
        for off in range(0, SIZE, len(b)):
            os.pwrite(fd, b, off)
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    except BaseException:
        teardown(dev)
        raise
    return dev


def teardown(dev):
    subprocess.run(["umount", MNT], capture_output=True)
    subprocess.run(["losetup", "-d", dev], capture_output=True)
    for p in (IMG,):
        try:
            os.unlink(p)
        except OSError:
            pass
    try:
        os.rmdir(MNT)
        os.rmdir(WORK)
    except OSError:
        pass


def drop_inner():
    global FILE
    fd = os.open(FILE, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def direct(per_size, rng):
    fd = os.open(FILE, os.O_RDONLY | os.O_DIRECT)
    return direct_fd(fd, per_size, rng)


def direct_fd(fd, per_size, rng):
    buf = mmap.mmap(-1, 1 << 20)
    out = {}
    for kib in SIZES_KIB:
        n = kib << 10
        mv = memoryview(buf)[:n]
        ts = []
        for _ in range(per_size):
            off = rng.randrange(0, SIZE // n) * n
            t0 = time.perf_counter_ns()
            os.preadv(fd, [mv], off)
            ts.append(time.perf_counter_ns() - t0)
        mv.release()
        ts.sort()
        out[kib] = (ts[len(ts) // 2], ts[len(ts) // 10], ts[len(ts) * 9 // 10])
    buf.close()
    os.close(fd)
    return out


def fit(med):
    xs = [kib / 4 for kib in SIZES_KIB]
    ys = [med[k][0] for k in SIZES_KIB]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def buffered(rng):
    drop_inner()
    fd = os.open(FILE, os.O_RDONLY)
    t0 = time.perf_counter_ns()
    off = 0
    while off < SIZE:
        off += len(os.pread(fd, 128 << 10, off))
    seq = SIZE / (1 << 20) / ((time.perf_counter_ns() - t0) / 1e9)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    pages = SIZE // 4096
    t0 = time.perf_counter_ns()
    for _ in range(65536):
        os.pread(fd, 4096, rng.randrange(pages) * 4096)
    rand = 256 / ((time.perf_counter_ns() - t0) / 1e9)
    os.close(fd)
    return seq, rand


def vda(runs, per_size):
    global FILE
    os.makedirs(WORK, exist_ok=True)
    FILE = f"{WORK}/vda-big"
    try:
        fd = os.open(FILE, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        b = b"\x3c" * (1 << 20)
        for off in range(0, SIZE, len(b)):
            os.pwrite(fd, b, off)
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
        rng = random.Random(1)
        for r in range(runs):
            med = direct(per_size, rng)
            a0, b0 = fit(med)
            for kib in SIZES_KIB:
                p50, p10, p90 = med[kib]
                print(f"vda run {r + 1} direct {kib:5d} KiB p50 {p50:9d} ns p10 {p10:9d} p90 {p90:9d}")
            print(f"vda run {r + 1} fit: read_req_ns {a0:.0f} read_page_ns {b0:.0f}", flush=True)
            seq, rand = buffered(rng)
            print(f"vda run {r + 1} buffered: seq 128 KiB reads {seq:.0f} MiB/s, random 4 KiB {rand:.0f} MiB/s",
                  flush=True)
    finally:
        try:
            os.unlink(FILE)
            os.rmdir(WORK)
        except OSError:
            pass


def main():
    runs, per_size = 3, 2000
    a = sys.argv[1:]
    if "--runs" in a:
        runs = int(a[a.index("--runs") + 1])
    if "--per-size" in a:
        per_size = int(a[a.index("--per-size") + 1])
    print("before:", confounders(), flush=True)
    if "--vda" in a:
        vda(runs, per_size)
        print("after:", confounders())
        return
    dev = setup()
    try:
        rng = random.Random(1)
        for r in range(runs):
            med = direct(per_size, rng)
            a0, b0 = fit(med)
            for kib in SIZES_KIB:
                p50, p10, p90 = med[kib]
                print(f"run {r + 1} direct {kib:5d} KiB p50 {p50:9d} ns p10 {p10:9d} p90 {p90:9d}")
            print(f"run {r + 1} fit: read_req_ns {a0:.0f} read_page_ns {b0:.0f}", flush=True)
            seq, rand = buffered(rng)
            print(f"run {r + 1} buffered: seq 128 KiB reads {seq:.0f} MiB/s, random 4 KiB {rand:.0f} MiB/s",
                  flush=True)
    finally:
        teardown(dev)
        print("after:", confounders())


if __name__ == "__main__":
    main()
