"""Statistics of ``hf-ext bench ert`` on one synthetic data set, the simulation loop over data sets, and the
Monte-Carlo test threshold. Only the benchmark imports this module.

scikit-learn's OpenMP estimators are imported at module load, before any ``threadpool_limits`` block: the
limit only reaches a runtime that is already loaded, and an unlimited one spins its threads on a busy machine
(a cross-fit then takes tens of times longer)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.cluster import KMeans
from sklearn.ensemble import HistGradientBoostingClassifier

from benchmarks.ert import shapes as shapes
from benchmarks.ert.config import BenchConfig
from benchmarks.harness import Timer
from hf_ext.ert import group_metrics
from hf_ext.ert.core import (
    cross_fit_predictions,
    ert_table,
    per_sample_excess_risk,
    poisson_binomial_pmf,
    split_test,
)
from hf_ext.ert.slab import worst_slab_coverage

#: ERT-L1 cross-fitted as in the paper; compared with the baselines at a simulated-null threshold.
METHOD = "ERT-L1"
#: The p-value hf-ext ships: exact held-out test of ERT-L1, null "coverage does not depend on x".
HELD_OUT = "ERT-L1 held-out test"
#: The same held-out test with the null "coverage equals tau everywhere" (the earlier default).
HELD_OUT_TARGET = "ERT-L1 held-out test (null p = tau)"
#: Normal approximation on the pooled cross-fitted differences (folds share training data).
ZTEST = "ERT-L1 cross-fit z-test"
BASELINES = ("CovGap", "CovGap (weighted)", "WSC")
#: Trivial baseline: rejects with probability ``level`` whatever the data.
RANDOM = "random test"
THRESHOLDED = (METHOD, *BASELINES)
#: Stable integer code per kind of data set, used to derive data-set seeds.
_CODES = {
    "null": 0,
    "localized": 2,
    "oblique": 3,
    "step": 4,
    "xor": 5,
    "sparse": 6,
    "estimate": 7,
    "validity-null": 8,
    "validity-alt": 9,
    "conformal": 10,
}


def bench_classifier(cfg: BenchConfig, seed: int) -> Any:
    """The uncalibrated HGB of the power study (cheap; ERT-L1 only needs the side of tau)."""
    return HistGradientBoostingClassifier(
        max_iter=cfg.hgb_max_iter, max_leaf_nodes=cfg.hgb_leaves, early_stopping=False, random_state=seed
    )


def z_test(diffs: np.ndarray) -> tuple[float, float]:
    """``(one-sided p-value, standard error)`` of ``mean(diffs) > 0`` by a normal approximation, treating the
    pooled cross-fitted per-sample differences as independent (they are not: folds share training data)."""
    se = float(np.std(diffs, ddof=1)) / math.sqrt(diffs.size)
    if se == 0.0:
        return (1.0 if diffs.mean() <= 0 else 0.0), se
    return 0.5 * math.erfc(float(diffs.mean()) / se / math.sqrt(2.0)), se


def exact_size(n_above: int, n_below: int, tau: float, level: float) -> float:
    """Exact null rejection probability of the held-out test at ``level`` given the sides of tau that h
    picked (``n_above``, ``n_below`` rows; constant ``tau``): ``max {P_H0(W >= w) : P_H0(W >= w) <= level}``.

    The test is exact but discrete, so this is <= ``level``; averaged over null data sets it is the test's
    false-positive rate without Monte-Carlo noise."""
    pmf = np.convolve(
        poisson_binomial_pmf(np.full(n_above, tau)), poisson_binomial_pmf(np.full(n_below, tau))[::-1]
    )
    tail = np.cumsum(pmf[::-1])[::-1]
    return float(tail[tail <= level].max(initial=0.0))


def statistics(
    x: np.ndarray,
    z: np.ndarray,
    cfg: BenchConfig,
    seed: int,
    *,
    cross_fit: bool,
    baselines: bool,
    target_test: bool = True,
) -> dict[str, float]:
    """Every statistic on one data set (larger = more evidence of miscoverage; p-values for the tests) and
    the seconds each took (``"<name> s"``)."""
    tau = np.full(z.shape[0], cfg.tau)
    out: dict[str, float] = {"coverage": float(z.mean())}
    with Timer() as t:
        test = split_test(x, z, tau, bench_classifier(cfg, seed), cfg.test_size, seed, "uniform")
    out.update({HELD_OUT: test.p_value, f"{HELD_OUT} stat": test.statistic, f"{HELD_OUT} s": t.seconds})
    if target_test:
        with Timer() as t:
            test = split_test(x, z, tau, bench_classifier(cfg, seed), cfg.test_size, seed, "target")
        key = HELD_OUT_TARGET
        out.update({key: test.p_value, f"{key} stat": test.statistic, f"{key} s": t.seconds})
        out[f"{key} size"] = exact_size(test.n_above, test.n_below, cfg.tau, cfg.level)
    if cross_fit:
        with Timer() as t:
            h, fold = cross_fit_predictions(x, z, bench_classifier(cfg, seed), cfg.n_splits, seed)
            out[METHOD] = ert_table(h, z, tau, fold)["l1"]
            out[ZTEST], out[f"{ZTEST} se"] = z_test(per_sample_excess_risk(h, z, tau, "l1"))
        out[f"{METHOD} s"] = out[f"{ZTEST} s"] = t.seconds
    if baselines:
        with Timer() as t:
            groups = KMeans(n_clusters=cfg.covgap_groups, n_init=1, random_state=seed).fit_predict(x)
            counts, hits = group_metrics.group_sums(groups, z)
            out["CovGap"] = group_metrics.gap_from_sums(counts, hits, 1 - cfg.tau)
            out["CovGap (weighted)"] = group_metrics.gap_from_sums(counts, hits, 1 - cfg.tau, weighted=True)
        out["CovGap s"] = out["CovGap (weighted) s"] = t.seconds
        with Timer() as t:
            out["WSC"] = cfg.tau - worst_slab_coverage(x, z, cfg.wsc_delta, cfg.wsc_directions, seed)
        out["WSC s"] = t.seconds
        out[RANDOM] = float(np.random.default_rng(seed).random())
        out[f"{RANDOM} s"] = 0.0
    return out


def data_rng(seed: int, kind: str, dim: int, n: int, r: int) -> np.random.Generator:
    """The generator of data set ``r`` of a kind, dimension and size (the same in every worker)."""
    return np.random.default_rng(np.random.SeedSequence([seed, _CODES[kind], dim, n, r]))


def _one(
    p: Callable[[np.ndarray], np.ndarray] | None,
    dim: int,
    n: int,
    r: int,
    kind: str,
    cfg: BenchConfig,
    seed: int,
    flags: dict[str, bool],
) -> dict[str, float]:
    from threadpoolctl import threadpool_limits

    rng = data_rng(seed, kind, dim, n, r)
    x, z = shapes.split_conformal(dim, n, rng) if p is None else shapes.sample(p, dim, n, rng)
    with threadpool_limits(limits=1):
        return statistics(x, z, cfg, int(rng.integers(2**31 - 1)), **flags)


def simulate(
    p: Callable[[np.ndarray], np.ndarray] | None,
    dim: int,
    n: int,
    reps: int,
    kind: str,
    cfg: BenchConfig,
    seed: int,
    *,
    cross_fit: bool = True,
    baselines: bool = True,
    target_test: bool = True,
) -> list[dict[str, float]]:
    """:func:`statistics` on ``reps`` data sets drawn from ``p`` (``None``: the well-specified split-conformal
    predictor of :func:`benchmarks.ert.shapes.split_conformal`), over ``cfg.n_jobs`` worker processes (one
    thread each); the result does not depend on the number of workers."""
    from joblib import Parallel, delayed

    flags = {"cross_fit": cross_fit, "baselines": baselines, "target_test": target_test}
    jobs = (delayed(_one)(p, dim, n, r, kind, cfg, seed, flags) for r in range(reps))
    return list(Parallel(n_jobs=cfg.n_jobs)(jobs))


def column(stats: list[dict[str, float]], key: str) -> np.ndarray:
    """One statistic over data sets, shape ``(len(stats),)``."""
    return np.array([s[key] for s in stats])


def null_threshold(null_values: np.ndarray, level: float) -> float:
    """Monte-Carlo test threshold: the ceil((R + 1)(1 - level))-th smallest of R null values (capped at R).

    A fresh null value exceeds it with probability <= ``level`` (exchangeability), whereas the interpolated
    empirical 95% quantile of R = 60 values is exceeded about 6.6% of the time.
    """
    r = null_values.size
    k = min(math.ceil((r + 1) * (1 - level)), r)
    return float(np.sort(null_values)[k - 1])


def rate_ci(hits: int, total: int) -> tuple[float, float]:
    """Wilson 95% interval of a rate ``hits / total``."""
    from scipy.stats import binomtest

    ci = binomtest(hits, total).proportion_ci(method="wilson")
    return float(ci.low), float(ci.high)
