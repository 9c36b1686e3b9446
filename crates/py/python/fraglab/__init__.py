"""fraglab from Python: simulate Linux 6.18 physical memory management, results as pandas
DataFrames.

    import fraglab
    r = fraglab.run("example:kbuild-thp-burst", overrides={"workload.duration": "5s"})
    r.mmtests                       # the rows `fraglab run` prints
    r.samples[["t_s", "free_order_9", "free_order_10"]]
    s = fraglab.sweep(("example:kbuild-thp-burst@workload.duration=5s",
                       {"vm.defrag_mode": [0, 1]}), runs=3)
    s.table.groupby("vm.defrag_mode")      # the compare table, a column per grid parameter
    s.runs                                 # a row per run: its parameters, metrics, Result

The simulations run in Rust (the extension module ``fraglab._native``) with the GIL released,
and stop on Ctrl-C (KeyboardInterrupt) within a fraction of a second, in a script as in
Jupyter, leaving no partial output file. Errors are :class:`FraglabError` (a ``ValueError``),
bad specs :class:`SpecError` with the ``file``, ``line`` and ``key`` of the problem.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import stat
import subprocess
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import pandas as pd

from . import _native
from ._native import FraglabError, SpecError


def _version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover - Python < 3.8
        return _native.__version__
    try:
        return version("fraglab")
    except PackageNotFoundError:
        return _native.__version__


#: The package's version: its distribution's (the fraglab crates' version, which the extension
#: module also carries as ``fraglab._native.__version__``).
__version__: str = _version()


class FraglabWarning(UserWarning):
    """A spec that is valid but will not do what it seems to (a THP burst larger than memory
    and swap, ``dontneed`` past its mapping's end, ...): the lines ``fraglab run`` prints as
    ``fraglab: warning: ...``, naming the file, line and key."""


__all__ = [
    "__version__",
    "FraglabError",
    "FraglabWarning",
    "SpecError",
    "Result",
    "SweepResult",
    "run",
    "compare",
    "compare_dirs",
    "sweep",
    "grid",
    "validate",
    "examples",
    "policies",
    "register_policy",
    "GFP",
    "tune",
    "TuneResult",
]

#: A sweep's configurations: a list of ``[LABEL=]SPEC[@KEY=VALUE,...]`` strings, one such string,
#: or a grid ``(base, {KEY: [values]})`` (or ``{"spec": base, "grid": {KEY: [values]}}``).
Configs = Union[str, Sequence[str], Tuple[str, Mapping[str, Sequence[Any]]], Mapping[str, Any]]

# The migratetypes of a sample's `free_by_type` / `blocks_by_type` (RunResult::Sample), and of a
# pageblock map's letters (U/M/R/H/I; lower case = mixed).
MIGRATETYPES = ["Unmovable", "Movable", "Reclaimable", "HighAtomic", "Isolate"]
_TYPE_LETTER = {name[0]: name for name in MIGRATETYPES}

# An ftrace line: `task-pid [cpu] flags timestamp: event: fields` (the flags column optional).
_TRACE_LINE = re.compile(
    r"^\s*(?P<task>.+?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?"
    r"(?P<timestamp>\d+\.\d+):\s+(?P<event>[^:\s]+):\s?(?P<fields>.*)$"
)


#: Gfp bits by name (``DIRECT_RECLAIM``, ``NORETRY``, ``NOWARN``, ...), for a Python policy's
#: ``pagecache_folio_gfp`` hook.
GFP: Dict[str, int] = dict(_native.GFP)


def policies() -> pd.DataFrame:
    """Every policy ``[model] policy`` may name: the kernel's, the plug-ins of the
    ``fraglab-policies`` crate and those registered in this process (``register_policy``).

    Returns
    -------
    pandas.DataFrame
        Columns ``name``, ``origin`` (``kernel``, ``plug-in``, ``runtime``) and ``summary``.
    """
    return pd.DataFrame(_native.policies(), columns=["name", "origin", "summary"])


def register_policy(name: str, summary: str = "", **hooks: Any) -> None:
    """Registers a policy whose hooks are Python callables, for ``[model] policy = NAME``
    (``run(spec, overrides={"model.policy": NAME})``) in this process.

    Each hook given replaces the kernel's decision at that point; the others keep Linux 6.18's.
    The hooks and their arguments (docs/policies.md):

    - ``nofragment_everywhere(defrag_mode) -> bool``
    - ``kswapd_wake_order(defrag_mode, order) -> int``
    - ``free_pageblock_watermarks(defrag_mode) -> bool``
    - ``compaction_isolates_large_folios() -> bool``
    - ``split_large_folios_before_migration() -> bool``
    - ``compaction_free_page_split() -> bool``
    - ``pagecache_folio_gfp(base, hint, order, min_order) -> int`` (gfp bits: ``GFP``)

    Each call takes the GIL: a Python policy is slow, meant for prototypes on small machines.
    Runs in other processes (``compare``/``sweep`` workers, the command line) do not see it. A
    hook that raises ends the run with a ``PanicException`` naming the policy and the hook.

    Parameters
    ----------
    name : str
        The policy's name: lower-case letters, digits, ``_``, ``-``, ``.``. Registering a name
        again replaces the earlier policy.
    summary : str
        One line on what it does, for ``policies()``.
    **hooks : callable
        The hooks it overrides, by name (the list above).

    Raises
    ------
    TypeError
        An unknown hook name, or a hook that is not callable.
    FraglabError
        A name that is not a policy name or is a built-in policy's.
    """
    _native.register_policy(name, hooks, summary)


def examples() -> List[str]:
    """The names of the built-in example specs.

    Returns
    -------
    list of str
        Names to run as ``fraglab.run("example:NAME")``.
    """
    return list(_native.examples())


def _override_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _overrides(overrides: Optional[Mapping[str, Any]]) -> list:
    if not overrides:
        return []
    return [(str(k), _override_value(v)) for k, v in overrides.items()]


def _checkpoint_path(path: Union[str, os.PathLike]) -> str:
    """A checkpoint file given to run/sweep/compare/tune, as the absolute path an override
    carries (a spec's own paths are relative to its directory; these are the caller's)."""
    p = os.path.abspath(os.fspath(path))
    if "," in p or "@" in p:
        raise FraglabError(f"checkpoint {p!r}: a path with ',' or '@' cannot be given as an override")
    return p


def _with_checkpoint(config: str, path: str) -> str:
    """``config`` (``[LABEL=]SPEC[@KEY=VALUE,...]``) continuing from checkpoint ``path``."""
    sep = "," if "@" in config else "@"
    return f"{config}{sep}machine.checkpoint={path}"


def _write_via_tmp(path: Union[str, os.PathLike], text: str) -> None:
    """Writes ``text`` to ``path`` through a temporary file renamed over it, so that nothing is
    ever half-written (an interrupted write removes its temporary file). As ``fraglab run -o``:
    a symlink is followed; a device, FIFO or socket (``/dev/null``) is written in place, never
    renamed over."""
    path = os.fspath(path)
    target = os.path.realpath(path) if os.path.islink(path) and os.path.exists(path) else path
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISDIR(st.st_mode):
            raise FraglabError(f"{path}: is a directory")
        with open(target, "w") as f:
            f.write(text)
        return
    tmp = f"{target}.{os.getpid()}-{threading.get_ident()}.tmp-fraglab"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _check_output(what: str, path: Union[str, os.PathLike]) -> None:
    """Refuses, before any work, an output path whose directory does not exist or that is a
    directory (so that a bad path fails at once rather than after a long run)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise FraglabError(f"{what} {path}: is a directory (expected a file name)")
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise FraglabError(f"{what} {path}: the directory {d} does not exist")


def _result_file_name(label: str, run: int) -> str:
    """``LABEL-runN.json`` as ``fraglab compare --results-dir`` names it: every character but
    ASCII letters, digits and ``-_.,=@+`` replaced by ``_``."""
    safe = "".join(c if (c.isascii() and c.isalnum()) or c in "-_.,=@+" else "_" for c in label)
    if set(safe) <= {"."}:
        safe = safe.replace(".", "_")
    return f"{safe}-run{run}.json"


class Result:
    """The result of :func:`run` (and of each run of :func:`sweep`).

    A timed run (a spec with a ``[workload]``): ``raw`` is the result as a dict (the JSON
    ``fraglab run -o`` writes; ``json`` is that text), ``text`` the mmtests rows ``fraglab run``
    prints, and the DataFrames ``samples``, ``mmtests``, ``vmstat``, ``pageblocks``,
    ``latency``, (with ``[run] trace``) ``trace`` and (with ``[run] blame``) ``blame`` are
    built from ``raw`` on first use.

    A timeless run (``[[op]]``s): ``raw`` is the result JSON ``fraglab run -o x.json`` writes
    (the same schema: vmstat deltas over the operations, /proc before and after, the final
    pageblock map, the printed text in ``printed``), ``text`` what its ``print`` operations
    printed; ``samples`` and ``latency`` are empty (no clock), ``mmtests`` is None.

    Attributes
    ----------
    kind : str
        ``"timed"`` or ``"timeless"``.
    json : str
        The result JSON text.
    text : str
        The printed text (mmtests rows, or the ``print`` operations' output).
    """

    def __init__(self, kind: str, text: str, rows: str):
        self.kind = kind
        self.json = text
        self.text = rows
        self._raw: Optional[dict] = None
        self._cache: dict = {}

    @property
    def raw(self) -> dict:
        """The result JSON as a dict (parsed on first use)."""
        if self._raw is None:
            self._raw = json.loads(self.json)
        return self._raw

    def __repr__(self) -> str:
        if self.kind == "timeless":
            return f"<fraglab.Result timeless, {len(self.text)} characters of output>"
        r = self.raw
        return (
            f"<fraglab.Result {r.get('spec_name')!r} seed {r['seed']}, "
            f"{r['duration_ns'] / 1e9:.1f} s simulated, {len(r['samples'])} samples>"
        )

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Writes the result JSON (what ``fraglab run -o PATH`` writes) to ``path``, through a
        temporary file renamed over it: never half-written.

        Parameters
        ----------
        path : str or os.PathLike
            The file to write.
        """
        _write_via_tmp(path, self.json)

    def _cached(self, name, build):
        if name not in self._cache:
            self._cache[name] = build(self.raw)
        return self._cache[name]

    @property
    def samples(self) -> pd.DataFrame:
        """One row per sample: ``t_ns``, ``t_s``, ``free_order_0`` .. ``free_order_10`` (free
        pages per order), ``free_<Type>`` (free pages per migratetype), ``blocks_<Type>``
        (pageblocks per migratetype), ``mixed_blocks``, ``thp_fault_alloc``,
        ``thp_fault_fallback``."""
        return self._cached("samples", _samples_frame)

    @property
    def mmtests(self) -> Optional[pd.DataFrame]:
        """The mmtests rows ``fraglab run`` prints: ``metric``, ``value`` (None for a timeless
        run)."""
        if self.kind == "timeless":
            return None
        return self._cached("mmtests", lambda _: _mmtests_frame(self.text))

    @property
    def vmstat(self) -> pd.DataFrame:
        """/proc/vmstat deltas over the (measured part of the) run: ``item``, ``delta``."""
        return self._cached(
            "vmstat",
            lambda r: pd.DataFrame(
                sorted(r["vmstat_delta"].items()), columns=["item", "delta"]
            ),
        )

    @property
    def pageblocks(self) -> pd.DataFrame:
        """The pageblock maps, long form: one row per (map, block): ``t_ns``, ``zone``,
        ``block`` (index in pfn order over the populated zones), ``zone_block`` (index within its
        zone), ``type`` (migratetype), ``mixed`` (holds pages of another mobility), ``fill``
        (pages in use × 10 / 512, capped at 9)."""
        return self._cached("pageblocks", _pageblocks_frame)

    @property
    def latency(self) -> pd.DataFrame:
        """The fault latency histograms, one row per bucket: ``order``, ``path``, ``bucket``,
        ``lo_ns`` and ``hi_ns`` (the bucket holds latencies in [lo_ns, hi_ns)), ``count``."""
        return self._cached("latency", _latency_frame)

    @property
    def trace(self) -> Optional[pd.DataFrame]:
        """The ftrace text a ``[run] trace`` recorded, one row per event: ``task``, ``pid``,
        ``cpu``, ``timestamp`` (s), ``event``, ``fields``; None when the run recorded none."""
        if "trace" not in self.raw.get("proc_end", {}):
            return None
        return self._cached("trace", lambda r: _trace_frame(r["proc_end"]["trace"]))

    @property
    def blame(self) -> Optional[pd.DataFrame]:
        """Fragmentation blame (``[run] blame = true``, docs/blame.md), one row per source,
        ranked as ``fraglab blame`` ranks them: ``source``, ``mixed_blocks``,
        ``compact_blocked_blocks``, ``thp_fault_fail`` and one column per event kind
        (``steal``, ``claim_partial``, ``claim_whole``, ``no_fallback``,
        ``pagecache_unmovable``, ``compact_blocked``); None when the run had blame off."""
        if self.raw.get("blame") is None:
            return None
        return self._cached("blame", _blame_frame)


_BLAME_KINDS = [
    "steal",
    "claim_partial",
    "claim_whole",
    "no_fallback",
    "pagecache_unmovable",
    "compact_blocked",
]


def _blame_frame(r: dict) -> pd.DataFrame:
    rows = []
    for s in r["blame"]:
        row = {
            "source": s["source"],
            "mixed_blocks": s["mixed_blocks"],
            "compact_blocked_blocks": s["compact_blocked_blocks"],
            "thp_fault_fail": s.get("thp_fault_fail", 0),
        }
        for k in _BLAME_KINDS:
            row[k] = s["events"].get(k, 0)
        rows.append(row)
    lead = ["mixed_blocks", "compact_blocked_blocks", "thp_fault_fail"]
    df = pd.DataFrame(rows, columns=["source"] + lead + _BLAME_KINDS)
    # fraglab blame's order: mixed blocks, blocked blocks, failed THP faults, the events, then
    # the name.
    df = df.sort_values(
        lead + _BLAME_KINDS + ["source"],
        ascending=[False] * (len(lead) + len(_BLAME_KINDS)) + [True],
        kind="stable",
    )
    return df.reset_index(drop=True)


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


def run(
    spec: Union[str, os.PathLike],
    overrides: Optional[Mapping[str, Any]] = None,
    seed: Optional[int] = None,
    output: Union[str, os.PathLike, None] = None,
    checkpoint: Union[str, os.PathLike, None] = None,
) -> Result:
    """Runs a spec and returns its :class:`Result`.

    Ctrl-C (KeyboardInterrupt, or Jupyter's interrupt) stops the simulation within a fraction of
    a second; ``output`` is then not written.

    Parameters
    ----------
    spec : str or os.PathLike
        A spec file, ``"example:NAME"`` (:func:`examples`) or the TOML text itself.
    overrides : mapping, optional
        ``{KEY: value}`` as ``fraglab compare``'s ``@KEY=VALUE`` takes them: a knob name
        (``"vm.defrag_mode"``) or ``model.X``, ``run.X``, ``machine.X``, ``cost.X``,
        ``workload.X``.
    seed : int, optional
        Replaces the spec's ``[run] seed``.
    output : str or os.PathLike, optional
        Where to write the result JSON (as ``fraglab run -o``): written once the run has
        finished, through a temporary file renamed over it, so never half-written.
    checkpoint : str or os.PathLike, optional
        Continue from this checkpoint file instead of booting (``fraglab run
        --from-checkpoint``, docs/checkpoints.md; relative to the working directory). The spec
        must be the one that wrote it, except its knobs and ``model.*`` policy switches. To
        write one, override ``run.checkpoint_at`` (and ``run.checkpoint_file``).

    Returns
    -------
    Result

    Raises
    ------
    SpecError
        The spec could not be read, parsed or validated (``file``, ``line``, ``key``).
    FraglabError
        The run could not complete.
    KeyboardInterrupt
        Interrupted.
    """
    if output is not None:
        _check_output("output", output)
    if checkpoint is not None:
        overrides = {**(overrides or {}), "machine.checkpoint": _checkpoint_path(checkpoint)}
    kind, text, rows, warns = _native.run(os.fspath(spec), _overrides(overrides), seed)
    for w in warns:
        warnings.warn(w, FraglabWarning, stacklevel=2)
    r = Result(kind, text, rows)
    if output is not None:
        r.save(output)
    return r


# The columns of the compare table and of a sweep's runs: a grid parameter of the same name
# gets the prefix "param.".
_TABLE_COLUMNS = ["metric", "stat", "config", "baseline", "value", "change_pct", "significant", "measured"]
_RUNS_COLUMNS = ["config", "run", "seed", "result"]


def _param_column(key: str, taken: Iterable[str]) -> str:
    return f"param.{key}" if key in set(taken) else key


def _table(report: dict, params: Optional[Mapping[str, Mapping[str, Any]]] = None) -> pd.DataFrame:
    """A compare report (``fraglab compare --format json``) as a long DataFrame: one row per
    (metric, stat, config), the configurations in their order (the first is the baseline).
    ``params`` (label → {grid parameter: value}) adds a column per parameter after ``config``."""
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
    df = pd.DataFrame(rows, columns=_TABLE_COLUMNS)
    if params:
        keys = _param_keys(params)
        for pos, key in enumerate(keys, start=_TABLE_COLUMNS.index("config") + 1):
            df.insert(pos, _param_column(key, _TABLE_COLUMNS), [params[c].get(key) for c in df["config"]])
    df.attrs["configs"] = list(configs)
    df.attrs["runs"] = report["runs"]
    df.attrs["report"] = report
    return df


def grid(base: str, params: Mapping[str, Sequence[Any]]) -> List[str]:
    """Expands a base spec and a grid of parameters into compare configurations.

    One configuration per combination, in ``itertools.product`` order (so the first values of
    every key make the first configuration, the baseline), each labelled as ``fraglab compare``
    labels ``SPEC@KEY=VALUE,...``.

    Parameters
    ----------
    base : str
        A spec file or ``example:NAME``, optionally with ``@KEY=VALUE,...``.
    params : mapping of str to list
        ``{KEY: [values]}``, KEY as :func:`run`'s ``overrides`` take them.

    Returns
    -------
    list of str

    Examples
    --------
    >>> fraglab.grid("example:kbuild-thp-burst", {"vm.defrag_mode": [0, 1]})
    ['example:kbuild-thp-burst@vm.defrag_mode=0', 'example:kbuild-thp-burst@vm.defrag_mode=1']
    """
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


def _configs(configs_or_grid: Configs) -> List[str]:
    if isinstance(configs_or_grid, (str, os.PathLike)):
        return [os.fspath(configs_or_grid)]
    if isinstance(configs_or_grid, tuple) and len(configs_or_grid) == 2 and isinstance(configs_or_grid[1], Mapping):
        return grid(configs_or_grid[0], configs_or_grid[1])
    if isinstance(configs_or_grid, Mapping) and "spec" in configs_or_grid:
        return grid(configs_or_grid["spec"], configs_or_grid.get("grid", {}))
    return [os.fspath(c) if isinstance(c, os.PathLike) else c for c in configs_or_grid]


_LABEL = re.compile(r"[A-Za-z0-9_-]+")
_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?[0-9]+[eE][+-]?[0-9]+")


def _param_value(v: str) -> Any:
    """An override's value as a Python value: an int, a float, a bool (``true``/``false``), a
    quoted TOML string unquoted, else the text itself (``2s``, ``madvise``)."""
    if _INT.fullmatch(v):
        return int(v)
    if _FLOAT.fullmatch(v):
        return float(v)
    if v in ("true", "false"):
        return v == "true"
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        return v[1:-1]
    return v


def _config_params(config: str) -> Dict[str, Any]:
    """The ``@KEY=VALUE`` overrides of a configuration ``[LABEL=]SPEC[@KEY=VALUE,...]`` (split as
    ``fraglab_sim::compare::load_config`` splits it), values as :func:`_param_value`."""
    label, eq, rest = config.partition("=")
    if not (eq and _LABEL.fullmatch(label)):
        rest = config
    _, _, ovr = rest.partition("@")
    out: Dict[str, Any] = {}
    for kv in ovr.split(","):
        if kv:
            k, _, v = kv.partition("=")
            out[k.strip()] = _param_value(v.strip())
    return out


def _param_keys(params: Mapping[str, Mapping[str, Any]]) -> List[str]:
    keys: List[str] = []
    for p in params.values():
        keys.extend(k for k in p if k not in keys)
    return keys


def _for_workers(config: str, label: str) -> str:
    """The configuration without its label and with an absolute spec path, so that a worker in
    another directory (a Ray worker) finds the file."""
    rest = config[len(label) + 1 :] if config.startswith(label + "=") else config
    spec, sep, ovr = rest.partition("@")
    if not spec.startswith("example:"):
        spec = os.path.abspath(spec)
    return spec + sep + ovr


def _run_task(config: str, run_index: int) -> Tuple[str, str, int]:
    # A Ray task: one (configuration, seed): its result JSON, mmtests rows and seed. Ray's
    # `cancel` interrupts it (a KeyboardInterrupt the native call checks for every 50 ms).
    return _native.run_config(config, run_index)


class SweepResult:
    """What :func:`sweep` returns: the compare table and every run's result.

    For code written when :func:`sweep` returned the table itself, attribute access, indexing
    and ``len`` fall through to ``table`` (``s[s.metric == "THP fault alloc"]``,
    ``s.attrs["report"]``); use ``s.table`` where a DataFrame proper is needed.

    Attributes
    ----------
    table : pandas.DataFrame
        The compare table (:func:`compare`): one row per (metric, stat, config) with a column
        per grid parameter after ``config`` (so ``s.table.groupby("vm.defrag_mode")`` works);
        ``table.attrs`` holds ``configs``, ``runs`` and the compare ``report`` (the JSON of
        ``fraglab compare --format json``).
    runs : pandas.DataFrame
        One row per run, in (configuration, run) order: ``config`` (its label), ``run``
        (1-based), ``seed``, a column per grid parameter, a column per metric of the table
        (``"THP fault alloc"``, ...: the run's own value, its Amean (or Hmean) over its samples
        as the table of that run alone has it, unrounded; NaN where the run does not measure
        it), and ``result``: the run's :class:`Result`, as :func:`run` returns it.
    results : list of Result
        The same :class:`Result` objects, in the order of ``runs``.
    params : list of str
        The grid parameters: every ``@KEY`` the configurations set, in order of appearance.
    """

    def __init__(self, table: pd.DataFrame, runs: pd.DataFrame, results: List[Result], params: List[str]):
        self.table = table
        self.runs = runs
        self.results = results
        self.params = params

    @property
    def configs(self) -> List[str]:
        """The configurations' labels, the baseline first."""
        return list(self.table.attrs["configs"])

    @property
    def report(self) -> dict:
        """The compare report (``fraglab compare --format json``) as a dict."""
        return self.table.attrs["report"]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in ("table", "runs", "results", "params"):
            raise AttributeError(name)
        return getattr(self.table, name)

    def __getitem__(self, key: Any) -> Any:
        return self.table[key]

    def __len__(self) -> int:
        return len(self.table)

    def __iter__(self):
        return iter(self.table)

    def __repr__(self) -> str:
        return (
            f"<fraglab.SweepResult: {len(self.configs)} configurations x {self.table.attrs['runs']} runs, "
            f"parameters {self.params}; .table ({len(self.table)} rows), .runs ({len(self.runs)} rows)>"
        )

    def _repr_html_(self) -> str:
        import html

        return f"<p>{html.escape(repr(self))}</p>" + self.table._repr_html_()


def _run_metrics(label: str, text: str) -> Dict[str, float]:
    """One run's metrics as the compare table has them: the table of that run alone, its
    centre statistic (Amean, or Hmean) and derived rows, unrounded."""
    report = json.loads(_native.compare_results([(label, label, text)]))
    out: Dict[str, float] = {}
    for row in report["rows"]:
        if row["stat"] in ("Amean", "Hmean", "") and row["metric"] not in out and not row.get("unmeasured"):
            out[row["metric"]] = row["values"][0]
    return out


def _runs_frame(
    labels: List[str],
    params: Mapping[str, Mapping[str, Any]],
    tasks: List[Tuple[int, int]],
    outputs: List[Tuple[str, str, int]],
) -> Tuple[pd.DataFrame, List[Result]]:
    keys = _param_keys(params)
    results = [Result("timed", j, rows) for j, rows, _ in outputs]
    rows = []
    metrics: List[str] = []
    for (ci, r), (text, _, seed), res in zip(tasks, outputs, results):
        row: Dict[str, Any] = {"config": labels[ci], "run": r + 1, "seed": seed}
        for k in keys:
            row[_param_column(k, _RUNS_COLUMNS)] = params[labels[ci]].get(k)
        for name, value in _run_metrics(labels[ci], text).items():
            if name not in metrics:
                metrics.append(name)
            row[name] = value
        row["result"] = res
        rows.append(row)
    columns = ["config", "run", "seed", *(_param_column(k, _RUNS_COLUMNS) for k in keys), *metrics, "result"]
    return pd.DataFrame(rows, columns=columns), results


def sweep(
    configs_or_grid: Configs,
    runs: int = 1,
    backend: str = "local",
    address: Optional[str] = None,
    jobs: Optional[int] = None,
    results_dir: Union[str, os.PathLike, None] = None,
    fork_at: Optional[str] = None,
    checkpoint: Union[str, os.PathLike, None] = None,
) -> SweepResult:
    """Runs every configuration ``runs`` times and returns the compare table and the runs.

    The seeds are the spec's, +1, +2, ... (as ``fraglab compare --runs``). Each (configuration,
    seed) is one task: on ``jobs`` threads here with ``backend="local"``, or one Ray task each
    with ``backend="ray"``. The results are merged and compared by the code of ``fraglab
    compare --from`` (``fraglab_sim::compare::merge_results``), so the table is the same
    whatever the backend.

    Ctrl-C (KeyboardInterrupt) stops the sweep within a fraction of a second: local runs are
    cancelled, Ray tasks ``ray.cancel``-ed; with ``results_dir`` the runs that had finished are
    there, complete, and nothing else (no partial file).

    Parameters
    ----------
    configs_or_grid : list of str, str or (str, dict)
        ``[LABEL=]SPEC[@KEY=VALUE,...]`` strings as ``fraglab compare`` takes them (the first
        is the baseline), or a grid ``(base, {KEY: [values]})`` expanded by :func:`grid`.
    runs : int, default 1
        Runs (seeds) per configuration.
    backend : {"local", "ray"}, default "local"
        ``"ray"`` calls ``ray.init(address=address)`` unless Ray is initialised already
        (without an address Ray starts a local cluster). Spec files must be readable at the
        same absolute path on every node.
    address : str, optional
        The Ray cluster's address.
    jobs : int, optional
        Threads for ``backend="local"`` (default: the CPUs).
    results_dir : str or os.PathLike, optional
        A directory (created if need be) to write each run's result JSON in as soon as it
        finishes, as ``LABEL-runN.json`` (the files ``fraglab compare --results-dir`` writes,
        which :func:`compare_dirs` reads), each through a temporary file renamed over it.
    fork_at : str, optional
        A warm fork (``fraglab compare --fork-at``, docs/compare-and-report.md): the first
        configuration runs to this simulated time (``"191s"``) once per seed, and the others
        fork from its run there, each taking its own knobs and ``[model]`` policy and switches.
        The configurations may differ only in those. Runs through the ``fraglab`` binary (on
        PATH or ``$FRAGLAB_BIN``) with ``backend="local"``; ``jobs`` does not apply.
    checkpoint : str or os.PathLike, optional
        Every configuration continues from this checkpoint file (``fraglab compare
        --from-checkpoint``, docs/checkpoints.md) instead of booting: the configurations may
        differ from the spec that wrote it only in knobs and ``model.*`` policy switches, and
        ``runs`` must be 1 (a checkpoint holds one seed's run). With ``backend="ray"`` the
        file must be readable at the same absolute path on every node.

    Returns
    -------
    SweepResult
        ``.table``: the compare table with a column per grid parameter; ``.runs``: a row per
        run with its parameters, metrics and :class:`Result`.

    Raises
    ------
    SpecError
        A configuration's spec is bad (raised before anything runs).
    FraglabError
        Bad arguments, or a run that could not complete.
    KeyboardInterrupt
        Interrupted.

    Examples
    --------
    >>> s = fraglab.sweep(("example:pgbench-checkpoints@workload.duration=1s",
    ...                    {"vm.defrag_mode": [0, 1]}), runs=2)
    >>> s.runs.groupby("vm.defrag_mode")["Compaction stalls"].mean()  # doctest: +SKIP
    """
    if runs < 1:
        raise FraglabError("runs must be at least 1")
    if backend not in ("local", "ray"):
        raise FraglabError(f"backend {backend!r}: expected 'local' or 'ray'")
    if jobs is not None and jobs < 1:
        raise FraglabError("jobs must be at least 1")
    configs = _configs(configs_or_grid)
    if not configs:
        raise FraglabError("no configurations to sweep")
    if checkpoint is not None:
        if fork_at is not None:
            raise FraglabError("checkpoint and fork_at: give one (a warm start from a file, or a fork)")
        if runs != 1:
            raise FraglabError("checkpoint: a checkpoint holds one seed's run: runs must be 1")
        path = _checkpoint_path(checkpoint)
        configs = [_with_checkpoint(c, path) for c in configs]
    labels: List[str] = []
    for c in configs:
        label, warns = _native.config_label(c)
        labels.append(label)
        for w in warns:
            warnings.warn(w, FraglabWarning, stacklevel=2)
    for i, label in enumerate(labels):
        if label in labels[:i]:
            raise FraglabError(f"two configurations are labelled {label!r}; name them with LABEL=SPEC")
    params = {label: _config_params(c) for c, label in zip(configs, labels)}
    if results_dir is not None:
        results_dir = os.fspath(results_dir)
        names = [_result_file_name(label, 1) for label in labels]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise FraglabError(
                    f"results_dir: the labels {labels[names.index(name)]!r} and {labels[i]!r} both give "
                    f"the file {name}; name them with LABEL=SPEC"
                )
        os.makedirs(results_dir, exist_ok=True)
    work = [_for_workers(c, l) for c, l in zip(configs, labels)]
    tasks = [(ci, r) for ci in range(len(configs)) for r in range(runs)]

    def keep(i: int, out: Tuple[str, str, int]) -> Tuple[str, str, int]:
        if results_dir is not None:
            ci, r = tasks[i]
            _write_via_tmp(os.path.join(results_dir, _result_file_name(labels[ci], r + 1)), out[0])
        return out

    if fork_at is not None:
        if backend != "local":
            raise FraglabError("fork_at runs through the fraglab binary on this machine: backend='local' only")
        outputs = _sweep_forked(work, labels, tasks, runs, str(fork_at), keep)
    elif backend == "local":
        outputs = _sweep_local(work, tasks, jobs, keep)
    else:
        outputs = _sweep_ray(work, tasks, address, keep)
    items = [(labels[ci], f"{labels[ci]} run {r + 1}", out[0]) for (ci, r), out in zip(tasks, outputs)]
    table = _table(json.loads(_native.compare_results(items)), params)
    runs_df, results = _runs_frame(labels, params, tasks, outputs)
    return SweepResult(table, runs_df, results, _param_keys(params))


def _sweep_local(work, tasks, jobs, keep) -> list:
    cancel = _native.Cancel()

    def one(i: int):
        ci, r = tasks[i]
        return keep(i, _native.run_config(work[ci], r, cancel))

    n = min(jobs or os.cpu_count() or 1, len(tasks))
    ex = ThreadPoolExecutor(max_workers=n, thread_name_prefix="fraglab-sweep")
    futures: list = []
    try:
        futures.extend(ex.submit(one, i) for i in range(len(tasks)))
        outputs = [f.result() for f in futures]
    except BaseException:
        # Ctrl-C here (or a run that failed): the running runs stop within milliseconds, the
        # queued ones never start; a run whose file is being written finishes writing it.
        cancel.set()
        for f in futures:
            f.cancel()
        ex.shutdown(wait=True)
        raise
    ex.shutdown(wait=True)
    return outputs


def _sweep_forked(work, labels, tasks, runs, fork_at, keep) -> list:
    # `fraglab compare --fork-at`: the binary forks (a process with one thread can; this one
    # cannot), writing every run's result into a temporary directory read back here.
    import tempfile

    with tempfile.TemporaryDirectory(prefix="fraglab-fork-") as tmp:
        cmd = [_binary("fork_at"), "compare", "--fork-at", fork_at, "--runs", str(runs), "--results-dir", tmp]
        cmd += [f"{label}={w}" for label, w in zip(labels, work)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise _binary_error(p.stderr, None)
        outputs = []
        for i, (ci, r) in enumerate(tasks):
            path = os.path.join(tmp, _result_file_name(labels[ci], r + 1))
            with open(path, encoding="utf-8") as f:
                text = f.read()
            rows = _native.result_rows(text, path)
            outputs.append(keep(i, (text, rows, int(json.loads(text)["seed"]))))
        return outputs


def _sweep_ray(work, tasks, address, keep) -> list:
    try:
        import ray
    except ImportError as e:
        raise FraglabError("backend='ray' needs the ray package (pip install 'ray')") from e
    if not ray.is_initialized():
        ray.init(address=address)
    remote = ray.remote(num_cpus=1)(_run_task)
    refs = [remote.remote(work[ci], r) for ci, r in tasks]
    index = {ref: i for i, ref in enumerate(refs)}
    outputs: list = [None] * len(refs)
    pending = list(refs)
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                i = index[ref]
                outputs[i] = keep(i, tuple(ray.get(ref)))
    except BaseException:
        for ref in pending:
            try:
                ray.cancel(ref)
            except Exception:
                pass
        raise
    return outputs


def compare(
    configs: Configs,
    runs: int = 1,
    jobs: Optional[int] = None,
    results_dir: Union[str, os.PathLike, None] = None,
    fork_at: Optional[str] = None,
    checkpoint: Union[str, os.PathLike, None] = None,
) -> pd.DataFrame:
    """The compare table of ``fraglab compare CONFIG... --runs RUNS --format json``.

    :func:`sweep` with ``backend="local"``, its ``table``. Interruptible as :func:`sweep`.

    Parameters
    ----------
    configs : list of str, str or (str, dict)
        As :func:`sweep` takes them; the first is the baseline.
    runs : int, default 1
        Runs (seeds) per configuration.
    jobs : int, optional
        Threads (default: the CPUs).
    results_dir : str or os.PathLike, optional
        As :func:`sweep`'s.
    fork_at : str, optional
        As :func:`sweep`'s: a warm fork at this simulated time.
    checkpoint : str or os.PathLike, optional
        As :func:`sweep`'s: every configuration continues from this checkpoint file.

    Returns
    -------
    pandas.DataFrame
        One row per (metric, stat, config), with a column per ``@KEY`` parameter of the
        configurations after ``config``, then ``baseline``, ``value`` (NaN where the
        configuration does not measure the metric), ``change_pct`` against the baseline
        ((new − base) / base × 100; 0 for the baseline, NaN where the base is 0),
        ``significant`` (Welch's t-test, p < 0.05) and ``measured``. ``df.attrs["report"]``
        holds the JSON itself.

    Raises
    ------
    SpecError, FraglabError, KeyboardInterrupt
        As :func:`sweep`.
    """
    return sweep(
        configs,
        runs=runs,
        backend="local",
        jobs=jobs,
        results_dir=results_dir,
        fork_at=fork_at,
        checkpoint=checkpoint,
    ).table


def compare_dirs(
    dirs: Union[str, os.PathLike, Iterable[Union[str, os.PathLike]]], baseline: Optional[str] = None
) -> pd.DataFrame:
    """``fraglab compare --from DIR... [--baseline LABEL]``: the compare table of result files.

    Parameters
    ----------
    dirs : path or list of paths
        Directories of ``LABEL-runN.json`` files (``sweep(results_dir=...)``, ``fraglab
        compare --results-dir``).
    baseline : str, optional
        The label of the baseline configuration.

    Returns
    -------
    pandas.DataFrame
        As :func:`compare`'s (without parameter columns).

    Raises
    ------
    FraglabError
        A file that cannot be read or merged (the same run twice, ...).
    """
    if isinstance(dirs, (str, os.PathLike)):
        dirs = [dirs]
    return _table(json.loads(_native.compare_dirs([os.fspath(d) for d in dirs], baseline)))


def _binary(what: str = "validate") -> str:
    b = os.environ.get("FRAGLAB_BIN") or shutil.which("fraglab")
    if not b:
        raise FraglabError(
            f"{what} runs the fraglab binary: put it on PATH or set FRAGLAB_BIN "
            "(cargo build --release -p fraglab builds target/release/fraglab)"
        )
    return b


def _binary_error(stderr: str, spec: Optional[str]) -> FraglabError:
    """The binary's error as an exception: a :class:`SpecError` when its message is one about
    ``spec`` (``fraglab: FILE:LINE: key KEY: message``), else a :class:`FraglabError`."""
    text = stderr.strip()
    if spec is not None and not spec.startswith("example:"):
        m = re.search(
            r"(?m)^(?:fraglab: )?(?:\S+: )*(?P<file>" + re.escape(spec) + r"(?: \[[^\]]*\])?)"
            r"(?::(?P<line>\d+))?:(?: key (?P<key>\S+):)? (?P<message>.*)$",
            text,
        )
        if m:
            e = SpecError(text)
            e.file = m["file"]
            e.line = int(m["line"]) if m["line"] and int(m["line"]) > 0 else None
            e.key = m["key"]
            e.message = m["message"]
            return e
    return FraglabError(text)


def validate(
    spec: Union[str, os.PathLike, None] = None,
    suite: Union[str, os.PathLike, None] = None,
    args: Sequence[str] = (),
) -> Union[pd.DataFrame, dict]:
    """``fraglab validate``: a spec on the live kernel and on the simulator, side by side.

    Needs the host engine: root on Linux >= 6.15 with the knobs the spec sets, and the
    ``fraglab`` binary (on PATH or ``$FRAGLAB_BIN``), which this runs with ``--format json``.

    Parameters
    ----------
    spec : str or os.PathLike, optional
        The spec to validate (give this or ``suite``).
    suite : str or os.PathLike, optional
        A validation suite directory.
    args : sequence of str
        Passed on (``["--runs", "1", "--sim-only"]`` with ``suite``).

    Returns
    -------
    pandas.DataFrame or dict
        With ``spec``, the comparison as :func:`compare`'s DataFrame (the kernel's column
        first); with ``suite``, the scoreboard as a dict.

    Raises
    ------
    SpecError
        The binary reported a bad ``spec`` (``file``, ``line``, ``key`` parsed from its message).
    FraglabError
        The binary could not run it (not root, an older kernel, ...), with fraglab's message.
    """
    if (spec is None) == (suite is None):
        raise FraglabError("validate: give spec or suite (one of them)")
    cmd = [_binary(), "validate"]
    cmd += [os.fspath(spec)] if spec is not None else ["--suite", os.fspath(suite)]
    cmd += ["--format", "json", *args]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise _binary_error(
            p.stderr or f"{' '.join(cmd)} failed with exit code {p.returncode}",
            os.fspath(spec) if spec is not None else None,
        )
    out = json.loads(p.stdout)
    if spec is not None and isinstance(out, dict) and "configs" in out and "rows" in out:
        return _table(out)
    return out


# Knob tuning (fraglab/_tune.py; `python -m fraglab.tune` is its command line).
from ._tune import TuneResult, tune  # noqa: E402
