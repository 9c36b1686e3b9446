"""fraglab.tune (issue 37, item 4): the local search finds the known best of a tiny space, its
trials table, constraints, determinism, bad keys, the command line, and a Ray Tune search on a
local cluster (skipped where ray[tune] is not installed). One simulated second per run.
"""

import json
import math
import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest

import fraglab

SPEC = "example:kbuild-thp-burst@workload.duration=1s"
THP = {"transparent_hugepage/enabled": ["never", "madvise"]}


@pytest.fixture(scope="module")
def tiny():
    return fraglab.tune(SPEC, {**THP, "vm.defrag_mode": [0, 1]}, "THP fault alloc", backend="local", jobs=2)


def test_local_finds_the_known_best_of_a_tiny_space(tiny):
    # THP never allocates no THP at all: madvise (the example's bursts madvise) is best.
    assert tiny.best["transparent_hugepage/enabled"] == "madvise"
    assert tiny.best_value > 0
    t = tiny.trials
    assert (t[t["transparent_hugepage/enabled"] == "never"]["THP fault alloc"] == 0).all()
    assert tiny.best_value == t["THP fault alloc"].max()
    # A categorical space within the budget is searched whole, in itertools.product order.
    assert tiny.search == "grid" and tiny.backend == "local"
    assert list(zip(t["transparent_hugepage/enabled"], t["vm.defrag_mode"])) == [
        ("never", 0),
        ("never", 1),
        ("madvise", 0),
        ("madvise", 1),
    ]
    # The objective is the run's own: what fraglab.run gives for the best settings.
    r = fraglab.run("example:kbuild-thp-burst", overrides={"workload.duration": "1s", **tiny.best})
    assert r.mmtests.set_index("metric")["value"]["THP fault alloc"] == tiny.best_value


def test_trials_table_and_cost(tiny):
    t = tiny.trials
    assert list(t.columns) == [
        "trial",
        "transparent_hugepage/enabled",
        "vm.defrag_mode",
        "THP fault alloc",
        "feasible",
        "seeds",
        "simulated_s",
        "wall_s",
        "cpu_s",
    ]
    assert list(t["trial"]) == [0, 1, 2, 3] and t["feasible"].all()
    assert all(s == [1] for s in t["seeds"]) and (t["simulated_s"] == 1.0).all()
    c = tiny.cost
    assert (c["trials"], c["runs"], c["simulated_s"], c["backend"], c["search"]) == (4, 4, 4.0, "local", "grid")
    assert c["wall_s"] > 0 and c["cpu_s"] > 0
    assert "madvise" in repr(tiny)


def test_constraints_make_trials_infeasible_never_best():
    t = fraglab.tune(
        SPEC,
        THP,
        "THP fault alloc",
        constraints={"THP fault alloc": ("<", 1)},  # only THP never meets it
        backend="local",
    )
    assert list(t.trials["feasible"]) == [True, False]
    assert t.trials["THP fault alloc < 1"].tolist() == [True, False]
    assert t.best == {"transparent_hugepage/enabled": "never"} and t.best_value == 0
    # A callable on each run's Result, a metric of the printed rows, and nothing feasible.
    none = fraglab.tune(
        SPEC,
        THP,
        lambda r: r.raw["vmstat_delta"]["thp_fault_alloc"],
        mode="min",
        constraints=[lambda r: False, ("Hugealloc Time mean (us)", ">", 0)],
        backend="local",
        jobs=1,
    )
    assert none.best is None and math.isnan(none.best_value)
    assert {"objective", "constraint:0", "Hugealloc Time mean (us)", "Hugealloc Time mean (us) > 0"} <= set(
        none.trials.columns
    )
    assert not none.trials["feasible"].any() and none.trials["Hugealloc Time mean (us) > 0"].all()
    assert (none.trials["cpu_s"] > 0).all()  # exact per trial with jobs=1
    with pytest.raises(fraglab.FraglabError, match="no such metric"):
        fraglab.tune(SPEC, THP, "THP fault alloc", constraints={"Nope": ("<", 1)}, backend="local")


def test_random_search_is_deterministic_with_a_seed():
    space = {"vm.compaction_proactiveness": (0, 100), "vm.defrag_mode": [0, 1], **THP}
    a = fraglab.tune(SPEC, space, "Hugealloc Time mean (us)", mode="min", budget=3, seed=7, backend="local", runs_per_trial=2)
    b = fraglab.tune(SPEC, space, "Hugealloc Time mean (us)", mode="min", budget=3, seed=7, backend="local", runs_per_trial=2)
    assert a.search == "random" and len(a.trials) == 3
    timing = ["wall_s", "cpu_s"]
    pd.testing.assert_frame_equal(a.trials.drop(columns=timing), b.trials.drop(columns=timing))
    assert a.best == b.best and a.best_value == b.best_value
    assert all(s == [1, 2] for s in a.trials["seeds"]) and a.cost["runs"] == 6
    assert a.trials["vm.compaction_proactiveness"].between(0, 100).all()
    c = fraglab.tune(SPEC, space, "Hugealloc Time mean (us)", mode="min", budget=3, seed=8, backend="local")
    assert c.trials[list(space)].values.tolist() != a.trials[list(space)].values.tolist()
    # A categorical space larger than the budget: distinct points.
    d = fraglab.tune(SPEC, {"vm.defrag_mode": [0, 1], **THP, "vm.swappiness": [10, 60]}, "THP fault alloc", budget=5, backend="local")
    pts = d.trials[["vm.defrag_mode", "transparent_hugepage/enabled", "vm.swappiness"]].values.tolist()
    assert len(pts) == 5 and len({tuple(p) for p in pts}) == 5


def test_bad_keys_and_arguments():
    with pytest.raises(fraglab.SpecError, match="vm.nope") as e:
        fraglab.tune(SPEC, {"vm.defrag_mode": [0, 1], "vm.nope": [1]}, "THP fault alloc", backend="local")
    assert "vm.nope" in e.value.key
    with pytest.raises(fraglab.SpecError, match="model.defrag_stage"):
        fraglab.tune(SPEC, {"model.defrag_stage": ["vanilla", "bogus"]}, "THP fault alloc", backend="local")
    with pytest.raises(fraglab.FraglabError, match="no such metric"):
        fraglab.tune(SPEC, THP, "THP nope", backend="local")
    with pytest.raises(fraglab.FraglabError, match="budget"):
        fraglab.tune(SPEC, {"vm.compaction_proactiveness": (0, 100)}, "THP fault alloc", backend="local")
    with pytest.raises(fraglab.FraglabError, match="mode"):
        fraglab.tune(SPEC, THP, "THP fault alloc", mode="best")
    with pytest.raises(fraglab.FraglabError, match="empty"):
        fraglab.tune(SPEC, {"vm.defrag_mode": []}, "THP fault alloc")


def test_plot_sensitivity(tiny):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    import matplotlib

    matplotlib.use("Agg")
    fig = tiny.plot_sensitivity()
    assert len(fig.axes) == 2 and fig.axes[0].get_title() == "transparent_hugepage/enabled"


def test_command_line(tmp_path):
    out = tmp_path / "t.json"
    p = subprocess.run(
        [sys.executable, "-m", "fraglab.tune", SPEC, "--space", "transparent_hugepage/enabled=never,madvise",
         "--objective", "THP fault alloc", "--backend", "local", "--json", str(out)],
        capture_output=True, text=True,
    )
    assert p.returncode == 0, p.stderr
    assert "best (max THP fault alloc)" in p.stdout and "madvise" in p.stdout
    d = json.loads(out.read_text())
    assert d["best"] == {"transparent_hugepage/enabled": "madvise"} and len(d["trials"]) == 2
    bad = subprocess.run(
        [sys.executable, "-m", "fraglab.tune", SPEC, "--space", "vm.nope=1", "--objective", "THP fault alloc",
         "--backend", "local"],
        capture_output=True, text=True,
    )
    assert bad.returncode == 1 and "vm.nope" in bad.stderr


def test_ray_tune_on_a_local_cluster(tiny, tmp_path):
    pytest.importorskip("ray.tune", reason="ray[tune] is not installed")
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        t = fraglab.tune(SPEC, {**THP, "vm.defrag_mode": [0, 1]}, "THP fault alloc", backend="ray")
        assert (t.backend, t.search) == ("ray", "grid")
        # The same grid, put in the local order: the same table but for the timings.
        timing = ["wall_s", "cpu_s"]
        pd.testing.assert_frame_equal(t.trials.drop(columns=timing), tiny.trials.drop(columns=timing))
        assert t.best == tiny.best and (t.trials["cpu_s"] > 0).all()
        # A random search within a budget.
        r = fraglab.tune(
            SPEC, {"vm.compaction_proactiveness": (0, 100), **THP}, "THP fault alloc", budget=2, seed=1, backend="ray"
        )
        assert r.search in ("random", "optuna") and len(r.trials) == 2 and r.cost["trials"] == 2
        # Every trial from one checkpoint (issue 37 item 3), on the cluster: the trial with the
        # writer's settings is the uninterrupted run.
        ck = str(tmp_path / "warm.ckpt")
        fraglab.run(
            "example:kbuild-thp-burst",
            overrides={"workload.duration": "1s", "run.checkpoint_at": "500ms", "run.checkpoint_file": ck},
        )
        c = fraglab.tune(SPEC, {"vm.defrag_mode": [0, 1]}, "THP fault alloc", backend="ray", checkpoint=ck)
        assert c.backend == "ray" and len(c.trials) == 2
        straight = tiny.trials.set_index(["transparent_hugepage/enabled", "vm.defrag_mode"])["THP fault alloc"]
        assert c.trials.set_index("vm.defrag_mode")["THP fault alloc"][0] == straight[("madvise", 0)]
    finally:
        if started:
            ray.shutdown()


def test_fraglab_tune_runs_the_module_and_passes_its_exit_code(tmp_path):
    b = os.environ.get("FRAGLAB_BIN") or shutil.which("fraglab")
    if not b:
        pytest.skip("no fraglab binary ($FRAGLAB_BIN or PATH)")
    env = {**os.environ, "FRAGLAB_PYTHON": sys.executable}
    args = [b, "tune", SPEC, "--space", "transparent_hugepage/enabled=never,madvise", "--objective", "THP fault alloc",
            "--backend", "local"]
    p = subprocess.run(args, capture_output=True, text=True, env=env)
    assert p.returncode == 0 and "madvise" in p.stdout, p.stderr
    # Nothing feasible: the module's exit code 3, passed through.
    p = subprocess.run(args + ["--constraint", "THP fault alloc<0"], capture_output=True, text=True, env=env)
    assert p.returncode == 3, p.stderr
    # A Python without the package: how to install it.
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    p = subprocess.run(args, capture_output=True, text=True, env={**env, "FRAGLAB_PYTHON": str(fake)})
    assert p.returncode == 1 and "pip install ./crates/py" in p.stderr


def test_tune_forks_its_trials_warm(fraglab_binary):
    spec = "example:kbuild-thp-burst@workload.duration=6s"
    space = {"vm.defrag_mode": [0, 1], "model.policy": ["linux-6.18", "contiguitas"]}
    forked = fraglab.tune(spec, space, "THP fault alloc", fork_at="3s")
    assert len(forked.trials) == 4
    assert forked.cost["backend"] == "local"
    # The first trial (the grid's first point, the base's own settings) is the run from boot.
    plain = fraglab.tune(spec, {"vm.defrag_mode": [0]}, "THP fault alloc", backend="local")
    first = forked.trials[(forked.trials["vm.defrag_mode"] == 0) & (forked.trials["model.policy"] == "linux-6.18")]
    assert float(first["THP fault alloc"].iloc[0]) == float(plain.trials["THP fault alloc"].iloc[0])
    with pytest.raises(fraglab.FraglabError, match="not \\[workload\\]"):
        fraglab.tune(spec, {"workload.duration": ["5s", "6s"]}, "THP fault alloc", fork_at="2s")
