"""Knob tuning: search a space of settings for the best value of a metric (issue 37, item 4).

    import fraglab
    t = fraglab.tune("example:kbuild-thp-burst@workload.duration=2s",
                     {"transparent_hugepage/enabled": ["never", "madvise"],
                      "vm.defrag_mode": [0, 1]},
                     objective="THP fault alloc", budget=4)
    t.best, t.best_value, t.trials, t.cost

Ray Tune runs the search when ``ray.tune`` is importable (``pip install 'ray[tune]'``), else
local threads do (the same table). ``python -m fraglab.tune`` (``fraglab tune``) is the command
line of the same function.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import operator
import os
import random
import shutil
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import pandas as pd

from . import FraglabError, FraglabWarning, Result, SpecError, _config_params, _native, _override_value

__all__ = ["tune", "TuneResult"]

_OPS: Dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}

Objective = Union[str, Callable[[Result], float]]
Constraints = Union[
    None,
    Mapping[str, Tuple[str, float]],
    Callable[[Result], bool],
    Sequence[Union[Callable[[Result], bool], Tuple[str, str, float]]],
]


# --- the space --------------------------------------------------------------------------------


class _Key:
    """One key of the space: ``values`` (categorical), a range ``(lo, hi)`` or a Ray domain."""

    def __init__(self, name: str, spec: Any):
        self.name = name
        self.values: Optional[list] = None
        self.range: Optional[Tuple[Any, Any]] = None
        self.domain: Any = None
        if isinstance(spec, list) or (isinstance(spec, (set, frozenset))):
            if not spec:
                raise FraglabError(f"space: {name}: an empty list of values")
            self.values = list(spec)
        elif isinstance(spec, tuple):
            if len(spec) != 2 or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in spec):
                raise FraglabError(
                    f"space: {name}: a tuple is a range (lo, hi) of numbers; give categorical values as a list"
                )
            lo, hi = spec
            if lo > hi:
                raise FraglabError(f"space: {name}: range ({lo}, {hi}) has lo > hi")
            self.range = (lo, hi)
        elif hasattr(spec, "sample") and type(spec).__module__.startswith("ray."):
            if type(spec).__name__ == "Categorical" and hasattr(spec, "categories"):
                self.values = list(spec.categories)
            else:
                self.domain = spec
        else:
            raise FraglabError(
                f"space: {name}: expected a list of values, a range tuple (lo, hi) or a ray.tune "
                f"distribution, got {spec!r}"
            )

    @property
    def categorical(self) -> bool:
        return self.values is not None

    def integer(self) -> bool:
        return self.range is not None and all(isinstance(x, int) for x in self.range)

    def sample(self, rng: random.Random, nprng: Any) -> Any:
        if self.values is not None:
            return rng.choice(self.values)
        if self.range is not None:
            lo, hi = self.range
            return rng.randint(lo, hi) if self.integer() else rng.uniform(lo, hi)
        v = self.domain.sample(random_state=nprng)
        return v.item() if hasattr(v, "item") else v

    def probe_values(self) -> list:
        """Values to check the key with before anything runs."""
        if self.values is not None:
            return self.values
        if self.range is not None:
            return [self.range[0]]
        return []

    def ray_domain(self) -> Any:
        from ray import tune as rt

        if self.values is not None:
            return rt.choice(self.values)
        if self.range is not None:
            lo, hi = self.range
            return rt.randint(lo, hi + 1) if self.integer() else rt.uniform(lo, hi)
        return self.domain


def _parse_space(space: Mapping[str, Any]) -> List[_Key]:
    if not isinstance(space, Mapping) or not space:
        raise FraglabError("space: expected a non-empty dict {KEY: [values] | (lo, hi) | ray.tune distribution}")
    return [_Key(str(k), v) for k, v in space.items()]


def _grid_size(keys: List[_Key]) -> Optional[int]:
    if not all(k.categorical for k in keys):
        return None
    return math.prod(len(k.values) for k in keys)


def _check_points(keys: List[_Key], points: Optional[Sequence[Mapping[str, Any]]], grid: bool) -> List[Dict[str, Any]]:
    names = [k.name for k in keys]
    out = []
    for p in points or []:
        if not isinstance(p, Mapping) or set(p) != set(names):
            raise FraglabError(f"points_to_evaluate: {p!r}: expected a dict of every key of the space ({', '.join(names)})")
        if grid and any(p[k.name] not in k.values for k in keys):
            raise FraglabError(f"points_to_evaluate: {dict(p)!r} is outside the grid: add its values to the space")
        out.append({n: p[n] for n in names})
    return out


def _local_trials(
    keys: List[_Key], budget: Optional[int], seed: int, points: Sequence[Dict[str, Any]] = ()
) -> Tuple[str, List[Dict[str, Any]]]:
    """The trials of the local search, in order: the whole grid when the space is categorical
    and fits in the budget (``points`` first), else ``points`` and then random points up to
    ``budget`` (distinct ones for a categorical space) drawn with ``random.Random(seed)``."""
    names = [k.name for k in keys]
    n = _grid_size(keys)
    first = [dict(p) for i, p in enumerate(points) if p not in points[:i]]
    if n is not None and (budget is None or n <= budget):
        grid = [dict(zip(names, c)) for c in itertools.product(*(k.values for k in keys))]
        return "grid", first + [p for p in grid if p not in first]
    if budget is None:
        raise FraglabError("budget: needed for a space with ranges or distributions (how many trials)")
    rng = random.Random(seed)
    trials = first[:budget]
    if n is not None:
        tried = set()
        while len(trials) < budget and len(tried) < n:
            idx = rng.randrange(n)
            if idx in tried:
                continue
            tried.add(idx)
            combo = {}
            for k in reversed(keys):
                idx, i = divmod(idx, len(k.values))
                combo[k.name] = k.values[i]
            p = {name: combo[name] for name in names}
            if p not in trials:
                trials.append(p)
        return "random", trials
    import numpy as np

    nprng = np.random.RandomState(seed)
    return "random", trials + [{k.name: k.sample(rng, nprng) for k in keys} for _ in range(budget - len(trials))]


# --- the spec, objective and constraints ----------------------------------------------------


def _split_spec(spec: Union[str, os.PathLike], overrides: Optional[Mapping[str, Any]]) -> Tuple[str, Dict[str, Any], bool]:
    """(the spec for ``_native.run``: an absolute path, ``example:NAME`` or TOML text; its
    overrides; whether it is in the file/example form ``SPEC@KEY=VALUE,...`` compare takes)."""
    s = os.fspath(spec)
    base: Dict[str, Any] = {}
    config_form = "\n" not in s
    if config_form:
        path, sep, _ = s.partition("@")
        if sep:
            base.update(_config_params(s))
        s = path
        if not s.startswith("example:"):
            s = os.path.abspath(s)
    base.update(dict(overrides or {}))
    return s, base, config_form


def _check_keys(spec: str, base: Mapping[str, Any], keys: List[_Key], config_form: bool) -> None:
    """Loads the spec with each value of each key (parsing only, nothing runs), so that a bad
    key or value raises :class:`SpecError` naming it before the first trial."""
    if not config_form:
        return
    for k in keys:
        for v in k.probe_values():
            ovr = {**base, k.name: v}
            kv = [f"{a}={_override_value(b)}" for a, b in ovr.items()]
            if any("," in x[x.index("=") :] or "@" in x for x in kv):
                continue
            _native.config_label(spec + "@" + ",".join(kv))


def _constraints(constraints: Constraints) -> List[Tuple[str, Any]]:
    """[(column, check)]: check is (metric, op, value) or a callable on a Result."""
    if constraints is None:
        return []
    if callable(constraints):
        constraints = [constraints]
    out: List[Tuple[str, Any]] = []
    if isinstance(constraints, Mapping):
        items: list = [(m, *c) for m, c in constraints.items()]
    else:
        items = list(constraints)
    for i, c in enumerate(items):
        if callable(c):
            name = getattr(c, "__name__", "") or ""
            out.append((f"constraint:{name if name and name != '<lambda>' else i}", c))
            continue
        if not (isinstance(c, tuple) and len(c) == 3 and c[1] in _OPS):
            raise FraglabError(
                f"constraints: {c!r}: expected a callable (Result -> bool) or {{METRIC: (OP, VALUE)}} "
                f"with OP one of {' '.join(_OPS)}"
            )
        metric, op, value = c
        out.append((f"{metric} {op} {value}", (str(metric), op, float(value))))
    return out


def _metrics(label: str, text: str) -> Tuple[Dict[str, float], List[str]]:
    """A run's metrics as the compare table of that run alone has them (its Amean, or Hmean,
    and derived rows) and the names of every row, measured or not (NaN: not measured)."""
    report = json.loads(_native.compare_results([(label, label, text)]))
    out: Dict[str, float] = {}
    names: List[str] = []
    for row in report["rows"]:
        names.append(row["metric"])
        if row["stat"] in ("Amean", "Hmean", "") and row["metric"] not in out and not row.get("unmeasured"):
            out[row["metric"]] = row["values"][0]
    return out, names


def _evaluate(
    spec: str,
    base: Mapping[str, Any],
    params: Mapping[str, Any],
    runs: int,
    objective: Objective,
    constraints: List[Tuple[str, Any]],
    cancel: Any = None,
) -> Dict[str, Any]:
    """One trial: ``runs`` runs of the spec with ``params`` (seeds: the spec's, +1, ...), the
    objective's mean, the constraints, the seeds and the cost. Runs wherever it is called (a
    thread here, a Ray Tune worker)."""
    ovr = [(str(k), _override_value(v)) for k, v in {**base, **params}.items()]
    t0, c0 = time.monotonic(), time.process_time()
    results: List[Result] = []
    warns: List[str] = []
    for r in range(runs):
        seed = None if r == 0 else results[0].raw["seed"] + r
        kind, text, rows, w = _native.run(spec, ovr, seed, cancel)
        warns.extend(w)
        if kind != "timed":
            raise FraglabError("tune: the spec has no [workload] (a timed run is needed for its metrics)")
        results.append(Result(kind, text, rows))
    row = _score(results, objective, constraints)
    row["wall_s"] = time.monotonic() - t0
    row["cpu_s"] = time.process_time() - c0
    row["warnings"] = warns
    return row


def _score(results: List[Result], objective: Objective, constraints: List[Tuple[str, Any]]) -> Dict[str, Any]:
    """A trial's row from its runs' results: the objective's mean, the constraints, the seeds
    and the simulated time (the caller adds the wall and CPU time)."""
    seeds: List[int] = []
    values: List[float] = []
    metric_runs: List[Dict[str, float]] = []
    checks: Dict[str, List[bool]] = {name: [] for name, _ in constraints}
    sim_ns = 0
    for res in results:
        text = res.json
        seeds.append(res.raw["seed"])
        sim_ns += res.raw["duration_ns"]
        m, names = _metrics("trial", text)
        # The printed mmtests rows too ("Hugealloc Time mean (us)", "OOM kills"), where the
        # compare table names the metric otherwise.
        for name, value in zip(res.mmtests["metric"], res.mmtests["value"]):
            if name not in m:
                m[name] = float(value)
                names.append(name)
        metric_runs.append(m)
        wanted = [] if callable(objective) else [("objective", objective)]
        wanted += [("constraint", c[0]) for _, c in constraints if not callable(c)]
        for what, name in wanted:
            if name not in names:
                raise FraglabError(
                    f"{what} {name!r}: no such metric; the runs' metrics are: " + "; ".join(dict.fromkeys(names))
                )
        if callable(objective):
            values.append(float(objective(res)))
        else:
            values.append(m.get(objective, float("nan")))
        for name, c in constraints:
            if callable(c):
                checks[name].append(bool(c(res)))
    row: Dict[str, Any] = {"objective": _mean(values)}
    feasible = not math.isnan(row["objective"])
    for name, c in constraints:
        if callable(c):
            ok = all(checks[name])
        else:
            metric, op, value = c
            mean = _mean([m.get(metric, float("nan")) for m in metric_runs])
            row[f"metric:{metric}"] = mean
            ok = not math.isnan(mean) and _OPS[op](mean, value)
        row[f"check:{name}"] = ok
        feasible = feasible and ok
    row["feasible"] = feasible
    row["seeds"] = seeds
    row["simulated_s"] = sim_ns / 1e9
    return row


def _mean(xs: List[float]) -> float:
    xs = [x for x in xs if not math.isnan(x)]
    return sum(xs) / len(xs) if xs else float("nan")


# --- the result -------------------------------------------------------------------------------


class TuneResult:
    """What :func:`tune` returns.

    Attributes
    ----------
    best : dict or None
        The best feasible trial's settings ``{KEY: value}`` (None when no trial was feasible).
    best_value : float
        Its objective (NaN when none).
    trials : pandas.DataFrame
        One row per trial, in the order they were made: ``trial``, a column per space key, the
        objective (named after the metric, or ``objective`` for a callable), for each
        ``{metric: (op, value)}`` constraint the metric's mean and a bool column ``"METRIC OP
        VALUE"``, for each callable constraint a bool column ``constraint:NAME``, ``feasible``,
        ``seeds`` (the simulation seeds of its runs), ``simulated_s``, ``wall_s`` and ``cpu_s``
        (process CPU time of the trial: exact on Ray, where a worker runs one trial at a time,
        and on the local backend with ``jobs=1``; NaN on local threads run in parallel).
    cost : dict
        ``trials``, ``runs``, ``simulated_s`` (total), ``wall_s`` (the whole search),
        ``cpu_s`` (local: this process's CPU time over the search; Ray: the trials' own),
        ``backend`` and ``search``.
    objective, mode, keys, search, backend
        As given / chosen: the objective column's name, ``"max"``/``"min"``, the space's keys,
        ``"grid"``, ``"random"`` or ``"optuna"``, ``"local"`` or ``"ray"``.
    """

    def __init__(self, trials: pd.DataFrame, objective: str, mode: str, keys: List[str], cost: dict):
        self.trials = trials
        self.objective = objective
        self.mode = mode
        self.keys = keys
        self.cost = cost
        self.search = cost["search"]
        self.backend = cost["backend"]
        ok = trials[trials["feasible"] & trials[objective].notna()] if len(trials) else trials
        if len(ok):
            col = ok[objective]
            i = col.idxmax() if mode == "max" else col.idxmin()  # the first of equal bests
            self.best: Optional[Dict[str, Any]] = {k: _plain(ok.loc[i, k]) for k in keys}
            self.best_value = float(ok.loc[i, objective])
        else:
            self.best = None
            self.best_value = float("nan")

    def __repr__(self) -> str:
        return (
            f"<fraglab.TuneResult: {len(self.trials)} trials ({self.search}, {self.backend}), "
            f"{self.mode} {self.objective!r} = {self.best_value:g} at {self.best}>"
        )

    def to_dict(self) -> dict:
        """The result as plain JSON-able data (what ``fraglab tune --json`` writes)."""
        t = self.trials.copy()
        return {
            "objective": self.objective,
            "mode": self.mode,
            "best": self.best,
            "best_value": None if math.isnan(self.best_value) else self.best_value,
            "cost": self.cost,
            "trials": json.loads(t.to_json(orient="records")),
        }

    def plot_sensitivity(self, figsize: Optional[Tuple[float, float]] = None):
        """The objective per value of each key: a box plot per value with every trial as a dot
        (hollow: infeasible), one panel per key. Needs matplotlib.

        Returns
        -------
        matplotlib.figure.Figure
        """
        try:
            import matplotlib.pyplot as plt
        except ImportError as e:
            raise FraglabError("plot_sensitivity needs matplotlib (pip install matplotlib)") from e
        n = len(self.keys)
        fig, axes = plt.subplots(1, n, figsize=figsize or (4.2 * n, 3.6), squeeze=False)
        t = self.trials
        for ax, key in zip(axes[0], self.keys):
            levels = list(dict.fromkeys(t[key].tolist()))
            try:
                levels = sorted(levels)
            except TypeError:
                pass
            numeric_range = len(levels) > 8 and all(isinstance(v, (int, float)) for v in levels)
            if numeric_range:
                for feas, marker in ((True, "o"), (False, "x")):
                    s = t[t["feasible"] == feas]
                    ax.scatter(s[key], s[self.objective], marker=marker, alpha=0.8)
            else:
                data = [t[t[key] == v][self.objective].dropna().tolist() for v in levels]
                ax.boxplot(data, widths=0.5)
                rng = random.Random(0)
                for i, v in enumerate(levels, start=1):
                    s = t[t[key] == v]
                    xs = [i + rng.uniform(-0.12, 0.12) for _ in range(len(s))]
                    fc = ["C0" if f else "none" for f in s["feasible"]]
                    ax.scatter(xs, s[self.objective], facecolors=fc, edgecolors="C0", zorder=3, s=18)
                ax.set_xticks(range(1, len(levels) + 1))
                ax.set_xticklabels([str(v) for v in levels], rotation=30, ha="right")
            ax.set_title(key, fontsize=9)
            ax.set_ylabel(self.objective)
        fig.tight_layout()
        return fig


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


# --- the search -------------------------------------------------------------------------------


def tune(
    spec: Union[str, os.PathLike],
    space: Mapping[str, Any],
    objective: Objective,
    mode: str = "max",
    constraints: Constraints = None,
    budget: Optional[int] = None,
    backend: Optional[str] = None,
    address: Optional[str] = None,
    seed: int = 0,
    runs_per_trial: int = 1,
    jobs: Optional[int] = None,
    overrides: Optional[Mapping[str, Any]] = None,
    points_to_evaluate: Optional[Sequence[Mapping[str, Any]]] = None,
    fork_at: Optional[str] = None,
    checkpoint: Union[str, os.PathLike, None] = None,
) -> TuneResult:
    """Searches ``space`` for the settings with the best ``objective``.

    Each trial runs the spec with one point of the space as overrides, ``runs_per_trial`` times
    (the spec's seed, +1, +2, ...: every trial sees the same seeds) and takes the mean
    objective. A categorical space that fits in ``budget`` (or any categorical space without a
    budget) is searched whole (a grid); otherwise ``budget`` random points are tried.

    Parameters
    ----------
    spec : str or os.PathLike
        What :func:`run` takes: a spec file, ``example:NAME`` or TOML text (a spec with
        ``[machine] snapshot`` or a replay trace too); files and examples may carry compare's
        ``@KEY=VALUE,...`` overrides. It must be a timed spec (a ``[workload]``).
    space : dict
        ``{KEY: [values]}`` (categorical), ``{KEY: (lo, hi)}`` (a range: integers if both are
        ints, else uniform floats) or ``{KEY: ray.tune distribution}``; KEY as compare's
        ``@KEY`` (``vm.defrag_mode``, ``transparent_hugepage/defrag``, ``model.defrag_stage``,
        ``workload.X``...).
    objective : str or callable
        A metric of the run's compare table (the mmtests rows and derived rows: ``"THP fault
        alloc"``, ``"Direct compact success rate %"``, ``"Hugealloc Time mean (us)"``), its
        Amean over the run's samples; or a callable ``Result -> float``.
    mode : {"max", "min"}
    constraints : dict, callable or list, optional
        ``{METRIC: (OP, VALUE)}`` (OP one of ``< <= > >= == !=``, on the trial's mean of
        METRIC) and/or callables ``Result -> bool`` (every run of the trial must pass). A trial
        that fails one is infeasible: listed, never best.
    budget : int, optional
        The most trials (``num_samples`` on Ray). Needed for spaces with ranges.
    backend : {"ray", "local"}, optional
        Default: Ray Tune when ``ray.tune`` is importable, else local threads. ``"ray"``
        without Ray Tune falls back to local with a :class:`FraglabWarning`.
    address : str, optional
        The Ray cluster (``ray.init(address=...)``; none: a local cluster), unless Ray is
        initialised already.
    seed : int, default 0
        The search's seed. On the local backend the same seed gives the same trials in the
        same order (and, the simulator being deterministic, the same table). On Ray the grid
        and the random search are the local backend's trials too (drawn here from the seed,
        given to ``BasicVariantGenerator`` as ``points_to_evaluate``; the table is put back in
        their order, whatever order the cluster ran them in). With optuna installed, Ray
        searches with Optuna's ``TPESampler(seed)`` instead: its suggestions depend on which
        results it has seen, in the order trials finish, so the trials can differ from one
        search to the next.
    runs_per_trial : int, default 1
        Runs (seeds) per trial; the objective is their mean.
    jobs : int, optional
        Threads for the local backend (default: the CPUs).
    overrides : dict, optional
        Fixed overrides for every trial (``{"workload.duration": "5s"}``); the space's keys
        override them.
    points_to_evaluate : list of dict, optional
        Settings to try first (every key of the space), e.g. the configurations in use today:
        the search then finds settings at least as good as the best of them. They count in
        the budget; a grid includes them already (a point outside the grid is an error).
    fork_at : str, optional
        Warm forks (docs/compare-and-report.md): the first trial's run goes to this simulated
        time once per seed, and every other trial forks from it there with its own settings, so
        the warm-up runs once, not once per trial. The space may then hold only knobs and
        ``model.*`` settings; the local backend's trials run through the ``fraglab`` binary
        (``$FRAGLAB_BIN`` or PATH). A trial's objective covers its whole run, warm-up included.
    checkpoint : str or os.PathLike, optional
        Every trial continues from this checkpoint file (``fraglab run --checkpoint-at``,
        docs/checkpoints.md) instead of booting, on either backend (with Ray the file must be
        readable at the same absolute path on every node). The space may then hold only knobs
        and ``model.*`` settings, and ``runs_per_trial`` must be 1. A trial's objective covers
        its whole run, warm-up (under the checkpoint's settings) included.

    Returns
    -------
    TuneResult

    Raises
    ------
    SpecError
        A bad spec, or a space key or value the spec does not take (naming the key), before
        anything runs (for file and example specs).
    FraglabError
        Bad arguments, an unknown objective metric, a run that failed.
    KeyboardInterrupt
        Ctrl-C: the local runs are cancelled within milliseconds; Ray Tune stops the
        experiment and kills its running trials (~10 s, Tune's force-cleanup timeout).
    """
    if mode not in ("max", "min"):
        raise FraglabError(f"mode {mode!r}: expected 'max' or 'min'")
    if runs_per_trial < 1:
        raise FraglabError("runs_per_trial must be at least 1")
    if budget is not None and budget < 1:
        raise FraglabError("budget must be at least 1")
    if jobs is not None and jobs < 1:
        raise FraglabError("jobs must be at least 1")
    if not (isinstance(objective, str) or callable(objective)):
        raise FraglabError("objective: a metric name or a callable Result -> float")
    if backend not in (None, "local", "ray"):
        raise FraglabError(f"backend {backend!r}: expected 'local' or 'ray'")
    keys = _parse_space(space)
    n_grid = _grid_size(keys)
    points = _check_points(keys, points_to_evaluate, n_grid is not None and (budget is None or n_grid <= budget))
    cons = _constraints(constraints)
    if checkpoint is not None:
        if fork_at is not None:
            raise FraglabError("checkpoint and fork_at: give one (a warm start from a file, or a fork)")
        if runs_per_trial != 1:
            raise FraglabError("checkpoint: a checkpoint holds one seed's run: runs_per_trial must be 1")
        from . import _checkpoint_path

        overrides = {**(overrides or {}), "machine.checkpoint": _checkpoint_path(checkpoint)}
    spec_s, base, config_form = _split_spec(spec, overrides)
    _check_keys(spec_s, base, keys, config_form)
    if fork_at is not None and backend is None:
        backend = "local"
    if backend != "local":
        try:
            import ray.tune  # noqa: F401
        except ImportError:
            if backend == "ray":
                warnings.warn(
                    "backend='ray': ray.tune is not importable (pip install 'ray[tune]'); searching on local threads",
                    FraglabWarning,
                    stacklevel=2,
                )
            backend = "local"
        else:
            backend = "ray"
    obj_col = objective if isinstance(objective, str) else "objective"
    t0, c0 = time.monotonic(), time.process_time()
    if fork_at is not None and backend == "ray":
        raise FraglabError("fork_at forks the trials from one run on this machine: backend='local' only")
    if backend == "local" and fork_at is not None:
        if not config_form:
            raise FraglabError("fork_at: the spec must be a file or example:NAME (the binary runs it)")
        search, points = _local_trials(keys, budget, seed, points)
        c_children = os.times().children_user + os.times().children_system
        rows = _run_forked(spec_s, base, points, runs_per_trial, objective, cons, str(fork_at))
        cpu_total = (time.process_time() - c0) + (
            os.times().children_user + os.times().children_system - c_children
        )
    elif backend == "local":
        search, points = _local_trials(keys, budget, seed, points)
        rows = _run_local(spec_s, base, points, runs_per_trial, objective, cons, jobs)
        cpu_total = time.process_time() - c0
    else:
        search, points, rows = _run_ray(
            spec_s, base, keys, budget, seed, runs_per_trial, objective, cons, address, mode, points
        )
        cpu_total = sum(r["cpu_s"] for r in rows) + (time.process_time() - c0)
    wall = time.monotonic() - t0
    seen = set()
    for r in rows:
        for w in r.pop("warnings"):
            if w not in seen:
                seen.add(w)
                warnings.warn(w, FraglabWarning, stacklevel=2)
    trials = _frame(keys, points, rows, obj_col, cons)
    if backend == "local" and (jobs or os.cpu_count() or 1) > 1 and len(rows) > 1:
        trials["cpu_s"] = float("nan")
    cost = {
        "trials": len(rows),
        "runs": len(rows) * runs_per_trial,
        "simulated_s": float(sum(r["simulated_s"] for r in rows)),
        "wall_s": wall,
        "cpu_s": cpu_total,
        "backend": backend,
        "search": search,
    }
    return TuneResult(trials, obj_col, mode, [k.name for k in keys], cost)


def _frame(keys, points, rows, obj_col, cons) -> pd.DataFrame:
    out = []
    for i, (p, r) in enumerate(zip(points, rows)):
        row: Dict[str, Any] = {"trial": i}
        for k in keys:
            row[k.name] = p[k.name]
        row[obj_col] = r["objective"]
        for name, c in cons:
            if not callable(c) and c[0] != obj_col:
                row[c[0]] = r[f"metric:{c[0]}"]
            row[name] = r[f"check:{name}"]
        for k in ("feasible", "seeds", "simulated_s", "wall_s", "cpu_s"):
            row[k] = r[k]
        out.append(row)
    cols = ["trial", *(k.name for k in keys), obj_col]
    for name, c in cons:
        if not callable(c) and c[0] != obj_col and c[0] not in cols:
            cols.append(c[0])
        cols.append(name)
    cols += ["feasible", "seeds", "simulated_s", "wall_s", "cpu_s"]
    return pd.DataFrame(out, columns=cols)


def _run_local(spec, base, points, runs, objective, cons, jobs) -> List[dict]:
    cancel = _native.Cancel()
    n = min(jobs or os.cpu_count() or 1, len(points))
    ex = ThreadPoolExecutor(max_workers=n, thread_name_prefix="fraglab-tune")
    futures: list = []
    try:
        futures.extend(ex.submit(_evaluate, spec, base, p, runs, objective, cons, cancel) for p in points)
        rows = [f.result() for f in futures]
    except BaseException:
        # Ctrl-C (or a failed trial): the running runs stop within milliseconds, queued ones never start.
        cancel.set()
        for f in futures:
            f.cancel()
        ex.shutdown(wait=True)
        raise
    ex.shutdown(wait=True)
    return rows


def _run_forked(spec, base, points, runs, objective, cons, fork_at) -> List[dict]:
    # Every trial forked warm from the first trial's run at `fork_at` (`sweep(fork_at=...)`,
    # through the binary): the trials may differ only in knobs and [model] settings.
    from . import sweep

    def config(i: int, p: Mapping[str, Any]) -> str:
        ovr = ",".join(f"{k}={_override_value(v)}" for k, v in {**base, **p}.items())
        return f"t{i}={spec}" + (f"@{ovr}" if ovr else "")

    t0 = time.monotonic()
    s = sweep([config(i, p) for i, p in enumerate(points)], runs=runs, fork_at=fork_at)
    wall = (time.monotonic() - t0) / max(len(points), 1)
    rows = []
    for i in range(len(points)):
        runs_i = s.runs[s.runs.config == f"t{i}"].sort_values("run")
        row = _score(list(runs_i.result), objective, cons)
        row["wall_s"] = wall
        row["cpu_s"] = float("nan")
        row["warnings"] = []
        rows.append(row)
    return rows


def _ray_trial(config, payload):
    """A Ray Tune trial (function trainable): one point, its runs, reported once."""
    from ray import tune as rt

    spec, base, names, runs, objective, cons = payload
    params = {names[k]: v for k, v in config.items()}
    # No cancellation here: Tune stops a trial by killing its actor (its `stop` waits behind
    # the running `train` call), 10 s after a Ctrl-C at the latest.
    row = _evaluate(spec, base, params, runs, objective, cons)
    score = row["objective"] if row["feasible"] else float("nan")
    rt.report({"score": score, "row": json.dumps(row), "params": json.dumps(params)})


def _run_ray(spec, base, keys, budget, seed, runs, objective, cons, address, mode, first):
    import ray
    from ray import tune as rt

    if not ray.is_initialized():
        ray.init(address=address)
    # Ray Tune reads "/" in a config key as a path: the keys go as p0, p1, ...
    names = {f"p{i}": k.name for i, k in enumerate(keys)}
    n = _grid_size(keys)
    tune_config: Dict[str, Any] = {}
    if n is not None and (budget is None or n <= budget):
        search = "grid"
        param_space = {f"p{i}": rt.grid_search(k.values) for i, k in enumerate(keys)}
        expected = n
        tune_config["num_samples"] = 1
    else:
        if budget is None:
            raise FraglabError("budget: needed for a space with ranges or distributions (how many trials)")
        param_space = {f"p{i}": k.ray_domain() for i, k in enumerate(keys)}
        safe = [{f"p{i}": p[k.name] for i, k in enumerate(keys)} for p in first] or None
        expected = budget
        tune_config["num_samples"] = budget
        try:
            import optuna
            from ray.tune.search.optuna import OptunaSearch

            search = "optuna"
            tune_config["search_alg"] = OptunaSearch(
                sampler=optuna.samplers.TPESampler(seed=seed), points_to_evaluate=safe
            )
            tune_config["metric"], tune_config["mode"] = "score", mode
        except ImportError:
            from ray.tune.search.basic_variant import BasicVariantGenerator

            # The local search's points (distinct ones in a categorical space; Ray's own
            # sampling repeats points), run by Ray: the same trials as backend="local".
            search = "random"
            local = _local_trials(keys, budget, seed, first)[1]
            safe = [{f"p{i}": p[k.name] for i, k in enumerate(keys)} for p in local]
            tune_config["search_alg"] = BasicVariantGenerator(random_state=seed, points_to_evaluate=safe)
    # Tune's progress box and table (the "new output" engine) on stdout: off, as verbose=0 asks.
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    storage = tempfile.mkdtemp(prefix="fraglab-tune-")
    payload = (spec, dict(base), names, runs, objective, cons)
    try:
        tuner = rt.Tuner(
            rt.with_parameters(_ray_trial, payload=payload),
            param_space=param_space,
            tune_config=rt.TuneConfig(**tune_config),
            run_config=rt.RunConfig(storage_path=storage, name="fraglab-tune", verbose=0),
        )
        grid = tuner.fit()
        errors = [r.error for r in grid if r.error is not None]
        done = [r for r in grid if r.metrics and "row" in r.metrics]
        if len(done) < expected and all("interrupted" in str(getattr(e, "cause", None) or e) for e in errors):
            # Tune's own SIGINT handler stopped the search (its trials cancelled, or never
            # started) and returned what had finished.
            raise KeyboardInterrupt(f"Ray Tune stopped after {len(done)} of {expected} trials")
        if errors:
            e = errors[0]
            cause = getattr(e, "cause", None) or e
            raise FraglabError(f"a Ray Tune trial failed: {cause}") from e
        if len(done) < expected:
            raise KeyboardInterrupt(f"Ray Tune stopped after {len(done)} of {expected} trials")
        points = [json.loads(r.metrics["params"]) for r in done]
        rows = [json.loads(r.metrics["row"]) for r in done]
        if search != "optuna":
            # The trials in the local backend's order (the grid in itertools.product order, or
            # the seed's random points), so that the table is the local one's.
            want = [json.dumps(p, sort_keys=True) for p in _local_trials(keys, budget, seed, first)[1]]
            got = [json.dumps(p, sort_keys=True) for p in points]
            if sorted(want) == sorted(got):
                idx = []
                for w in want:
                    i = next(j for j, g in enumerate(got) if g == w and j not in idx)
                    idx.append(i)
                points = [points[i] for i in idx]
                rows = [rows[i] for i in idx]
    finally:
        shutil.rmtree(storage, ignore_errors=True)
    return search, points, rows


# --- the command line (`fraglab tune`) -----------------------------------------------------------


def _cli_value(s: str) -> Any:
    from . import _param_value

    return _param_value(s)


def _cli_space(items: List[str]) -> Dict[str, Any]:
    space: Dict[str, Any] = {}
    for it in items:
        key, eq, vals = it.partition("=")
        if not eq or not key or not vals:
            raise FraglabError(f"--space {it}: expected KEY=V1,V2,... or KEY=LO..HI")
        if ".." in vals and "," not in vals:
            lo, _, hi = vals.partition("..")
            lo_v, hi_v = _cli_value(lo), _cli_value(hi)
            if not all(isinstance(x, (int, float)) for x in (lo_v, hi_v)):
                raise FraglabError(f"--space {it}: a range LO..HI of numbers")
            space[key] = (lo_v, hi_v)
        else:
            space[key] = [_cli_value(v) for v in vals.split(",")]
    return space


def _cli_constraints(items: List[str]) -> List[Tuple[str, str, float]]:
    out = []
    for it in items:
        for op in ("<=", ">=", "==", "!=", "<", ">"):
            metric, sep, value = it.partition(op)
            if sep:
                try:
                    out.append((metric.strip(), op, float(value)))
                except ValueError:
                    raise FraglabError(f"--constraint {it}: the value {value.strip()!r} is not a number") from None
                break
        else:
            raise FraglabError(f"--constraint {it}: expected METRIC OP VALUE (OP one of < <= > >= == !=)")
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(
        prog="fraglab tune",
        description="Search knob settings for the best value of a metric (fraglab.tune).",
    )
    p.add_argument("spec", help="a spec file or example:NAME, optionally SPEC@KEY=VALUE,...")
    p.add_argument("--space", action="append", default=[], metavar="KEY=V1,V2|LO..HI", help="a key of the space (repeat)")
    p.add_argument("--objective", required=True, help='a metric of the compare table, e.g. "THP fault alloc"')
    p.add_argument("--min", action="store_true", help="minimise the objective (default: maximise)")
    p.add_argument("--budget", type=int, help="the most trials (needed with ranges)")
    p.add_argument("--backend", choices=["local", "ray"], help="default: ray if ray[tune] is installed, else local")
    p.add_argument("--address", help="the Ray cluster's address (default: a local cluster)")
    p.add_argument("--seed", type=int, default=0, help="the search's seed (default 0)")
    p.add_argument("--runs-per-trial", type=int, default=1, help="runs (seeds) per trial, objective averaged")
    p.add_argument("--jobs", type=int, help="threads for the local backend")
    p.add_argument("--constraint", action="append", default=[], metavar="METRIC<=VALUE", help="a trial must meet it (repeat)")
    p.add_argument("--json", metavar="OUT", help="write the result (best, cost, trials) as JSON")
    p.add_argument(
        "--fork-at", metavar="T", help="fork every trial from the first trial's run at simulated time T (local)"
    )
    p.add_argument("--from-checkpoint", metavar="FILE", help="every trial continues from this checkpoint file")
    a = p.parse_args(argv)
    if not a.space:
        p.error("at least one --space KEY=V1,V2,... is needed")
    try:
        if a.json:
            from . import _check_output

            _check_output("--json", a.json)
        t = tune(
            a.spec,
            _cli_space(a.space),
            a.objective,
            mode="min" if a.min else "max",
            constraints=_cli_constraints(a.constraint) or None,
            budget=a.budget,
            backend=a.backend,
            address=a.address,
            seed=a.seed,
            runs_per_trial=a.runs_per_trial,
            jobs=a.jobs,
            fork_at=a.fork_at,
            checkpoint=a.from_checkpoint,
        )
    except FraglabError as e:
        print(f"fraglab tune: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("fraglab tune: interrupted", file=sys.stderr)
        return 130
    with pd.option_context("display.width", 200, "display.max_columns", None, "display.max_rows", None):
        print(t.trials.drop(columns=["seeds"]).to_string(index=False))
    print(f"\nbest ({t.mode} {t.objective}): {t.best_value:g} at {t.best}")
    c = t.cost
    print(
        f"cost: {c['trials']} trials ({c['search']}, {c['backend']}), {c['runs']} runs, "
        f"{c['simulated_s']:.1f} s simulated, {c['wall_s']:.1f} s wall, {c['cpu_s']:.1f} s CPU"
    )
    if a.json:
        from . import _write_via_tmp

        _write_via_tmp(a.json, json.dumps(t.to_dict(), indent=2) + "\n")
    return 0 if t.best is not None else 3


