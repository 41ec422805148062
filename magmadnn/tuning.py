"""Hyperparameter search: ``grid_search`` and ``random_search``, in parallel over MPI ranks or local processes.

``build_fn(params, seed)`` returns a compiled model for one configuration (``params`` a dict; ``seed`` the trial's
seed, derived from the search ``seed`` and the trial index, to pass on as ``Sequential(..., seed=seed)``). Every
trial fits on ``data = ((x, y), (x_val, y_val))`` with ``fit_kwargs`` (``batch_size`` and ``epochs`` may also be
searched: params of those names go to ``fit``) and is scored by the last epoch's ``objective`` (``"val_loss"`` by
default; ``mode="max"`` for accuracies). A trial that raises is reported with its error and ranked last.

Where the trials run (``parallel``): ``"serial"``; ``"processes"`` (``workers`` local processes, spawned, so
``build_fn`` must be importable: a module-level function or a ``functools.partial`` of one); ``"mpi"`` (trial ``i``
on rank ``i mod N``, results gathered on every rank, the best weights sent from their rank); ``"auto"`` (the
default): MPI when the script runs under ``mpiexec`` with several ranks (seen in the environment: MPI is not
initialized otherwise), else processes when ``workers > 1``, else serial. Each trial depends only on its params and
seed, so the results are the same whichever way they ran.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Trial", "SearchResult", "grid_search", "random_search", "uniform", "loguniform", "randint",
           "expand_grid"]

FIT_KEYS = ("batch_size", "epochs")
PARALLEL = ("auto", "serial", "processes", "mpi")


@dataclass
class Trial:
    """One configuration: its index in the search, params, seed, last-epoch metrics, seconds, and error if it
    failed (then ``metrics`` is empty)."""

    index: int
    params: dict
    seed: int
    metrics: dict = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None
    weights: list | None = field(default=None, repr=False)


class SearchResult:
    """Trials sorted best first by the objective (failed ones last), with the best model's weights."""

    def __init__(self, trials, objective: str, mode: str, best_weights):
        self.objective, self.mode = objective, mode
        self.trials = sorted(trials, key=lambda t: _rank_key(t, objective, mode))
        self.best_weights = best_weights

    @property
    def best(self) -> Trial | None:
        ok = [t for t in self.trials if t.error is None]
        return ok[0] if ok else None

    @property
    def failed(self) -> list[Trial]:
        return [t for t in self.trials if t.error is not None]

    def table(self) -> str:
        """A text table: rank, params, the metrics, seconds (or the error)."""
        names = sorted({k for t in self.trials for k in t.metrics})
        lines = [" | ".join(["#", "params", *names, "seconds"])]
        for place, t in enumerate(self.trials, 1):
            params = ", ".join(f"{k}={v!r}" for k, v in t.params.items())
            if t.error is not None:
                lines.append(f"{place} | {params} | failed: {t.error}")
                continue
            lines.append(" | ".join([str(place), params, *(f"{t.metrics.get(n, math.nan):.4f}" for n in names),
                                     f"{t.seconds:.2f}"]))
        return "\n".join(lines)

    def __repr__(self):
        return f"SearchResult({len(self.trials)} trials, best={self.best!r})"


def _rank_key(trial: Trial, objective: str, mode: str):
    value = trial.metrics.get(objective, math.nan) if trial.error is None else math.nan
    if not math.isfinite(value):
        return (1, 0.0, trial.index)
    return (0, value if mode == "min" else -value, trial.index)


# ------------------------------------------------------------------------------------------------ distributions


@dataclass(frozen=True)
class uniform:  # noqa: N801  (reads like scipy.stats names)
    low: float
    high: float

    def sample(self, rng) -> float:
        return float(rng.uniform(self.low, self.high))


@dataclass(frozen=True)
class loguniform:  # noqa: N801
    low: float
    high: float

    def sample(self, rng) -> float:
        if not 0 < self.low < self.high:
            raise ValueError(f"loguniform: need 0 < low < high, got {self.low}, {self.high}")
        return float(math.exp(rng.uniform(math.log(self.low), math.log(self.high))))


@dataclass(frozen=True)
class randint:  # noqa: N801
    """Integers ``low .. high`` inclusive."""

    low: int
    high: int

    def sample(self, rng) -> int:
        return int(rng.integers(self.low, self.high + 1))


def _draw(spec, rng, name):
    if hasattr(spec, "sample"):
        return spec.sample(rng)
    if isinstance(spec, (list, tuple)) and spec:
        return spec[int(rng.integers(len(spec)))]
    raise TypeError(f"random_search: {name!r} must be a non-empty list of choices or a distribution "
                    f"(uniform, loguniform, randint), got {spec!r}")


def expand_grid(param_grid: dict) -> list[dict]:
    """Every combination of ``param_grid`` (name -> list of values), in the order of its keys (last varies fastest)."""
    if not isinstance(param_grid, dict) or not param_grid:
        raise ValueError(f"grid_search: param_grid must be a non-empty dict of name -> list of values, got "
                         f"{param_grid!r}")
    for name, values in param_grid.items():
        if not isinstance(values, (list, tuple)) or not values:
            raise ValueError(f"grid_search: param_grid[{name!r}] must be a non-empty list, got {values!r}")
    names = list(param_grid)
    return [dict(zip(names, combo)) for combo in itertools.product(*(param_grid[n] for n in names))]


# ------------------------------------------------------------------------------------------------ searches


def grid_search(build_fn, param_grid: dict, data, *, fit_kwargs=None, objective: str = "val_loss",
                mode: str = "min", seed: int = 0, parallel: str = "auto", workers: int | None = None,
                keep_weights: bool = True) -> SearchResult:
    """Train one model per combination of ``param_grid``; see the module docstring."""
    return _search(build_fn, expand_grid(param_grid), data, fit_kwargs, objective, mode, seed, parallel, workers,
                   keep_weights)


def random_search(build_fn, distributions: dict, data, n_trials: int, *, fit_kwargs=None,
                  objective: str = "val_loss", mode: str = "min", seed: int = 0, parallel: str = "auto",
                  workers: int | None = None, keep_weights: bool = True) -> SearchResult:
    """``n_trials`` configurations drawn (from ``seed``) from ``distributions``: name -> list of choices or
    ``uniform(lo, hi)``, ``loguniform(lo, hi)``, ``randint(lo, hi)``."""
    if isinstance(n_trials, bool) or not isinstance(n_trials, int) or n_trials < 1:
        raise ValueError(f"random_search: n_trials must be a positive int, got {n_trials!r}")
    rng = np.random.default_rng([seed, 0x7A5E])
    configs = [{name: _draw(spec, rng, name) for name, spec in distributions.items()} for _ in range(n_trials)]
    return _search(build_fn, configs, data, fit_kwargs, objective, mode, seed, parallel, workers, keep_weights)


def trial_seed(seed: int, index: int) -> int:
    return int(np.random.SeedSequence([int(seed), int(index)]).generate_state(1)[0] & 0x7FFFFFFF)


def run_trial(build_fn, index: int, params: dict, seed: int, data, fit_kwargs: dict, keep_weights: bool) -> Trial:
    """Build, fit and score one configuration; an exception becomes the trial's ``error``."""
    trial = Trial(index, dict(params), seed)
    start = time.perf_counter()
    try:
        (x, y), validation = data
        kwargs = {"verbose": 0, **fit_kwargs, **{k: params[k] for k in FIT_KEYS if k in params}}
        model = build_fn(dict(params), seed)
        history = model.fit(x, y, validation_data=validation, **kwargs)
        trial.metrics = {k: float(v[-1]) for k, v in history.history.items() if len(v)}
        if keep_weights:
            trial.weights = model.get_weights()
    except Exception as exc:  # noqa: BLE001  (a failing trial is reported, not fatal)
        trial.error = f"{type(exc).__name__}: {exc}"
    trial.seconds = time.perf_counter() - start
    return trial


def _search(build_fn, configs, data, fit_kwargs, objective, mode, seed, parallel, workers, keep_weights):
    if mode not in ("min", "max"):
        raise ValueError(f"search: mode must be 'min' or 'max', got {mode!r}")
    if parallel not in PARALLEL:
        raise ValueError(f"search: parallel must be one of {PARALLEL}, got {parallel!r}")
    if not (isinstance(data, (tuple, list)) and len(data) == 2 and all(len(d) == 2 for d in data)):
        raise ValueError("search: data must be ((x, y), (x_val, y_val))")
    jobs = [(build_fn, i, params, trial_seed(seed, i), data, dict(fit_kwargs or {}), keep_weights)
            for i, params in enumerate(configs)]
    how = _choose(parallel, workers)
    if how == "mpi":
        return _over_mpi(jobs, objective, mode)
    if how == "processes":
        import concurrent.futures as cf
        import multiprocessing as mp

        with cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
            trials = list(pool.map(run_trial, *zip(*jobs)))
    else:
        trials = [run_trial(*job) for job in jobs]
    return _result(trials, objective, mode)


def _choose(parallel: str, workers) -> str:
    if parallel != "auto":
        return parallel
    from . import distributed

    if distributed.launched() and distributed.is_available() and distributed.size() > 1:
        return "mpi"
    return "processes" if workers and workers > 1 else "serial"


def _result(trials, objective, mode) -> SearchResult:
    done = [t for t in trials if t.error is None]
    if done and all(objective not in t.metrics for t in done):
        raise ValueError(f"search: objective {objective!r} is not among the trials' metrics "
                         f"{sorted(done[0].metrics)}")
    ranked = sorted(trials, key=lambda t: _rank_key(t, objective, mode))
    best = ranked[0] if ranked and ranked[0].error is None and ranked[0].metrics.get(objective) is not None else None
    weights = best.weights if best is not None else None
    for t in trials:
        t.weights = None
    return SearchResult(trials, objective, mode, weights)


def _over_mpi(jobs, objective, mode) -> SearchResult:
    from . import distributed

    world = distributed.init()
    rank, size = world.Get_rank(), world.Get_size()
    mine = [run_trial(*job) for job in jobs[rank::size]]
    local_weights = {t.index: t.weights for t in mine}
    for t in mine:
        t.weights = None
    trials = [t for part in world.allgather(mine) for t in part]
    result = _result(trials, objective, mode)
    if result.best is not None:
        owner = result.best.index % size
        result.best_weights = world.bcast(local_weights.get(result.best.index) if rank == owner else None, owner)
    return result
