"""Warm checkpoints from Python (issue 37 item 3, docs/checkpoints.md): a run that writes one,
runs, sweeps and a tune that continue from it. A continuation with the same settings is the
uninterrupted run."""

import os

import pytest

import fraglab

SPEC = "example:kbuild-thp-burst"
BASE = {"workload.duration": "4s"}


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    d = tmp_path_factory.mktemp("ckpt")
    path = os.path.join(d, "warm.ckpt")
    straight = fraglab.run(SPEC, overrides=BASE)
    writer = fraglab.run(SPEC, overrides={**BASE, "run.checkpoint_at": "2s", "run.checkpoint_file": path})
    return straight, writer, path


def test_the_writing_run_reports_its_checkpoint_and_is_the_same_run(warm):
    straight, writer, path = warm
    c = writer.raw["checkpoint"]
    assert c["file"] == path and c["t_ns"] >= 2_000_000_000 and c["bytes"] == os.path.getsize(path)
    raw = dict(writer.raw)
    del raw["checkpoint"]
    assert raw == straight.raw


def test_run_from_a_checkpoint_is_the_uninterrupted_run(warm):
    straight, _, path = warm
    r = fraglab.run(SPEC, overrides=BASE, checkpoint=path)
    assert r.raw == straight.raw
    # Another knob from the checkpoint on: the run goes its own way.
    other = fraglab.run(SPEC, overrides={**BASE, "vm.defrag_mode": 1}, checkpoint=path)
    assert other.raw["vmstat_delta"] != straight.raw["vmstat_delta"]


def test_a_checkpoint_refuses_another_workload(warm):
    _, _, path = warm
    with pytest.raises(fraglab.FraglabError, match=r"\[workload\] differs"):
        fraglab.run(SPEC, overrides={"workload.duration": "5s"}, checkpoint=path)


def test_sweep_from_a_checkpoint(warm):
    straight, _, path = warm
    cfg = SPEC + "@workload.duration=4s"
    s = fraglab.sweep([f"v={cfg}", f"dm={cfg},vm.defrag_mode=1"], checkpoint=path)
    v = s.runs.set_index("config").loc["v", "result"]
    assert v.raw == straight.raw
    with pytest.raises(fraglab.FraglabError, match="runs must be 1"):
        fraglab.sweep([cfg], runs=2, checkpoint=path)


def test_tune_from_a_checkpoint(warm):
    straight, _, path = warm
    t = fraglab.tune(
        SPEC,
        space={"vm.defrag_mode": [0, 1]},
        objective="THP fault alloc",
        overrides=BASE,
        backend="local",
        checkpoint=path,
    )
    assert len(t.trials) == 2 and t.best["vm.defrag_mode"] in (0, 1)
    # The trial with the writer's settings is the uninterrupted run.
    by_mode = t.trials.set_index("vm.defrag_mode")["THP fault alloc"]
    assert by_mode[0] == straight.raw["vmstat_delta"]["thp_fault_alloc"]
