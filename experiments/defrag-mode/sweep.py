#!/usr/bin/env python3
"""Sign check of the seed-001 headline rows under one variation of a spec.

Runs the four defrag_mode stages (vanilla, nofragment_only, kswapd_assist, kswapd_watermarks)
of SPEC with the extra overrides (comma-separated KEY=VALUE, as `fraglab compare` takes after
`@`), one run each (15 builds for kbuild-thp.toml), and prints the nine rows of the seed's table
as changes against vanilla, with how many of them agree in sign with the seed (4/5) and the
series (5/5). Usage, from the repository root after `cargo build --release`:

    python3 experiments/defrag-mode/sweep.py NAME SPEC [OVERRIDES]
"""
import csv
import io
import subprocess
import sys

name, spec = sys.argv[1], sys.argv[2]
extra = sys.argv[3] if len(sys.argv) > 3 else ""
D = "vm.defrag_mode=1,model.defrag_stage"


def cfg(label, ov):
    o = ",".join(x for x in [extra, ov] if x)
    return f"{label}={spec}" + (f"@{o}" if o else "")


cmd = ["./target/release/fraglab", "compare", cfg("vanilla", ""),
       cfg("nofrag", f"{D}=nofragment_only"), cfg("assist", f"{D}=kswapd_assist"),
       cfg("wmark", f"{D}=kswapd_watermarks"), "--format", "csv"]
out = subprocess.run(cmd, capture_output=True, text=True)
if out.returncode:
    sys.exit(out.stderr)
rows = {}
for r in csv.DictReader(io.StringIO(out.stdout)):
    rows.setdefault((r["metric"], r["stat"]), {})[r["config"]] = float(r["value"])
# The seed's nine rows and the published direction (-1 down, +1 up); the success rate fell
# with 4/5 (3.51 -> 3.20) and rose with 5/5 (3.51 -> 3.99).
want = [("Hugealloc Time mean (us)", "Amean", -1, -1), ("Hugealloc Time stddev (us)", "Amean", -1, -1),
        ("Kbuild Real time", "Amean", -1, -1), ("Kbuild System time", "Amean", -1, -1),
        ("THP fault alloc", "Amean", 1, 1), ("THP fault fallback", "Amean", -1, -1),
        ("Direct compact fail", "Amean", -1, -1), ("Direct compact success", "Amean", -1, -1),
        ("Direct compact success rate %", "", -1, 1)]
score = {"assist": 0, "wmark": 0}
lines = []
for m, s, sign_assist, sign_wmark in want:
    d = rows[(m, s)]
    v = d["vanilla"]
    parts = [f"{m[:29]:29} {s:6} vanilla {v:11.2f}"]
    for c in ["nofrag", "assist", "wmark"]:
        ch = (d[c] - v) / v * 100 if v else 0.0
        parts.append(f"{c} {ch:+7.2f}%")
        sign = {"assist": sign_assist, "wmark": sign_wmark}.get(c)
        if sign and ch * sign > 0:
            score[c] += 1
    lines.append("  ".join(parts))
print(f"== {name} {extra}: rows agreeing in sign: 4/5 {score['assist']}/9, 5/5 {score['wmark']}/9")
print("\n".join(lines))
