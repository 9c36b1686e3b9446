"""fraglab from Python: simulate Linux 6.18 physical memory management, results as pandas
DataFrames.

    import fraglab
    r = fraglab.run("example:kbuild-thp-burst", overrides={"workload.duration": "5s"})
    r.mmtests                       # the rows `fraglab run` prints
    r.samples[["t_s", "free_order_9", "free_order_10"]]
    table = fraglab.sweep(["example:kbuild-thp-burst", "example:kbuild-thp-burst@vm.defrag_mode=1"],
                          runs=3, backend="ray")

The simulations run in Rust (the extension module ``fraglab._native``) with the GIL released.
Errors are :class:`FraglabError` (a ``ValueError``), bad specs :class:`SpecError` with the
file, line and key of the problem.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

import pandas as pd

from . import _native
from ._native import FraglabError, SpecError


class FraglabWarning(UserWarning):
    """A spec that is valid but will not do what it seems to (a THP burst larger than memory
    and swap, ``dontneed`` past its mapping's end, ...): the lines ``fraglab run`` prints as
    ``fraglab: warning: ...``, naming the file, line and key."""

__all__ = [
    "FraglabError",
    "FraglabWarning",
    "SpecError",
    "Result",
    "run",
    "compare",
    "compare_dirs",
    "sweep",
    "grid",
    "validate",
    "examples",
]

# The migratetypes of a sample's `free_by_type` / `blocks_by_type` (RunResult::Sample), and of a
# pageblock map's letters (U/M/R/H/I; lower case = mixed).
MIGRATETYPES = ["Unmovable", "Movable", "Reclaimable", "HighAtomic", "Isolate"]
_TYPE_LETTER = {name[0]: name for name in MIGRATETYPES}

# An ftrace line: `task-pid [cpu] flags timestamp: event: fields` (the flags column optional).
_TRACE_LINE = re.compile(
    r"^\s*(?P<task>.+?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?"
    r"(?P<timestamp>\d+\.\d+):\s+(?P<event>[^:\s]+):\s?(?P<fields>.*)$"
)


def examples() -> list:
    """The names of the built-in example specs (``example:NAME``)."""
    return list(_native.examples())


def _override_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _overrides(overrides: Optional[Mapping[str, Any]]) -> list:
    if not overrides:
        return []
    return [(str(k), _override_value(v)) for k, v in overrides.items()]


class Result:
    """The result of :func:`run`.

    A timed run (a spec with a ``[workload]``): ``raw`` is the result as a dict (the JSON
    ``fraglab run -o`` writes), ``text`` the mmtests rows ``fraglab run`` prints, and the
    DataFrames ``samples``, ``mmtests``, ``vmstat``, ``pageblocks``, ``latency`` and (with
    ``[run] trace``) ``trace`` are built from ``raw`` on first use.

    A timeless run (``[[op]]``s): ``raw`` is the result JSON ``fraglab run -o x.json`` writes
    (the same schema: vmstat deltas over the operations, /proc before and after, the final
    pageblock map, the printed text in ``printed``), ``text`` what its ``print`` operations
    printed; ``samples`` and ``latency`` are empty (no clock), ``mmtests`` is None.
    """

    def __init__(self, kind: str, text: str, rows: str):
        self.kind = kind
        self.json = text
        self.raw = json.loads(text)
        self.text = rows
        self._cache: dict = {}

    def __repr__(self) -> str:
        if self.kind == "timeless":
            return f"<fraglab.Result timeless, {len(self.text)} characters of output>"
        r = self.raw
        return (
            f"<fraglab.Result {r.get('spec_name')!r} seed {r['seed']}, "
            f"{r['duration_ns'] / 1e9:.1f} s simulated, {len(r['samples'])} samples>"
        )

    def _cached(self, name, build):
        if self.raw is None:
            return None
        if name not in self._cache:
            self._cache[name] = build(self.raw)
        return self._cache[name]

    @property
    def samples(self) -> Optional[pd.DataFrame]:
        """One row per sample: ``t_ns``, ``t_s``, ``free_order_0`` .. ``free_order_10`` (free
        pages per order), ``free_<Type>`` (free pages per migratetype), ``blocks_<Type>``
        (pageblocks per migratetype), ``mixed_blocks``, ``thp_fault_alloc``,
        ``thp_fault_fallback``."""
        return self._cached("samples", _samples_frame)

    @property
    def mmtests(self) -> Optional[pd.DataFrame]:
        """The mmtests rows ``fraglab run`` prints: ``metric``, ``value``."""
        if self.kind == "timeless":
            return None
        return self._cached("mmtests", lambda _: _mmtests_frame(self.text))

    @property
    def vmstat(self) -> Optional[pd.DataFrame]:
        """/proc/vmstat deltas over the (measured part of the) run: ``item``, ``delta``."""
        return self._cached(
            "vmstat",
            lambda r: pd.DataFrame(
                sorted(r["vmstat_delta"].items()), columns=["item", "delta"]
            ),
        )

    @property
    def pageblocks(self) -> Optional[pd.DataFrame]:
        """The pageblock maps, long form: one row per (map, block): ``t_ns``, ``zone``,
        ``block`` (index in pfn order over the populated zones), ``zone_block`` (index within its
        zone), ``type`` (migratetype), ``mixed`` (holds pages of another mobility), ``fill``
        (pages in use × 10 / 512, capped at 9)."""
        return self._cached("pageblocks", _pageblocks_frame)

    @property
    def latency(self) -> Optional[pd.DataFrame]:
        """The fault latency histograms, one row per bucket: ``order``, ``path``, ``bucket``,
        ``lo_ns`` and ``hi_ns`` (the bucket holds latencies in [lo_ns, hi_ns)), ``count``."""
        return self._cached("latency", _latency_frame)

    @property
    def trace(self) -> Optional[pd.DataFrame]:
        """The ftrace text a ``[run] trace`` recorded, one row per event: ``task``, ``pid``,
        ``cpu``, ``timestamp`` (s), ``event``, ``fields``; None when the run recorded none."""
        if self.raw is None or "trace" not in self.raw.get("proc_end", {}):
            return None
        return self._cached("trace", lambda r: _trace_frame(r["proc_end"]["trace"]))


def _samples_frame(r: dict) -> pd.DataFrame:
    rows = []
    for s in r["samples"]:
        row = {"t_ns": s["t_ns"], "t_s": s["t_ns"] / 1e9}
        for i, v in enumerate(s["free_by_order"]):
            row[f"free_order_{i}"] = v
        for i, v in enumerate(s["free_by_type"]):
            row[f"free_{MIGRATETYPES[i] if i < len(MIGRATETYPES) else i}"] = v
        for i, v in enumerate(s["blocks_by_type"]):
            row[f"blocks_{MIGRATETYPES[i] if i < len(MIGRATETYPES) else i}"] = v
        row["mixed_blocks"] = s["mixed_blocks"]
        row["thp_fault_alloc"] = s["thp_fault_alloc"]
        row["thp_fault_fallback"] = s["thp_fault_fallback"]
        rows.append(row)
    return pd.DataFrame(rows)


def _mmtests_frame(text: str) -> pd.DataFrame:
    rows = []
    for line in text.splitlines():
        name, _, value = line.rstrip().rpartition(" ")
        name = name.strip()
        if not name:  # the header line ("Amean")
            continue
        rows.append((name, float(value)))
    return pd.DataFrame(rows, columns=["metric", "value"])


def _pageblocks_frame(r: dict) -> pd.DataFrame:
    cols = {k: [] for k in ["t_ns", "zone", "block", "zone_block", "type", "mixed", "fill"]}
    for m in r["pageblock_maps"]:
        zones = m["zones"]
        for zi, (zone, start) in enumerate(zones):
            end = zones[zi + 1][1] if zi + 1 < len(zones) else len(m["types"])
            for b in range(start, end):
                c = m["types"][b]
                cols["t_ns"].append(m["t_ns"])
                cols["zone"].append(zone)
                cols["block"].append(b)
                cols["zone_block"].append(b - start)
                cols["type"].append(_TYPE_LETTER.get(c.upper(), c))
                cols["mixed"].append(c.islower())
                cols["fill"].append(int(m["fill"][b]))
    return pd.DataFrame(cols)


def _latency_frame(r: dict) -> pd.DataFrame:
    rows = []
    for h in r["fault_latency"]:
        for i, n in enumerate(h["log2_buckets"]):
            rows.append((h["order"], h["path"], i, 1 << i, 1 << (i + 1), n))
    return pd.DataFrame(rows, columns=["order", "path", "bucket", "lo_ns", "hi_ns", "count"])


def _trace_frame(text: str) -> pd.DataFrame:
    rows = []
    for line in text.splitlines():
        m = _TRACE_LINE.match(line)
        if m:
            d = m.groupdict()
            rows.append(
                (d["task"], int(d["pid"]), int(d["cpu"]), float(d["timestamp"]), d["event"], d["fields"])
            )
    return pd.DataFrame(rows, columns=["task", "pid", "cpu", "timestamp", "event", "fields"])


def run(spec: str, overrides: Optional[Mapping[str, Any]] = None, seed: Optional[int] = None) -> Result:
    """Runs a spec and returns its :class:`Result`.

    ``spec`` is a file, ``example:NAME`` or the TOML text itself; ``overrides`` a dict of
    ``KEY: value`` as ``fraglab compare``'s ``@KEY=VALUE`` takes them (a knob name such as
    ``"vm.defrag_mode"``, or ``model.X``, ``run.X``, ``machine.X``, ``cost.X``, ``workload.X``);
    ``seed`` replaces the spec's ``[run] seed``. Raises :class:`SpecError` for a bad spec and
    :class:`FraglabError` for a run that cannot complete.
    """
    kind, text, rows, warns = _native.run(os.fspath(spec), _overrides(overrides), seed)
    for w in warns:
        warnings.warn(w, FraglabWarning, stacklevel=2)
    return Result(kind, text, rows)


def _table(report: dict) -> pd.DataFrame:
    """A compare report (``fraglab compare --format json``) as a long DataFrame: one row per
    (metric, stat, config), the configurations in their order (the first is the baseline)."""
    configs = report["configs"]
    rows = []
    for row in report["rows"]:
        unmeasured = set(row.get("unmeasured", []))
        for i, config in enumerate(configs):
            measured = i not in unmeasured
            # As the printed table shows it (CompareRow::shown_change): 0 for the baseline.
            change = 0.0 if i == 0 else row["change_pct"][i]
            rows.append(
                {
                    "metric": row["metric"],
                    "stat": row["stat"],
                    "config": config,
                    "baseline": i == 0,
                    "value": row["values"][i] if measured else float("nan"),
                    "change_pct": float("nan") if change is None else change,
                    "significant": row["significant"][i],
                    "measured": measured,
                }
            )
    df = pd.DataFrame(
        rows,
        columns=["metric", "stat", "config", "baseline", "value", "change_pct", "significant", "measured"],
    )
    df.attrs["configs"] = list(configs)
    df.attrs["runs"] = report["runs"]
    df.attrs["report"] = report
    return df


def grid(base: str, params: Mapping[str, Sequence[Any]]) -> list:
    """Expands a base spec (a file or ``example:NAME``, optionally with ``@KEY=VALUE,...``) and
    a dict of ``KEY: [values]`` into compare configurations, one per combination, in
    ``itertools.product`` order (so the first values of every key make the first configuration,
    the baseline). Each is labelled as ``fraglab compare`` labels ``SPEC@KEY=VALUE,...``."""
    keys = list(params)
    for k in keys:
        if not isinstance(params[k], (list, tuple)) or not params[k]:
            raise FraglabError(f"grid: {k}: expected a non-empty list of values")
    configs = []
    for combo in itertools.product(*(params[k] for k in keys)):
        kv = []
        for k, v in zip(keys, combo):
            s = _override_value(v)
            if "," in s or "@" in s:
                raise FraglabError(f"grid: {k}={s}: a value cannot hold ',' or '@'")
            kv.append(f"{k}={s}")
        sep = "," if "@" in base else "@"
        configs.append(base + (sep + ",".join(kv) if kv else ""))
    return configs


def _configs(configs_or_grid) -> list:
    if isinstance(configs_or_grid, str):
        return [configs_or_grid]
    if isinstance(configs_or_grid, tuple) and len(configs_or_grid) == 2 and isinstance(configs_or_grid[1], Mapping):
        return grid(configs_or_grid[0], configs_or_grid[1])
    if isinstance(configs_or_grid, Mapping) and "spec" in configs_or_grid:
        return grid(configs_or_grid["spec"], configs_or_grid.get("grid", {}))
    return [os.fspath(c) if isinstance(c, os.PathLike) else c for c in configs_or_grid]


def _for_workers(config: str, label: str) -> str:
    """The configuration without its label and with an absolute spec path, so that a worker in
    another directory (a Ray worker) finds the file."""
    rest = config[len(label) + 1 :] if config.startswith(label + "=") else config
    spec, sep, ovr = rest.partition("@")
    if not spec.startswith("example:"):
        spec = os.path.abspath(spec)
    return spec + sep + ovr


def _run_task(config: str, run_index: int) -> str:
    # A Ray task: one (configuration, seed), its result JSON.
    return _native.run_config(config, run_index)


def sweep(
    configs_or_grid,
    runs: int = 1,
    backend: str = "local",
    address: Optional[str] = None,
    jobs: Optional[int] = None,
) -> pd.DataFrame:
    """Runs every configuration ``runs`` times (seeds: the spec's, +1, +2, ... as ``fraglab
    compare --runs``) and returns the compare table (:func:`compare`'s DataFrame).

    ``configs_or_grid``: a list of ``[LABEL=]SPEC[@KEY=VALUE,...]`` strings as ``fraglab
    compare`` takes them (the first is the baseline), or a grid ``(base, {KEY: [values]})``
    expanded by :func:`grid`. Each (configuration, seed) is one task: on ``jobs`` threads here
    with ``backend="local"`` (default: the CPUs), or one Ray task each with ``backend="ray"``
    (``ray.init(address=address)`` unless Ray is initialised already; without an address Ray
    starts a local cluster). Spec files must be readable at the same absolute path on every
    node. The results (result JSON text) are merged and compared by the code of ``fraglab
    compare --from`` (``fraglab_sim::compare::merge_results``), so the table is the same
    whatever the backend.
    """
    if runs < 1:
        raise FraglabError("runs must be at least 1")
    configs = _configs(configs_or_grid)
    if not configs:
        raise FraglabError("no configurations to sweep")
    labels = [_native.config_label(c) for c in configs]
    for i, label in enumerate(labels):
        if label in labels[:i]:
            raise FraglabError(f"two configurations are labelled {label!r}; name them with LABEL=SPEC")
    work = [_for_workers(c, l) for c, l in zip(configs, labels)]
    tasks = [(ci, r) for ci in range(len(configs)) for r in range(runs)]
    if backend == "local":
        if jobs is not None and jobs < 1:
            raise FraglabError("jobs must be at least 1")
        n = jobs or os.cpu_count() or 1
        with ThreadPoolExecutor(max_workers=min(n, len(tasks))) as ex:
            jsons = list(ex.map(lambda t: _native.run_config(work[t[0]], t[1]), tasks))
    elif backend == "ray":
        try:
            import ray
        except ImportError as e:
            raise FraglabError("backend='ray' needs the ray package (pip install 'ray')") from e
        if not ray.is_initialized():
            ray.init(address=address)
        remote = ray.remote(num_cpus=1)(_run_task)
        jsons = ray.get([remote.remote(work[ci], r) for ci, r in tasks])
    else:
        raise FraglabError(f"backend {backend!r}: expected 'local' or 'ray'")
    items = [(labels[ci], f"{labels[ci]} run {r + 1}", j) for (ci, r), j in zip(tasks, jsons)]
    return _table(json.loads(_native.compare_results(items)))


def compare(configs: Union[str, Iterable[str]], runs: int = 1, jobs: Optional[int] = None) -> pd.DataFrame:
    """The compare table of ``fraglab compare CONFIG... --runs RUNS --format json`` as a
    DataFrame: one row per (metric, stat, config) with ``value`` (NaN where the configuration
    does not measure the metric), ``change_pct`` against the baseline (the first configuration;
    (new − base) / base × 100; 0 for the baseline, NaN where the base is 0), ``significant`` (Welch's t-test, p < 0.05) and ``measured``.
    ``df.attrs["report"]`` holds the JSON itself. Runs on ``jobs`` threads (:func:`sweep` with
    ``backend="local"``)."""
    return sweep(configs, runs=runs, backend="local", jobs=jobs)


def compare_dirs(dirs: Union[str, os.PathLike, Iterable], baseline: Optional[str] = None) -> pd.DataFrame:
    """``fraglab compare --from DIR... [--baseline LABEL]``: the compare table of the result files
    (``LABEL-runN.json``) in ``dirs``, as :func:`compare`'s DataFrame."""
    if isinstance(dirs, (str, os.PathLike)):
        dirs = [dirs]
    return _table(json.loads(_native.compare_dirs([os.fspath(d) for d in dirs], baseline)))


def _binary() -> str:
    b = os.environ.get("FRAGLAB_BIN") or shutil.which("fraglab")
    if not b:
        raise FraglabError(
            "validate runs the fraglab binary: put it on PATH or set FRAGLAB_BIN "
            "(cargo build --release -p fraglab builds target/release/fraglab)"
        )
    return b


def validate(spec: Optional[str] = None, suite: Optional[str] = None, args: Sequence[str] = ()):
    """``fraglab validate``: a spec on the live kernel and on the simulator, side by side.

    Needs the host engine: root on Linux >= 6.15 with the knobs the spec sets, and the
    ``fraglab`` binary (on PATH or ``$FRAGLAB_BIN``), which this runs with ``--format json``;
    ``args`` are passed on (``["--runs", "1", "--sim-only"]`` with ``suite``). With ``spec``,
    returns the comparison as :func:`compare`'s DataFrame (the kernel's column first); with
    ``suite`` (a validation suite directory), the scoreboard as a dict. Raises
    :class:`FraglabError` with fraglab's message when the binary cannot run it (not root, an
    older kernel, a bad spec).
    """
    if (spec is None) == (suite is None):
        raise FraglabError("validate: give spec or suite (one of them)")
    cmd = [_binary(), "validate"]
    cmd += [os.fspath(spec)] if spec is not None else ["--suite", os.fspath(suite)]
    cmd += ["--format", "json", *args]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise FraglabError(p.stderr.strip() or f"{' '.join(cmd)} failed with exit code {p.returncode}")
    out = json.loads(p.stdout)
    if spec is not None and isinstance(out, dict) and "configs" in out and "rows" in out:
        return _table(out)
    return out
