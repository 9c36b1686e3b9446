"""The fraglab Python package for notebooks (issue 36, item 4): sweep's per-run results and
grid-parameter columns, SpecError's file/line/key from every entry point, Ctrl-C (in a script
and in a Jupyter kernel) stopping run/sweep at once without partial files, __version__, type
hints and docstrings. Small specs: a second of the built-in examples; the interrupted runs are
long ones (1000 kbuild iterations, half a minute) stopped after ~2 s.
"""

import importlib.metadata
import inspect
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import textwrap
import time
import typing

import pandas as pd
import pytest

import fraglab

PGBENCH = "example:pgbench-checkpoints@workload.duration=1s"
KBUILD = "example:kbuild-thp-burst@workload.duration=3s"
# Half a minute of simulation and more (the run stops at its 10 min duration at the latest).
LONG = {"workload.kbuild.iterations": 1000}
LONG_CONFIG = "example:kbuild-thp-burst@workload.kbuild.iterations=1000"
REPO = pathlib.Path(__file__).resolve().parents[3]


# 1. sweep: the per-run results and a column per grid parameter.


@pytest.fixture(scope="module")
def grid_sweep():
    return fraglab.sweep((KBUILD, {"vm.defrag_mode": [0, 1], "vm.swappiness": [10, 60]}), runs=2, jobs=2)


def test_sweep_table_has_a_column_per_grid_parameter(grid_sweep):
    s = grid_sweep
    t = s.table
    assert isinstance(t, pd.DataFrame)
    assert s.params == ["workload.duration", "vm.defrag_mode", "vm.swappiness"]
    assert list(t.columns[:6]) == ["metric", "stat", "config", "workload.duration", "vm.defrag_mode", "vm.swappiness"]
    # Each row's parameters are its configuration's, typed as given (ints stay ints).
    for _, row in t.drop_duplicates("config").iterrows():
        assert row["config"].endswith(f"vm.defrag_mode={row['vm.defrag_mode']},vm.swappiness={row['vm.swappiness']}")
        assert row["workload.duration"] == "3s"
    assert t["vm.defrag_mode"].dtype.kind == "i" and t["vm.swappiness"].dtype.kind == "i"
    # groupby on a parameter: two configurations per value, every metric and stat of each.
    g = t.groupby("vm.defrag_mode")
    assert sorted(g.groups) == [0, 1]
    per_config = len(t) // 4
    assert g.size().tolist() == [2 * per_config, 2 * per_config]
    assert set(g.get_group(1)["config"]) == {c for c in s.configs if "vm.defrag_mode=1" in c}
    # The table is compare's: its values come from the runs.
    assert t.attrs["runs"] == 2 and t.attrs["configs"] == s.configs
    assert t.attrs["report"] == s.report


def test_sweep_runs_are_full_results_as_run_returns_them(grid_sweep):
    s = grid_sweep
    runs = s.runs
    assert len(runs) == 4 * 2 == len(s.results)
    assert list(runs.columns[:6]) == ["config", "run", "seed", "workload.duration", "vm.defrag_mode", "vm.swappiness"]
    assert runs.columns[-1] == "result"
    assert runs["run"].tolist() == [1, 2] * 4 and runs["seed"].tolist() == [1, 2] * 4
    for (_, row), res in zip(runs.iterrows(), s.results):
        assert row["result"] is res and isinstance(res, fraglab.Result) and res.kind == "timed"
        # The same result, byte for byte, as run() of that configuration and seed.
        alone = fraglab.run(
            "example:kbuild-thp-burst",
            overrides={"workload.duration": "3s", "vm.defrag_mode": row["vm.defrag_mode"], "vm.swappiness": row["vm.swappiness"]},
            seed=row["seed"],
        )
        assert res.json == alone.json and res.text == alone.text
        assert res.raw["seed"] == row["seed"]
        # A column per metric of the table: the run's own value.
        vm = res.raw["vmstat_delta"]
        assert row["THP fault alloc"] == vm["thp_fault_alloc"] > 0
        assert row["Pages kswapd scanned"] == vm["pgscan_kswapd"]
        m = res.mmtests.set_index("metric")["value"]
        assert row["Hugealloc Time (us)"] == pytest.approx(m["Hugealloc Time mean (us)"], abs=0.005)
    assert set(runs.columns) == {*runs.columns[:6], *s.table.metric, "result"}
    assert runs["Pages kswapd scanned"].nunique() > 1, "the seeds make a difference"
    # Per-run values averaged: the table's Amean (one sample per run in 3 s).
    amean = s.table[s.table.stat == "Amean"]
    for metric in set(amean.metric):
        per_run = runs.groupby("config")[metric].mean()
        center = amean[amean.metric == metric].set_index("config")["value"]
        pd.testing.assert_series_equal(per_run.sort_index(), center.sort_index(), check_names=False)
    assert runs.groupby("vm.defrag_mode")["Pages kswapd scanned"].mean().index.tolist() == [0, 1]


def test_sweep_result_still_reads_as_the_table(grid_sweep):
    # Code written when sweep returned the table: attributes, indexing and len fall through.
    s = grid_sweep
    assert len(s) == len(s.table)
    assert s.attrs["configs"] == s.configs
    sel = s[(s.metric == "THP fault alloc") & (s.stat == "Amean")]
    assert len(sel) == 4 and list(sel["config"]) == s.configs
    assert "SweepResult" in repr(s) and "<table" in s._repr_html_()
    with pytest.raises(AttributeError):
        s.no_such_column_or_method


def test_sweep_of_labelled_configs_and_results_dir(tmp_path):
    d = tmp_path / "res"
    s = fraglab.sweep(["base=" + PGBENCH, "dm=" + PGBENCH + ",vm.defrag_mode=1"], runs=2, results_dir=d)
    assert s.params == ["workload.duration", "vm.defrag_mode"]
    by_config = s.table.drop_duplicates("config").set_index("config")["vm.defrag_mode"]
    assert pd.isna(by_config["base"]) and by_config["dm"] == 1
    # The files `fraglab compare --results-dir` writes, each the run's result, nothing else.
    assert sorted(os.listdir(d)) == ["base-run1.json", "base-run2.json", "dm-run1.json", "dm-run2.json"]
    for _, row in s.runs.iterrows():
        assert (d / f"{row['config']}-run{row['run']}.json").read_text() == row["result"].json
    # compare_dirs reads them back into the same table (without the parameter columns).
    pd.testing.assert_frame_equal(fraglab.compare_dirs(d), s.table.drop(columns=s.params))


def test_compare_has_the_parameter_columns_too():
    t = fraglab.compare([PGBENCH, PGBENCH + ",vm.defrag_mode=1"])
    assert isinstance(t, pd.DataFrame)
    assert list(t.columns[:5]) == ["metric", "stat", "config", "workload.duration", "vm.defrag_mode"]


# 2. SpecError, with file, line and key, from every entry point.


@pytest.fixture()
def bad_spec(tmp_path):
    f = tmp_path / "bad.toml"
    text = (REPO / "examples" / "pgbench-checkpoints.toml").read_text()
    text = text.replace('clients = 16', 'clients = "many"')
    assert 'clients = "many"' in text
    f.write_text(text)
    line = 1 + text.splitlines().index('clients = "many"')
    return f, line


def check_spec_error(e, file, line, key):
    assert isinstance(e, fraglab.SpecError) and isinstance(e, fraglab.FraglabError) and isinstance(e, ValueError)
    assert (e.file, e.line, e.key) == (file, line, key)
    # The message names them.
    msg = str(e)
    assert file in msg
    if line is not None:
        assert f"{file}:{line}:" in msg
    if key is not None:
        assert f"key {key}" in msg or key in msg
    assert e.message and e.message in msg


@pytest.mark.parametrize(
    "call, suffix",
    [
        (lambda f: fraglab.run(str(f)), ""),
        (lambda f: fraglab.run(f), ""),
        (lambda f: fraglab.run(str(f), overrides={"vm.swappiness": 10}), " [vm.swappiness=10]"),
        (lambda f: fraglab.compare([str(f)]), ""),
        (lambda f: fraglab.sweep([PGBENCH, "bad=" + str(f)], backend="ray"), ""),
        (lambda f: fraglab.sweep((str(f), {"vm.defrag_mode": [0, 1]})), " [vm.defrag_mode=0]"),
    ],
    ids=["run", "run-pathlike", "run-overrides", "compare", "sweep-ray", "sweep-grid"],
)
def test_spec_error_from_every_entry_point(bad_spec, call, suffix):
    # Raised before anything runs (the Ray sweep starts no cluster).
    f, line = bad_spec
    with pytest.raises(fraglab.SpecError) as e:
        call(f)
    check_spec_error(e.value, str(f) + suffix, line, "workload.pgbench[0].clients")


def test_spec_error_fields_where_some_are_unknown(tmp_path):
    # TOML syntax: a line, no key.
    f = tmp_path / "syntax.toml"
    f.write_text('[machine]\nmemory = "64MiB"\nthis is not toml\n')
    with pytest.raises(fraglab.SpecError) as e:
        fraglab.run(str(f))
    assert e.value.file == str(f) and e.value.line == 3 and e.value.key is None
    # No such file / example: the file, no line, no key.
    with pytest.raises(fraglab.SpecError) as e:
        fraglab.run(str(tmp_path / "missing.toml"))
    check_spec_error(e.value, str(tmp_path / "missing.toml"), None, None)
    with pytest.raises(fraglab.SpecError) as e:
        fraglab.compare(["example:nope"])
    assert (e.value.file, e.value.line, e.value.key) == ("examples/nope.toml", None, None)
    assert "no built-in example" in str(e.value)
    # An override that cannot apply: its key, no line.
    for call in (
        lambda: fraglab.run("example:kbuild-thp-burst", overrides={"workload.kbuild[7].jobs": 1}),
        lambda: fraglab.sweep(("example:kbuild-thp-burst", {"workload.kbuild[7].jobs": [1]})),
    ):
        with pytest.raises(fraglab.SpecError) as e:
            call()
        assert e.value.key == "workload.kbuild[7].jobs" and e.value.line is None
        assert e.value.file.startswith("examples/kbuild-thp-burst.toml [")
    # An unknown key through an override: the line of the overridden text.
    with pytest.raises(fraglab.SpecError) as e:
        fraglab.sweep(("example:kbuild-thp-burst", {"workload.nope": [1]}))
    assert e.value.key == "workload.nope" and e.value.line > 0
    # Not a spec error: a run that needs a [workload], a malformed configuration.
    with pytest.raises(fraglab.FraglabError) as e:
        fraglab.compare(["example:claim-steal-merge"])
    assert not isinstance(e.value, fraglab.SpecError)
    with pytest.raises(fraglab.FraglabError) as e:
        fraglab.compare(["example:kbuild-thp-burst@nope"])
    assert not isinstance(e.value, fraglab.SpecError)


def test_validate_raises_spec_error_from_the_binarys_message(bad_spec):
    b = os.environ.get("FRAGLAB_BIN")
    if not b:
        pytest.skip("no fraglab binary ($FRAGLAB_BIN) to run")
    f, line = bad_spec
    # The spec is checked before anything touches the kernel.
    with pytest.raises(fraglab.SpecError) as e:
        fraglab.validate(str(f), args=["--floor", "0"])
    assert (e.value.file, e.value.line, e.value.key) == (str(f), line, "workload.pgbench[0].clients")


# 3. Ctrl-C: run and sweep stop at once, in a script and in Jupyter, and write no partial file.

CHILD = """
import signal, sys, time
# As in an interactive script (a shell's background job would start with SIGINT ignored).
signal.signal(signal.SIGINT, signal.default_int_handler)
import fraglab
print("started", flush=True)
{call}
print("finished", flush=True)
"""


def interrupt(call, ready, tmp_path):
    """Runs `call` in a Python child, waits until `ready()` (at least 2 s), sends SIGINT and
    returns (seconds to exit, return code, stderr)."""
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(call=textwrap.dedent(call)))
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "started"
        t0 = time.monotonic()
        while not (time.monotonic() - t0 >= 2 and ready()):
            assert time.monotonic() - t0 < 60, "never ready"
            time.sleep(0.05)
        assert p.poll() is None, "the run was to be still running: " + p.stderr.read()
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
        return time.monotonic() - sent, p.returncode, out, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_ctrl_c_stops_run_at_once_and_writes_no_output(tmp_path):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "result.json"
    took, rc, stdout, stderr = interrupt(
        f"fraglab.run('example:kbuild-thp-burst', overrides={LONG!r}, output={str(out)!r})", lambda: True, tmp_path
    )
    assert "KeyboardInterrupt" in stderr, stderr
    assert rc == -signal.SIGINT  # Python's exit on an uncaught KeyboardInterrupt
    assert "finished" not in stdout
    assert took < 3, f"{took:.1f} s to stop"
    assert os.listdir(out_dir) == []


def test_ctrl_c_stops_a_sweep_and_keeps_only_the_finished_runs(tmp_path):
    d = tmp_path / "res"
    quick = d / "quick-run1.json"
    took, rc, stdout, stderr = interrupt(
        f"fraglab.sweep(['quick={PGBENCH}', 'slow={LONG_CONFIG}', 'slow2={LONG_CONFIG},vm.defrag_mode=1'], "
        f"jobs=2, results_dir={str(d)!r})",
        quick.exists,
        tmp_path,
    )
    assert "KeyboardInterrupt" in stderr and rc == -signal.SIGINT, stderr
    assert took < 3, f"{took:.1f} s to stop"
    # The finished run's file, complete; nothing of the others, no temporary file.
    assert os.listdir(d) == ["quick-run1.json"]
    assert quick.read_text() == fraglab.run("example:pgbench-checkpoints", overrides={"workload.duration": "1s"}).json


def test_ctrl_c_stops_a_ray_sweep_and_cancels_its_tasks(tmp_path):
    pytest.importorskip("ray", reason="ray is not installed")
    d = tmp_path / "res"
    quick = d / "quick-run1.json"
    call = f"""
    import ray
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        # Two tasks on two CPUs: both start at once, whatever order Ray picks.
        fraglab.sweep(['quick={PGBENCH}', 'slow={LONG_CONFIG}'], backend="ray", results_dir={str(d)!r})
    except KeyboardInterrupt:
        # Both CPUs free again at once: the slow task was cancelled, not left to finish.
        t = time.monotonic()
        ray.get(ray.remote(num_cpus=2)(lambda: 1).remote(), timeout=20)
        print(f"freed {{time.monotonic() - t:.2f}}", flush=True)
        ray.shutdown()
        raise
    """
    took, rc, stdout, stderr = interrupt(call, quick.exists, tmp_path)
    assert "KeyboardInterrupt" in stderr and rc == -signal.SIGINT, stderr
    freed = float(re.search(r"freed ([0-9.]+)", stdout).group(1))
    assert freed < 3, f"{freed} s for the cancelled tasks' CPUs to be free"
    assert took - freed < 3, f"{took - freed:.1f} s to stop"
    assert os.listdir(d) == ["quick-run1.json"]


def test_ctrl_c_in_jupyter_interrupts_run_and_sweep(tmp_path, monkeypatch):
    jc = pytest.importorskip("jupyter_client", reason="jupyter_client is not installed (nbmake brings it)")
    pytest.importorskip("ipykernel", reason="ipykernel is not installed (nbmake brings it)")
    # A kernel of this very Python (not whatever `python3` kernel the machine has).
    spec = tmp_path / "kernels" / "fraglab-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "fraglab test",
                "language": "python",
            }
        )
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    out = tmp_path / "out.json"
    km, kc = jc.manager.start_new_kernel(kernel_name="fraglab-test")
    try:
        r = kc.execute_interactive("import fraglab", timeout=60)
        assert r["content"]["status"] == "ok"
        for code in (
            f"fraglab.run('example:kbuild-thp-burst', overrides={LONG!r}, output={str(out)!r})",
            f"s = fraglab.sweep(('{LONG_CONFIG}', {{'vm.defrag_mode': [0, 1]}}), jobs=2)",
        ):
            msg_id = kc.execute(code)
            time.sleep(2)
            sent = time.monotonic()
            km.interrupt_kernel()
            reply = kc.get_shell_msg(timeout=20)
            took = time.monotonic() - sent
            assert reply["parent_header"]["msg_id"] == msg_id
            assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt", reply["content"]
            assert took < 3, f"{took:.1f} s to stop"
            time.sleep(1)  # ipykernel drops requests that arrive just after an error
        assert not out.exists()
        # The kernel is still usable.
        r = kc.execute_interactive("x = fraglab.run('example:claim-steal-merge')", timeout=60)
        assert r["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


# 4. __version__.


def test_version_is_the_crates():
    cargo = (REPO / "Cargo.toml").read_text()
    m = re.search(r'(?ms)^\[workspace\.package\].*?^version = "([^"]+)"', cargo)
    assert m, "no [workspace.package] version in Cargo.toml"
    assert fraglab._native.__version__ == m.group(1)
    assert fraglab.__version__ == importlib.metadata.version("fraglab")
    # The distribution's version is the crate's (but for PEP 440's spelling of a pre-release).
    if "-" not in m.group(1):
        assert fraglab.__version__ == m.group(1)


# 5. Type hints and docstrings on the public API.


def public_callables():
    for name in fraglab.__all__:
        obj = getattr(fraglab, name)
        if inspect.isfunction(obj):
            yield name, obj
        elif inspect.isclass(obj) and obj.__module__ == "fraglab":
            for attr, member in vars(obj).items():
                if not attr.startswith("_") and (inspect.isfunction(member) or isinstance(member, property)):
                    yield f"{name}.{attr}", member.fget if isinstance(member, property) else member


def test_public_api_has_type_hints_and_docstrings():
    names = []
    for name, fn in public_callables():
        names.append(name)
        hints = typing.get_type_hints(fn)  # resolvable, not just strings
        sig = inspect.signature(fn)
        for p in sig.parameters.values():
            if p.name != "self":
                assert p.name in hints, f"{name}: parameter {p.name} has no type hint"
        assert "return" in hints, f"{name}: no return type hint"
        doc = inspect.getdoc(fn)
        assert doc and len(doc) > 20, f"{name}: no docstring"
        # Module-level functions with parameters document them (numpy style).
        if "." not in name and any(p.name != "self" for p in sig.parameters.values()):
            assert "Parameters\n----------" in doc, f"{name}: no Parameters section"
    for must in ("run", "sweep", "compare", "compare_dirs", "grid", "validate", "examples", "Result.save"):
        assert must in names
    for cls in (fraglab.Result, fraglab.SweepResult, fraglab.SpecError, fraglab.FraglabError):
        assert inspect.getdoc(cls)
