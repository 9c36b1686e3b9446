#!/usr/bin/env python3
"""Makes crates/host/tests/data/census-*.kpf: a cold sequential read of a 16 MiB file on this
VM, then (file page index, PFN, /proc/kpageflags entry) of every cached page, as little-endian
u64 triples. Needs root. Usage: tools/census-fixture.py DIR OUT (DIR on the filesystem to
sample; the file is created there and removed)."""
import ctypes, mmap, os, struct, sys

d, out = sys.argv[1], sys.argv[2]
path = os.path.join(d, "census-fixture.dat")
size = 16 << 20
with open(path, "wb") as f:
    f.write(os.urandom(size))
    f.flush()
    os.fsync(f.fileno())
fd = os.open(path, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # this file's pages only
while os.read(fd, 128 << 10):  # a cold sequential read, 128 KiB at a time
    pass
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
assert addr not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
libc.madvise(ctypes.c_void_p(addr), ctypes.c_size_t(size), mmap.MADV_RANDOM)
for i in range(0, size, 4096):
    ctypes.c_char.from_address(addr + i).value  # touch: map the cached page
rows = []
with open("/proc/self/pagemap", "rb") as pm, open("/proc/kpageflags", "rb") as kf:
    for i in range(size // 4096):
        pm.seek((addr // 4096 + i) * 8)
        e = struct.unpack("<Q", pm.read(8))[0]
        if not e >> 63:
            continue
        pfn = e & ((1 << 55) - 1)
        kf.seek(pfn * 8)
        rows.append(struct.pack("<QQQ", i, pfn, struct.unpack("<Q", kf.read(8))[0]))
libc.munmap(ctypes.c_void_p(addr), ctypes.c_size_t(size))
os.close(fd)
os.unlink(path)
open(out, "wb").write(b"".join(rows))
print(f"{len(rows)} pages -> {out}")
