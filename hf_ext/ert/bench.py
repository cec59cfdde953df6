"""``hf-ext bench ert``: power at equal n and false-positive rate of ERT-L1 vs CovGap, weighted CovGap and
WSC.

Synthetic designs with known p(x) (:mod:`hf_ext.ert._bench_shapes`), plus a real-data demo without ground
truth
(split-conformal sets of a logistic regression on scikit-learn's ``load_digits``). Everything runs on one CPU
thread.

* Power: each statistic's threshold is the Monte-Carlo 95% quantile of its own simulated null (p == tau, same
  d
  and n; :func:`null_threshold`), so all statistics are compared at equal size; power = share of alternative
  data
  sets strictly above it.
* FPR: measured on fresh null data sets (other seeds) that did not set the thresholds, with a Wilson 95%
  interval;
  also for the plug-in one-sided 5% z-test on pooled held-out L1 differences [reconstructed], on every null
  set.
* Estimation: ERT-L1/L2/KL and over/under parts with the hf-ext default (calibrated) classifier and with the
  uncalibrated bench classifier, against the exact truth (Monte Carlo over p(x)).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from hf_ext.benchmarking import BenchReport, Headline, Timer, mean_se, verdict
from hf_ext.ert import _bench_shapes as shapes
from hf_ext.ert import legacy
from hf_ext.ert._bench_config import BenchConfig
from hf_ext.ert.core import (
    cross_fit_ert,
    cross_fit_predictions,
    ert_table,
    per_sample_excess_risk,
    z_test_pvalue,
)
from hf_ext.ert.slab import worst_slab_coverage

logger = logging.getLogger(__name__)

METHOD = "ERT-L1"
ZTEST = "ERT-L1 z-test"
BASELINES = ("CovGap", "CovGap (weighted)", "WSC")
STATS = (METHOD, *BASELINES)
#: Stable integer code per design, used to derive data-set seeds.
_CODES = {
    "null": 0,
    "fresh": 1,
    "localized": 2,
    "oblique": 3,
    "step": 4,
    "xor": 5,
    "sparse": 6,
    "estimate": 7,
}


def bench_classifier(cfg: BenchConfig, seed: int) -> Any:
    """The uncalibrated HGB used for power (cheap; L1 only needs the side of tau)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(
        max_iter=cfg.hgb_max_iter, max_leaf_nodes=cfg.hgb_leaves, early_stopping=False, random_state=seed
    )


def statistics(x: np.ndarray, z: np.ndarray, cfg: BenchConfig, seed: int) -> dict[str, float]:
    """Every test statistic on one data set (larger = more evidence of miscoverage) and its seconds."""
    from sklearn.cluster import KMeans

    tau = np.full(z.shape[0], cfg.tau)
    out: dict[str, float] = {}
    with Timer() as t:
        h, fold = cross_fit_predictions(x, z, bench_classifier(cfg, seed), cfg.n_splits, seed)
        out[METHOD] = ert_table(h, z, tau, fold)["l1"]
        out[ZTEST] = z_test_pvalue(per_sample_excess_risk(h, z, tau, "l1"))
    out[f"{METHOD} s"] = out[f"{ZTEST} s"] = t.seconds
    with Timer() as t:
        groups = KMeans(n_clusters=cfg.covgap_groups, n_init=1, random_state=seed).fit_predict(x)
        counts, hits = legacy.group_sums(groups, z)
        out["CovGap"] = legacy.gap_from_sums(counts, hits, 1 - cfg.tau)
        out["CovGap (weighted)"] = legacy.gap_from_sums(counts, hits, 1 - cfg.tau, weighted=True)
    out["CovGap s"] = out["CovGap (weighted) s"] = t.seconds
    with Timer() as t:
        out["WSC"] = cfg.tau - worst_slab_coverage(x, z, cfg.wsc_delta, cfg.wsc_directions, seed)
    out["WSC s"] = t.seconds
    return out


def _seed(seed: int, kind: str, dim: int, n: int, r: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, _CODES[kind], dim, n, r]))


def _simulate(
    p: Callable[[np.ndarray], np.ndarray], dim: int, n: int, reps: int, kind: str, cfg: BenchConfig, seed: int
) -> list[dict[str, float]]:
    out = []
    for r in range(reps):
        rng = _seed(seed, kind, dim, n, r)
        x, z = shapes.sample(p, dim, n, rng)
        out.append(statistics(x, z, cfg, int(rng.integers(2**31 - 1))))
    return out


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson 95% interval of a binomial proportion ``k / n``."""
    if n == 0:
        return float("nan"), float("nan")
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def null_threshold(null_values: np.ndarray, level: float) -> float:
    """Monte-Carlo test threshold: the ceil((R + 1)(1 - level))-th smallest of R null values (capped at R).

    A fresh null value exceeds it with probability <= ``level`` (exchangeability), whereas the interpolated
    empirical
    95% quantile of R = 60 values is exceeded about 6.6% of the time.
    """
    r = null_values.size
    k = min(math.ceil((r + 1) * (1 - level)), r)
    return float(np.sort(null_values)[k - 1])


def _col(stats: list[dict[str, float]], key: str) -> np.ndarray:
    return np.array([s[key] for s in stats])


def _power_rows(cfg: BenchConfig, seed: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    dims = sorted({shapes.SHAPES[s].dim for s in cfg.shapes})
    for n in cfg.ns:
        nulls = {d: _simulate(shapes.exact, d, n, cfg.r_null, "null", cfg, seed) for d in dims}
        fresh = {d: _simulate(shapes.exact, d, n, cfg.r_fresh, "fresh", cfg, seed) for d in dims}
        thresholds = {
            (d, k): float(np.quantile(_col(nulls[d], k), 1 - cfg.level)) for d in dims for k in STATS
        }
        for name in cfg.shapes:
            shape = shapes.SHAPES[name]
            alts = _simulate(shape.p, shape.dim, n, cfg.r_alt, name, cfg, seed)
            true_l1 = shapes.truth(shape.p, shape.dim, cfg.truth_draws)["l1"]
            block = []
            for key in (*STATS, ZTEST):
                vals = _col(alts, key)
                power = (
                    float(np.mean(vals <= cfg.level))
                    if key == ZTEST
                    else float(np.mean(vals > thresholds[(shape.dim, key)]))
                )
                row: dict[str, Any] = {
                    "system": key,
                    "is_baseline": key in BASELINES,
                    "shape": name,
                    "d": shape.dim,
                    "n": n,
                    "power": power,
                }
                if key == METHOD:
                    mean, se, _ = mean_se(vals)
                    row.update(mean_stat=mean, se=se, true_l1=true_l1)
                elif key != ZTEST:
                    row.update(mean_stat=float(vals.mean()))
                row["sec_per_eval"] = float(_col(alts, f"{key} s").mean())
                block.append(row)
            _add_ratios(block)
            rows += block
            logger.info("n=%d %s: %s", n, name, {r["system"]: r["power"] for r in block})
        rows += _null_rows(cfg, n, dims, nulls, fresh, thresholds)
    return rows


def _add_ratios(block: list[dict[str, Any]]) -> None:
    ref = next(r for r in block if r["system"] == "CovGap")
    for r in block:
        r["power_vs_covgap"] = (
            r["power"] / ref["power"] if ref["power"] else float("inf") if r["power"] else 1.0
        )
        r["time_vs_covgap"] = r["sec_per_eval"] / ref["sec_per_eval"]


def _null_rows(
    cfg: BenchConfig,
    n: int,
    dims: list[int],
    nulls: dict[int, list[dict[str, float]]],
    fresh: dict[int, list[dict[str, float]]],
    thresholds: dict[tuple[int, str], float],
) -> list[dict]:
    """Rows of the exact-coverage design ("none"): FPR on fresh nulls (pooled over d) and null means."""
    rows = []
    for key in (*STATS, ZTEST):
        if key == ZTEST:  # no simulated threshold: every null data set is a fresh one for the plug-in test
            pvals = np.concatenate([_col(nulls[d] + fresh[d], key) for d in dims])
            hits, total = int(np.sum(pvals <= cfg.level)), pvals.size
            null_mean = float("nan")
        else:
            hits = int(sum(np.sum(_col(fresh[d], key) > thresholds[(d, key)]) for d in dims))
            total = sum(len(fresh[d]) for d in dims)
            null_mean = float(np.mean(np.concatenate([_col(nulls[d], key) for d in dims])))
        lo, hi = wilson(hits, total)
        rows.append(
            {
                "system": key,
                "is_baseline": key in BASELINES,
                "shape": "none",
                "d": "/".join(map(str, dims)),
                "n": n,
                "fpr": hits / total,
                "fpr_lo": lo,
                "fpr_hi": hi,
                "null_sets": total,
                "mean_stat": null_mean,
            }
        )
    return rows


def _estimation_rows(cfg: BenchConfig, seed: int) -> list[dict[str, Any]]:
    """ERT with the default calibrated classifier and the bench classifier against the exact truth."""
    rows = []
    n = cfg.n_estimate
    for name in cfg.estimate_shapes:
        shape = shapes.SHAPES[name]
        truth = shapes.truth(shape.p, shape.dim, cfg.truth_draws)
        for system in ("ERT default (calibrated HGB, 5 folds)", "ERT bench (HGB, 3 folds)"):
            results, secs = [], []
            for r in range(cfg.r_estimate):
                rng = _seed(seed, "estimate", shape.dim, n, r)
                x, z = shapes.sample(shape.p, shape.dim, n, rng)
                tau = np.full(n, cfg.tau)
                with Timer() as t:
                    if system.startswith("ERT default"):
                        res = cross_fit_ert(x, z, tau, "hgb", 5, seed)
                    else:
                        res = cross_fit_ert(x, z, tau, bench_classifier(cfg, seed), cfg.n_splits, seed)
                results.append(res)
                secs.append(t.seconds)
            row: dict[str, Any] = {
                "system": system,
                "is_baseline": False,
                "shape": name,
                "d": shape.dim,
                "n": n,
            }
            for key in ("l1", "l1_over", "l1_under", "l2", "kl"):
                row[key] = float(np.mean([res[key] for res in results]))
            row.update({f"true_{k}": v for k, v in truth.items()})
            row["sec_per_eval"] = float(np.mean(secs))
            rows.append(row)
    return rows


def _digits_rows(seed: int) -> list[dict[str, Any]]:
    """Real data, no ground truth: split-conformal LAC sets of a logistic regression on ``load_digits``."""
    from sklearn.cluster import KMeans
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    alpha = 0.1
    x, y = load_digits(return_X_y=True)
    x = x / 16.0
    x_fit, x_rest, y_fit, y_rest = train_test_split(x, y, train_size=0.4, random_state=seed, stratify=y)
    x_cal, x_test, y_cal, y_test = train_test_split(x_rest, y_rest, train_size=0.4, random_state=seed)
    model = LogisticRegression(max_iter=200, C=0.05).fit(x_fit, y_fit)
    scores = 1.0 - model.predict_proba(x_cal)[np.arange(y_cal.size), y_cal]
    level = min(1.0, math.ceil((scores.size + 1) * (1 - alpha)) / scores.size)
    qhat = float(np.quantile(scores, level, method="higher"))
    sets = model.predict_proba(x_test) >= 1.0 - qhat
    z = sets[np.arange(y_test.size), y_test].astype(np.float64)
    sizes = sets.sum(axis=1).astype(np.float64)
    tau = np.full(z.size, 1 - alpha)
    with Timer() as t:
        ert = cross_fit_ert(x_test, z, tau, "hgb", 5, seed)
    groups = KMeans(n_clusters=16, n_init=1, random_state=seed).fit_predict(x_test)
    base = {"shape": "digits (real)", "d": x.shape[1], "n": int(z.size), "is_baseline": True}
    return [
        {**base, "system": METHOD, "is_baseline": False, "value": ert["l1"], "sec_per_eval": t.seconds},
        {**base, "system": "ERT-L2", "is_baseline": False, "value": ert["l2"]},
        {**base, "system": "marginal coverage", "value": float(z.mean())},
        {**base, "system": "CovGap", "value": legacy.coverage_gap(groups, z, alpha)},
        {
            **base,
            "system": "SSC (gap)",
            "value": legacy.coverage_gap(legacy.discretize(sizes, 10, seed), z, alpha),
        },
        {**base, "system": "WSC", "value": worst_slab_coverage(x_test, z, 0.1, 100, seed)},
    ]


def _notes(rows: list[dict[str, Any]], cfg: BenchConfig, quick: bool) -> list[str]:
    notes = [
        "Synthetic designs with known p(x) (X ~ U(-1,1)^d, tau = 0.9); digits rows are real data without "
        "ground truth. CPU, one thread."
    ]
    if quick:
        notes.append(
            f"QUICK run: n={cfg.ns}, {cfg.r_null} null / {cfg.r_alt} alternative / {cfg.r_fresh} fresh "
            "sets; figures are noisy and targets are only indicative."
        )
    power = [r for r in rows if "power" in r]
    for n in cfg.ns:
        wins = []
        for name in cfg.shapes:
            blk = {r["system"]: r["power"] for r in power if r["n"] == n and r["shape"] == name}
            wins.append(blk[METHOD] >= blk["CovGap"])
            beaten_by = [b for b in BASELINES if blk[b] > blk[METHOD]]
            if beaten_by:
                notes.append(
                    f"n={n}, {name}: {', '.join(beaten_by)} more powerful than ERT-L1 "
                    f"({', '.join(f'{b} {blk[b]:.2f}' for b in beaten_by)} vs {blk[METHOD]:.2f})."
                )
        notes.append(
            verdict(
                f"n={n}: power(ERT-L1) >= power(CovGap) on most shapes",
                sum(wins) > len(wins) / 2,
                f"{sum(wins)}/{len(wins)} shapes",
            )
        )
        none = {r["system"]: r for r in rows if r.get("shape") == "none" and r["n"] == n}
        fpr, zt = none[METHOD], none[ZTEST]
        notes.append(
            verdict(
                f"n={n}: ERT-L1 FPR on fresh nulls contains {cfg.level}",
                fpr["fpr_lo"] <= cfg.level <= fpr["fpr_hi"],
                f"{fpr['fpr']:.3f} [{fpr['fpr_lo']:.3f}, {fpr['fpr_hi']:.3f}] on {fpr['null_sets']} sets",
            )
        )
        notes.append(
            f"n={n}: plug-in z-test FPR {zt['fpr']:.3f} [{zt['fpr_lo']:.3f}, {zt['fpr_hi']:.3f}] on "
            f"{zt['null_sets']} nulls (no simulated threshold needed)."
        )
        notes.append(
            verdict(
                f"n={n}: null mean |ERT-L1| <= 0.005",
                abs(fpr["mean_stat"]) <= 0.005,
                f"{fpr['mean_stat']:+.4f}; CovGap null mean {none['CovGap']['mean_stat']:.4f}",
            )
        )
        bound = [r for r in power if r["n"] == n and r["system"] == METHOD]
        bad = [r["shape"] for r in bound if r["mean_stat"] > r["true_l1"] + 2 * r["se"]]
        notes.append(
            verdict(
                f"n={n}: mean ERT-L1 <= true L1 + 2 SE",
                not bad,
                f"{len(bound) - len(bad)}/{len(bound)} shapes"
                + (f"; exceeded: {', '.join(bad)}" if bad else ""),
            )
        )
    if "localized" in cfg.shapes and max(cfg.ns) >= 2000:
        blk = {r["system"]: r["power"] for r in power if r["n"] == 2000 and r["shape"] == "localized"}
        notes.append(
            verdict(
                "localized n=2000: power(ERT-L1) >= power(CovGap) + 0.15",
                blk[METHOD] >= blk["CovGap"] + 0.15,
                f"{blk[METHOD]:.2f} vs {blk['CovGap']:.2f}",
            )
        )
    return notes


def run(*, quick: bool = False, seed: int = 0) -> BenchReport:
    """Run the ERT power / FPR / estimation benchmark (``quick``: n = 1000, few repetitions, < 60 s)."""
    from threadpoolctl import threadpool_limits

    cfg = BenchConfig.quick() if quick else BenchConfig()
    with threadpool_limits(limits=1):
        rows = _power_rows(cfg, seed) + _estimation_rows(cfg, seed) + _digits_rows(seed)
    n_head = max(cfg.ns)
    headline = Headline.from_rows(
        rows, "power", higher_is_better=True, method_system=METHOD, where={"shape": "localized", "n": n_head}
    )
    return BenchReport(
        rows=rows,
        headline=headline,
        config=cfg.to_dict(),
        what=f"power at 5% (localized shape, d=10, n={n_head}): ERT-L1 vs CovGap / weighted CovGap / WSC",
        notes=_notes(rows, cfg, quick),
    )


def tour(*, quick: bool = True, seed: int = 0) -> BenchReport:
    """A ~20 s tour: the quick benchmark restricted to the localized and sparse shapes."""
    from dataclasses import replace

    from threadpoolctl import threadpool_limits

    cfg = replace(BenchConfig.quick(), shapes=("localized", "sparse"))
    with threadpool_limits(limits=1):
        rows = _power_rows(cfg, seed)
    headline = Headline.from_rows(
        rows,
        "power",
        higher_is_better=True,
        method_system=METHOD,
        where={"shape": "localized", "n": cfg.ns[0]},
    )
    return BenchReport(
        rows=rows,
        headline=headline,
        config=cfg.to_dict(),
        what="ERT-L1 vs CovGap / WSC power, localized + sparse shapes, n=1000 (tour)",
        notes=_notes(rows, cfg, True),
    )
