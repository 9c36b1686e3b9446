#!/usr/bin/env python3
"""The best THP/defrag/compaction settings for thpchallenge with its fio background, found by
fraglab.tune on a local Ray cluster, against the best of the four defrag_mode stages run
directly (fraglab.sweep) on the same objective and seeds. See README.md here.

    python experiments/tune/tune.py [--budget 24] [--runs 2] [--backend ray|local] [--json OUT]
"""

import argparse
import datetime
import json
import os
import pathlib
import subprocess
import time

import fraglab

HERE = pathlib.Path(__file__).resolve().parent
SPEC = str(HERE.parent / "defrag-mode" / "thpchallenge-fio.toml")
# 30 s simulated (fio alone for the first 10 s, then thpchallenge beside it): ~2-3 CPU s a run.
OVERRIDES = {"workload.duration": "30s", "workload.thpchallenge.start": "10s"}
OBJECTIVE = "thpchallenge huge-pct"  # the share of thpchallenge's faults that got a huge page
STAGES = {  # the four stages of seed 001 (experiments/defrag-mode), the spec's other knobs
    "vanilla": {"vm.defrag_mode": 0, "model.defrag_stage": "vanilla"},
    "nofragment_only": {"vm.defrag_mode": 1, "model.defrag_stage": "nofragment_only"},
    "kswapd_assist": {"vm.defrag_mode": 1, "model.defrag_stage": "kswapd_assist"},
    "kswapd_watermarks": {"vm.defrag_mode": 1, "model.defrag_stage": "kswapd_watermarks"},
}
SPACE = {
    "vm.defrag_mode": [0, 1],
    "model.defrag_stage": ["vanilla", "nofragment_only", "kswapd_assist", "kswapd_watermarks"],
    "transparent_hugepage/defrag": ["always", "defer", "defer+madvise", "madvise", "never"],
    "vm.compaction_proactiveness": [0, 20, 60],
}
# The spec's own THP defrag and the kernel's default proactiveness: the stages as the spec runs them.
DEFAULTS = {"transparent_hugepage/defrag": "madvise", "vm.compaction_proactiveness": 20}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=24)
    ap.add_argument("--runs", type=int, default=2, help="runs (seeds) per trial and per stage")
    ap.add_argument("--backend", default="ray", choices=["ray", "local"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the trials and the stages' values here")
    a = ap.parse_args()

    if a.backend == "ray":
        import ray

        ray.init(include_dashboard=False, log_to_driver=False)  # no address: a local cluster
    points = [{**s, **DEFAULTS} for s in STAGES.values()]
    t = fraglab.tune(
        SPEC,
        SPACE,
        OBJECTIVE,
        mode="max",
        constraints={"OOM kills": ("==", 0)},
        budget=a.budget,
        backend=a.backend,
        seed=a.seed,
        runs_per_trial=a.runs,
        overrides=OVERRIDES,
        points_to_evaluate=points,
    )

    # The four stages run directly, on the same seeds (the spec's, +1, ...).
    w0 = time.monotonic()
    s = fraglab.sweep(
        [f"{name}={SPEC}@" + ",".join(f"{k}={v}" for k, v in {**OVERRIDES, **st, **DEFAULTS}.items())
         for name, st in STAGES.items()],
        runs=a.runs,
        backend=a.backend,
    )
    sweep_wall = time.monotonic() - w0
    # The objective as tune takes it: the run's compare-table value (unrounded), the mean of the runs.
    stage_values = s.runs.groupby("config")[OBJECTIVE].mean().to_dict()
    stage_values = {name: stage_values[name] for name in STAGES}
    stage_seeds = s.runs.groupby("config")["seed"].apply(list).to_dict()
    best_stage = max(stage_values, key=stage_values.get)

    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE).stdout.strip()
    print(f"# {datetime.date.today()} at {head}, backend {t.backend} ({t.search}), {os.cpu_count()} CPUs")
    cols = ["trial", *SPACE, OBJECTIVE, "feasible", "seeds"]
    print(t.trials.sort_values(OBJECTIVE, ascending=False)[cols].to_markdown(index=False)
          if _has_tabulate() else t.trials.sort_values(OBJECTIVE, ascending=False)[cols].to_string(index=False))
    c = t.cost
    print(f"\ntuner: {c['trials']} trials, {c['runs']} runs, {c['simulated_s']:.0f} s simulated, "
          f"{c['wall_s']:.1f} s wall, {c['cpu_s']:.1f} CPU s (the trials' processes and this one)")
    print(f"tuner best: {t.best_value:.2f} at {t.best}")
    print(f"stages run directly ({a.runs} runs each, seeds {stage_seeds['vanilla']}, {sweep_wall:.1f} s wall): "
          + ", ".join(f"{k} {v:.2f}" for k, v in stage_values.items()))
    print(f"best stage: {best_stage} {stage_values[best_stage]:.2f}; tuner - best stage = "
          f"{t.best_value - stage_values[best_stage]:+.2f}")
    assert t.best_value >= stage_values[best_stage], "the tuner found worse settings than a stage"
    if a.json:
        d = t.to_dict()
        d["stages"] = stage_values
        d["sweep_wall_s"] = sweep_wall
        pathlib.Path(a.json).write_text(json.dumps(d, indent=2) + "\n")


def _has_tabulate():
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    main()
