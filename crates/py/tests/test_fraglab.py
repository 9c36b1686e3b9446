"""The fraglab Python package (issue 23, items 1 and 2): run, compare, sweep (local and Ray),
compare_dirs, validate's errors. Small specs: a second or two of the built-in examples.

The tests that compare with the `fraglab` binary find it as $FRAGLAB_BIN (.ci/run sets it)
or on PATH, and skip with the reason where there is none.
"""

import io
import json
import os
import shutil
import subprocess

import pandas as pd
import pytest

import fraglab

KBUILD = "example:kbuild-thp-burst@workload.duration=2s"
KBUILD_DM = "dm=example:kbuild-thp-burst@workload.duration=2s,vm.defrag_mode=1"
PGBENCH = "example:pgbench-checkpoints@workload.duration=2s"


def binary():
    b = os.environ.get("FRAGLAB_BIN") or shutil.which("fraglab")
    if not b:
        pytest.skip("no fraglab binary ($FRAGLAB_BIN or PATH) to compare with")
    return b


@pytest.fixture(scope="module")
def kbuild():
    return fraglab.run("example:kbuild-thp-burst", overrides={"workload.duration": "2s"})


def test_run_timed_frames(kbuild):
    r = kbuild
    assert r.kind == "timed" and r.raw["duration_ns"] == 2_000_000_000
    # Samples: one row per sample, one column per order (no list columns).
    s = r.samples
    assert len(s) == len(r.raw["samples"]) > 0
    for i in range(11):
        assert list(s[f"free_order_{i}"]) == [x["free_by_order"][i] for x in r.raw["samples"]]
    assert list(s["blocks_Movable"]) == [x["blocks_by_type"][1] for x in r.raw["samples"]]
    assert not any(s[c].dtype == object for c in s.columns)
    # The mmtests rows are the printed ones, with their values.
    m = r.mmtests.set_index("metric")["value"]
    assert m["THP fault alloc"] == r.raw["vmstat_delta"]["thp_fault_alloc"] > 0
    assert "Hugealloc Time mean (us)" in m.index
    assert len(r.mmtests) == len(r.text.splitlines()) - 1
    # vmstat deltas.
    v = r.vmstat.set_index("item")["delta"]
    assert v.to_dict() == r.raw["vmstat_delta"]
    # Latency: one row per bucket, the counts add up to each histogram's count.
    lat = r.latency
    for h in r.raw["fault_latency"]:
        rows = lat[(lat["order"] == h["order"]) & (lat["path"] == h["path"])]
        assert len(rows) == len(h["log2_buckets"])
        assert rows["count"].sum() == h["count"]
        assert (rows["hi_ns"] == 2 * rows["lo_ns"]).all()
    # Pageblock maps, long form: a row per block per map, types named, fills 0..9.
    pb = r.pageblocks
    maps = r.raw["pageblock_maps"]
    assert len(pb) == sum(len(m["types"]) for m in maps)
    assert set(pb["type"]) <= set(fraglab.MIGRATETYPES)
    assert pb["fill"].between(0, 9).all()
    first = maps[0]
    assert "".join(pb[pb["t_ns"] == first["t_ns"]]["fill"].astype(str)) == first["fill"]
    assert r.trace is None


def test_run_overrides_seed_and_trace():
    r = fraglab.run(
        "example:kbuild-thp-burst",
        overrides={"workload.duration": "1s", "run.trace": '["kmem:*"]'},
        seed=42,
    )
    assert r.raw["seed"] == 42 and r.raw["duration_ns"] == 1_000_000_000
    t = r.trace
    assert len(t) == len(r.raw["proc_end"]["trace"].splitlines()) > 0
    counts = t["event"].value_counts().to_dict()
    for event, n in counts.items():
        assert r.raw["trace_counts"][event] >= n


def test_run_matches_the_binary(tmp_path):
    b = binary()
    d = tmp_path / "r"
    subprocess.run([b, "compare", KBUILD, "--results-dir", str(d)], check=True, capture_output=True)
    r = fraglab.run("example:kbuild-thp-burst", overrides={"workload.duration": "2s"})
    assert r.json == (d / "kbuild-thp-burst@workload.duration=2s-run1.json").read_text()


def test_run_timeless_and_toml_text(tmp_path):
    r = fraglab.run("example:claim-steal-merge")
    assert r.kind == "timeless" and r.mmtests is None and r.samples.empty
    assert "Node 0" in r.text and r.raw["printed"] == r.text and r.raw["duration_ns"] == 0
    assert len(r.vmstat) > 0 and len(r.pageblocks) > 0
    # The same result JSON as `fraglab run -o x.json`.
    out = tmp_path / "csm.json"
    subprocess.run([binary(), "run", "--example", "claim-steal-merge", "-o", str(out)], check=True, capture_output=True)
    assert r.json == out.read_text()
    text = '[machine]\nmemory = "64MiB"\ndma = false\n\n[[op]]\nalloc = "a"\ncount = 10\ngfp = "GFP_KERNEL"\n\n[[op]]\nprint = "buddyinfo"\n'
    out = fraglab.run(text).text
    assert "10 allocated, 0 failed" in out and "\nNode 0, zone    DMA32" in out
    f = tmp_path / "ops.toml"
    f.write_text(text)
    assert fraglab.run(str(f)).text == fraglab.run(text).text


def test_spec_warnings_are_python_warnings():
    text = '[machine]\nmemory = "64MiB"\ndma = false\n\n[knobs]\n"vm.min_free_kbytes" = 1000000\n\n[[op]]\nprint = "buddyinfo"\n'
    with pytest.warns(fraglab.FraglabWarning, match="min_free_kbytes"):
        fraglab.run(text)


def test_errors_carry_file_line_and_key(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text('[machine]\nmemory = "64MiB"\n\n[[op]]\nalloc = "a"\ncount = 10\norder = 11\n')
    with pytest.raises(fraglab.SpecError) as e:
        fraglab.run(str(f))
    assert isinstance(e.value, ValueError)
    assert str(e.value).startswith(f"{f}:7: key op[0].order:")
    assert (e.value.file, e.value.line, e.value.key) == (str(f), 7, "op[0].order")
    assert str(e.value).endswith(e.value.message)
    with pytest.raises(fraglab.SpecError, match=r"key workload.nope"):
        fraglab.run("example:kbuild-thp-burst", overrides={"workload.nope": 1})
    with pytest.raises(fraglab.FraglabError, match="no built-in example"):
        fraglab.run("example:nope")
    with pytest.raises(fraglab.FraglabError, match="no such file"):
        fraglab.run(str(tmp_path / "missing.toml"))
    with pytest.raises(fraglab.FraglabError, match="timed run"):
        fraglab.compare(["example:claim-steal-merge"])
    with pytest.raises(fraglab.FraglabError, match="labelled"):
        fraglab.compare([KBUILD, KBUILD])


def test_compare_matches_the_binary():
    b = binary()
    configs = [KBUILD, KBUILD_DM]
    out = subprocess.run(
        [b, "compare", *configs, "--runs", "2", "--format", "json"], check=True, capture_output=True, text=True
    ).stdout
    df = fraglab.compare(configs, runs=2, jobs=2)
    assert df.attrs["report"] == json.loads(out)
    assert df.attrs["configs"] == ["kbuild-thp-burst@workload.duration=2s", "dm"]
    assert len(df) == 2 * len(df.attrs["report"]["rows"])
    row = df[(df["metric"] == "THP fault alloc") & (df["stat"] == "Amean")]
    assert list(row["baseline"]) == [True, False]
    assert row["change_pct"].iloc[0] == 0
    base, dm = row["value"]
    if base:
        assert row["change_pct"].iloc[1] == pytest.approx((dm - base) * 100 / base)


def test_grid_and_local_sweep():
    configs = fraglab.grid(PGBENCH, {"vm.defrag_mode": [0, 1], "vm.swappiness": [60]})
    assert configs == [
        PGBENCH + ",vm.defrag_mode=0,vm.swappiness=60",
        PGBENCH + ",vm.defrag_mode=1,vm.swappiness=60",
    ]
    df = fraglab.sweep(("example:pgbench-checkpoints@workload.duration=1s", {"vm.defrag_mode": [0, 1]}), runs=2).table
    assert df.attrs["configs"] == [
        "pgbench-checkpoints@workload.duration=1s,vm.defrag_mode=0",
        "pgbench-checkpoints@workload.duration=1s,vm.defrag_mode=1",
    ]
    assert df.attrs["runs"] == 2
    with pytest.raises(fraglab.FraglabError, match="non-empty list"):
        fraglab.grid(PGBENCH, {"vm.defrag_mode": []})
    with pytest.raises(fraglab.FraglabError, match="backend"):
        fraglab.sweep([KBUILD], backend="slurm")


def test_compare_dirs_merges_results_made_elsewhere(tmp_path):
    b = binary()
    d = tmp_path / "res"
    subprocess.run(
        [b, "compare", "base=" + PGBENCH, "--runs", "2", "--results-dir", str(d)], check=True, capture_output=True
    )
    merged = fraglab.compare_dirs(d)
    direct = fraglab.sweep(["base=" + PGBENCH], runs=2).table
    assert merged.attrs["report"] == direct.attrs["report"]
    # The same table but for the sweep's parameter column (the configuration's @KEY).
    pd.testing.assert_frame_equal(merged, direct.drop(columns=["workload.duration"]))
    # The same run twice is refused, naming both files.
    with pytest.raises(fraglab.FraglabError, match="the same run twice"):
        fraglab.compare_dirs([d, d])


def test_validate_needs_the_binary(monkeypatch, tmp_path):
    monkeypatch.delenv("FRAGLAB_BIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(fraglab.FraglabError, match="FRAGLAB_BIN"):
        fraglab.validate("example:kbuild-thp-burst")
    with pytest.raises(fraglab.FraglabError, match="one of them"):
        fraglab.validate()


def test_validate_reports_the_binarys_error(tmp_path):
    b = binary()
    f = tmp_path / "bad.toml"
    f.write_text("[machine]\nmemory = 1\n")
    with pytest.raises(fraglab.FraglabError, match="bad.toml:2"):
        fraglab.validate(str(f), args=["--floor", "0"])
    del b


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray", reason="ray is not installed")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_ray_sweep_equals_local(ray_cluster):
    configs = [KBUILD, KBUILD_DM]
    on_ray = fraglab.sweep(configs, runs=3, backend="ray")
    local = fraglab.sweep(configs, runs=3, backend="local", jobs=2)
    assert on_ray.attrs["runs"] == 3 and on_ray.attrs["configs"] == local.attrs["configs"]
    assert on_ray.attrs["report"] == local.attrs["report"]
    pd.testing.assert_frame_equal(on_ray.table, local.table)
    # The per-run results too: the same runs, parameters and metrics, the same result JSONs.
    assert on_ray.params == local.params == ["workload.duration", "vm.defrag_mode"]
    pd.testing.assert_frame_equal(on_ray.runs.drop(columns="result"), local.runs.drop(columns="result"))
    assert [r.json for r in on_ray.results] == [r.json for r in local.results]
    assert len(on_ray.runs) == 6 and on_ray.runs["seed"].tolist() == [1, 2, 3] * 2
    # Three seeds per configuration: three per-run values of each run-level metric.
    row = next(r for r in on_ray.attrs["report"]["rows"] if r["metric"] == "THP fault alloc" and r["stat"] == "Amean")
    assert [len(p) for p in row["per_run"]] == [3, 3]


def test_blame_frame_ranks_as_the_binary_does(tmp_path):
    """Result.blame (issue 37): None with blame off; with it on, one row per source in the
    order `fraglab blame --format csv` ranks them, with the same counts."""
    short = {"workload.duration": "2s"}
    assert fraglab.run("example:kbuild-thp-burst", overrides=short).blame is None
    out = tmp_path / "r.json"
    r = fraglab.run("example:kbuild-thp-burst", overrides={**short, "run.blame": "true"}, output=str(out))
    df = r.blame
    assert list(df.columns[:3]) == ["source", "mixed_blocks", "compact_blocked_blocks"]
    assert len(df) > 1 and "boot" in set(df["source"])
    csv = subprocess.run(
        [binary(), "blame", "--format", "csv", str(out)], check=True, capture_output=True, text=True
    ).stdout
    want = pd.read_csv(io.StringIO(csv))
    assert list(df["source"]) == list(want["source"])
    for col in ["mixed_blocks", "compact_blocked_blocks", "thp_fault_fail", "steal", "claim_partial", "compact_blocked"]:
        assert list(df[col]) == list(want[col]), col
