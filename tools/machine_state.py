#!/usr/bin/env python3
"""What a test run could change on this machine, as a JSON snapshot, and the diff of two.

    machine_state.py snapshot OUT.json
    machine_state.py diff BEFORE.json AFTER.json     # exit 1 and list the changes if any

The snapshot holds every setting the host engine (crates/host) can change, and the places it
leaves things behind when it fails: every writable file under /proc/sys (except net/, which the
engine never touches, and the few values the kernel moves by itself, EXCLUDED), every writable
file under /sys/kernel/mm (THP, hugetlb pools, DAMON's admin tree, KSM), the memory blocks'
state, every block device's read_ahead_kb, the loop devices in use, the tracefs instances and the
top-level tracing switches, the tracefs mounts, and the cgroups at the top of the hierarchy.

.ci/run snapshots before `cargo test --workspace` and after it: the default test suite must
change nothing (issue 34: the tests touch the live kernel only when asked), and after the
opted-in live tests the machine must be as it was found.
"""

import json
import os
import stat
import sys

# Values the kernel changes by itself, whatever the tests do.
EXCLUDED = {
    "/proc/sys/kernel/ns_last_pid",  # the last pid handed out
    "/proc/sys/kernel/random/urandom_min_reseed_secs",
    "/proc/sys/kernel/random/write_wakeup_threshold",
    "/proc/sys/fs/binfmt_misc/register",
    "/proc/sys/fs/binfmt_misc/status",
}
EXCLUDED_DIRS = ("/proc/sys/net/",)
# A running kdamond's monitoring regions: with paddr targets and a refresh interval the kernel
# rewrites them as the memory it monitors changes (this VM's DAMON widened its region by 640 MiB
# while memory was initialised lazily after boot). The kdamond's state and its schemes are kept.
EXCLUDED_PARTS = ("/sys/kernel/mm/damon/admin/kdamonds/", "/regions/")
# Reading more than this of a file is a sign it is not a setting.
MAX_BYTES = 1 << 16


def read(path):
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES)
    except OSError as e:
        return None if e.errno in (13, 1, 22, 5, 95, 16, 19, 61) else f"<error {e.errno}>"
    return data.decode("utf-8", "replace").strip()


def writable_files(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        if any((dirpath + "/").startswith(d) for d in EXCLUDED_DIRS):
            dirnames[:] = []
            continue
        dirnames.sort()
        for name in sorted(filenames):
            p = os.path.join(dirpath, name)
            if p in EXCLUDED or all(part in p for part in EXCLUDED_PARTS):
                continue
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or not st.st_mode & 0o222:
                continue
            if not st.st_mode & 0o444:
                continue  # write-only triggers (drop_caches, compact_memory)
            v = read(p)
            if v is not None:
                out[p] = v
    return out


def glob_dir(root, fn):
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    return [fn(os.path.join(root, n), n) for n in names]


def snapshot():
    s = {}
    s.update(writable_files("/proc/sys"))
    s.update(writable_files("/sys/kernel/mm"))
    for p, n in [(p, n) for p, n in glob_dir("/sys/devices/system/memory", lambda p, n: (p, n))]:
        if n.startswith("memory") and n[6:].isdigit():
            s[p + "/state"] = read(p + "/state")
    for p, n in glob_dir("/sys/block", lambda p, n: (p, n)):
        s[p + "/queue/read_ahead_kb"] = read(p + "/queue/read_ahead_kb")
        if n.startswith("loop"):
            s[p + "/loop/backing_file"] = read(p + "/loop/backing_file")
    for t in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        if os.path.isdir(t + "/instances"):
            s[t + "/instances/"] = " ".join(sorted(os.listdir(t + "/instances")))
            for f in ("tracing_on", "current_tracer", "set_event", "buffer_size_kb"):
                s[t + "/" + f] = read(t + "/" + f)
    mounts = read("/proc/mounts") or ""
    s["/proc/mounts:tracefs"] = "\n".join(
        sorted(l for l in mounts.splitlines() if " tracefs " in l or "fraglab" in l)
    )
    if os.path.isdir("/sys/fs/cgroup"):
        s["/sys/fs/cgroup/"] = " ".join(
            sorted(n for n in os.listdir("/sys/fs/cgroup") if os.path.isdir("/sys/fs/cgroup/" + n))
        )
    return s


def main(argv):
    if len(argv) == 3 and argv[1] == "snapshot":
        s = snapshot()
        tmp = argv[2] + ".tmp"
        with open(tmp, "w") as f:
            json.dump(s, f, indent=0, sort_keys=True)
        os.replace(tmp, argv[2])
        print(f"machine_state: {len(s)} settings in {argv[2]}")
        return 0
    if len(argv) == 4 and argv[1] == "diff":
        with open(argv[2]) as f:
            a = json.load(f)
        with open(argv[3]) as f:
            b = json.load(f)
        changed = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        for k in changed:
            print(f"changed: {k}: {a.get(k)!r} -> {b.get(k)!r}")
        print(f"machine_state: {len(changed)} of {len(a)} settings changed")
        return 1 if changed else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
