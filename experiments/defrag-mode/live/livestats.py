"""Helpers shared by the live-check summaries (summary.py, real-kbuild-summary.py)."""
import statistics


def counter(vmstat, key):
    """A /proc/vmstat counter of a delta dict; `key*` sums every counter starting with key."""
    if key.endswith("*"):
        return sum(v for k, v in vmstat.items() if k.startswith(key[:-1]))
    return vmstat.get(key, 0)


def welch_t(a, b):
    """Welch's t of b against a (0 when undefined)."""
    if len(a) < 2 or len(b) < 2:
        return 0.0
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    return (statistics.mean(b) - statistics.mean(a)) / (va + vb) ** 0.5 if va + vb else 0.0
