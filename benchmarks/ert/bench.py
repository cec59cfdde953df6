"""``hf-ext bench ert``: is the ERT p-value valid, and how powerful is ERT-L1 against CovGap and WSC?

Synthetic designs with known p(x) (:mod:`benchmarks.ert.shapes`, X ~ U(-1, 1)^d, tau = 0.9), plus a
real-data demo without ground truth (split-conformal sets of a logistic regression on scikit-learn's
``load_digits``). Data sets run over ``n_jobs`` worker processes, one thread each.

* Validity: false-positive rate at the 5% level on ``r_validity`` null data sets (p == tau) per n, with a
  Wilson 95% interval, and power on the localized shape, for the exact held-out test that hf-ext ships
  (:func:`hf_ext.metrics.functional.ert_test`) and for a normal approximation on the pooled cross-fitted
  differences (the plug-in z-test, whose folds share training data).
* Power at equal size: each thresholded statistic's threshold is the Monte-Carlo 5% threshold of its own
  simulated null (same d and n; :func:`~benchmarks.ert.stats.null_threshold`); the held-out test uses its
  own p-value; power = share of alternative data sets rejected. A random test (rejects 5% of the time) is
  the trivial baseline.
* Estimation: ERT-L1/L2/KL and the over/under parts with the hf-ext default (calibrated) classifier and with
  the uncalibrated bench classifier, against the truth (Monte Carlo over p(x)).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.ert import shapes as shapes
from benchmarks.ert.config import BenchConfig
from benchmarks.ert.stats import (
    BASELINES,
    HELD_OUT,
    HELD_OUT_TARGET,
    METHOD,
    RANDOM,
    THRESHOLDED,
    ZTEST,
    bench_classifier,
    column,
    data_rng,
    null_threshold,
    rate_ci,
    simulate,
)
from benchmarks.harness import BenchReport, Headline, Timer, mean_se, verdict
from hf_ext.ert import group_metrics
from hf_ext.ert.core import cross_fit_ert, split_test
from hf_ext.ert.slab import worst_slab_coverage

#: The false-positive rate the validity study must land in, at every n.
FPR_BAND = (0.03, 0.07)


def _rejections(stats: list[dict[str, float]], key: str, level: float, threshold: float | None) -> np.ndarray:
    values = column(stats, key)
    return values <= level if threshold is None else values > threshold


def _validity_rows(cfg: BenchConfig, seed: int) -> list[dict[str, Any]]:
    """FPR (nulls) and power (``validity_shape``) of the tests that need no simulated null, at each n."""
    rows = []
    alt = shapes.SHAPES[cfg.validity_shape]
    for n in cfg.validity_ns:
        cross_fit = n <= cfg.zscore_max_n
        nulls = simulate(
            shapes.exact,
            cfg.validity_dim,
            n,
            cfg.r_validity,
            "validity-null",
            cfg,
            seed,
            cross_fit=cross_fit,
            baselines=False,
            target_test=False,
        )
        alts = simulate(
            alt.p,
            alt.dim,
            n,
            cfg.r_validity_power,
            "validity-alt",
            cfg,
            seed,
            cross_fit=cross_fit,
            baselines=False,
            target_test=False,
        )
        for key in (HELD_OUT, ZTEST) if cross_fit else (HELD_OUT,):
            hits = int(_rejections(nulls, key, cfg.level, None).sum())
            lo, hi = rate_ci(hits, len(nulls))
            row: dict[str, Any] = {
                "part": "validity",
                "system": key,
                "is_baseline": key == ZTEST,
                "shape": f"none / {cfg.validity_shape}",
                "d": cfg.validity_dim,
                "n": n,
                "null_sets": len(nulls),
                "fpr": hits / len(nulls),
                "fpr_lo": lo,
                "fpr_hi": hi,
                "power": float(_rejections(alts, key, cfg.level, None).mean()),
                "sec_per_eval": float(column(nulls, f"{key} s").mean()),
            }
            if key == ZTEST:  # how far the plug-in SE understates the null spread of the cross-fitted mean
                row["sd_ratio"] = float(
                    column(nulls, METHOD).std(ddof=1) / column(nulls, f"{ZTEST} se").mean()
                )
            rows.append(row)
    return rows


def _conformal_rows(cfg: BenchConfig, seed: int) -> list[dict[str, Any]]:
    """Rejection rate of the held-out tests on well-specified split-conformal predictors (coverage constant in
    x, its level set by a finite calibration set): a false positive for conditional miscoverage."""
    rows = []
    for n in cfg.conformal_ns:
        runs = simulate(
            None,
            cfg.conformal_dim,
            n,
            cfg.r_conformal,
            "conformal",
            cfg,
            seed,
            cross_fit=False,
            baselines=False,
        )
        coverage = column(runs, "coverage")
        for key in (HELD_OUT, HELD_OUT_TARGET):
            hits = int(_rejections(runs, key, cfg.level, None).sum())
            lo, hi = rate_ci(hits, len(runs))
            rows.append(
                {
                    "part": "conformal",
                    "system": key,
                    "is_baseline": key == HELD_OUT_TARGET,
                    "shape": "split conformal",
                    "d": cfg.conformal_dim,
                    "n": n,
                    "runs": len(runs),
                    "rejection_rate": hits / len(runs),
                    "rate_lo": lo,
                    "rate_hi": hi,
                    "coverage_mean": float(coverage.mean()),
                    "coverage_sd": float(coverage.std(ddof=1)),
                    "sec_per_eval": float(column(runs, f"{key} s").mean()),
                }
            )
    return rows


def _power_rows(cfg: BenchConfig, seed: int) -> list[dict[str, Any]]:
    """Power at equal size on every shape and n, and the null rows ("none": bias and held-out FPR)."""
    rows: list[dict[str, Any]] = []
    dims = sorted({shapes.SHAPES[s].dim for s in cfg.shapes})
    for n in cfg.ns:
        nulls = {d: simulate(shapes.exact, d, n, cfg.r_null, "null", cfg, seed) for d in dims}
        thresholds = {
            (d, k): null_threshold(column(nulls[d], k), cfg.level) for d in dims for k in THRESHOLDED
        }
        for name in cfg.shapes:
            shape = shapes.SHAPES[name]
            alts = simulate(shape.p, shape.dim, n, cfg.r_alt, name, cfg, seed)
            true_l1 = shapes.truth(shape.p, shape.dim, cfg.truth_draws)["l1"]
            block = []
            for key in (METHOD, HELD_OUT, HELD_OUT_TARGET, *BASELINES, RANDOM):
                threshold = thresholds[(shape.dim, key)] if key in THRESHOLDED else None
                row: dict[str, Any] = {
                    "part": "power",
                    "system": key,
                    "is_baseline": key in (*BASELINES, RANDOM),
                    "shape": name,
                    "d": shape.dim,
                    "n": n,
                    "power": float(_rejections(alts, key, cfg.level, threshold).mean()),
                }
                if key == METHOD:
                    mean, se, _ = mean_se(column(alts, key))
                    row.update(mean_stat=mean, se=se, true_l1=true_l1)
                elif key in BASELINES:
                    row["mean_stat"] = float(column(alts, key).mean())
                row["sec_per_eval"] = float(column(alts, f"{key} s").mean())
                block.append(row)
            ref = next(r for r in block if r["system"] == "CovGap")
            for r in block:
                r["power_vs_covgap"] = r["power"] / ref["power"] if ref["power"] else math.inf
            rows += block
        for key in (METHOD, HELD_OUT, HELD_OUT_TARGET, *BASELINES):
            pooled = [s for d in dims for s in nulls[d]]
            row = {
                "part": "power",
                "system": key,
                "is_baseline": key in BASELINES,
                "shape": "none",
                "d": "/".join(map(str, dims)),
                "n": n,
                "null_sets": len(pooled),
            }
            if key in (
                HELD_OUT,
                HELD_OUT_TARGET,
            ):  # own p-values: a false-positive rate (others: 5% by design)
                row["fpr"] = float(_rejections(pooled, key, cfg.level, None).mean())
            else:
                row["mean_stat"] = float(column(pooled, key).mean())
            rows.append(row)
    return rows


def _estimation_rows(cfg: BenchConfig, seed: int) -> list[dict[str, Any]]:
    """ERT with the default calibrated classifier and the bench classifier against the exact truth."""
    rows = []
    n = cfg.n_estimate
    systems = {
        "ERT default (calibrated HGB, 5 folds)": lambda s: ("hgb", 5),
        "ERT bench (HGB, 3 folds)": lambda s: (bench_classifier(cfg, s), cfg.n_splits),
    }
    for name in cfg.estimate_shapes:
        shape = shapes.SHAPES[name]
        truth = shapes.truth(shape.p, shape.dim, cfg.truth_draws)
        for system, make in systems.items():
            results, secs = [], []
            for r in range(cfg.r_estimate):
                x, z = shapes.sample(shape.p, shape.dim, n, data_rng(seed, "estimate", shape.dim, n, r))
                classifier, folds = make(seed)
                with Timer() as t:
                    results.append(cross_fit_ert(x, z, np.full(n, cfg.tau), classifier, folds, seed))
                secs.append(t.seconds)
            row: dict[str, Any] = {
                "part": "estimate",
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
    test = split_test(x_test, z, tau, "hgb", 0.5, seed)
    groups = KMeans(n_clusters=16, n_init=1, random_state=seed).fit_predict(x_test)
    base = {
        "part": "digits",
        "shape": "digits (real)",
        "d": x.shape[1],
        "n": int(z.size),
        "is_baseline": True,
    }
    return [
        {**base, "system": METHOD, "is_baseline": False, "value": ert["l1"], "sec_per_eval": t.seconds},
        {**base, "system": "ERT-L2", "is_baseline": False, "value": ert["l2"]},
        {**base, "system": f"{HELD_OUT} p-value", "is_baseline": False, "value": test.p_value},
        {**base, "system": "marginal coverage", "value": float(z.mean())},
        {**base, "system": "CovGap", "value": group_metrics.coverage_gap(groups, z, alpha)},
        {
            **base,
            "system": "SSC (gap)",
            "value": group_metrics.coverage_gap(group_metrics.discretize(sizes, 10, seed), z, alpha),
        },
        {**base, "system": "WSC", "value": worst_slab_coverage(x_test, z, 0.1, 100, seed)},
    ]


def _validity_notes(rows: list[dict[str, Any]], cfg: BenchConfig) -> list[str]:
    notes = []
    low, high = FPR_BAND
    for r in rows:
        if r.get("part") != "validity":
            continue
        interval = f"{r['fpr']:.3f} [{r['fpr_lo']:.3f}, {r['fpr_hi']:.3f}] on {r['null_sets']} nulls"
        if r["system"] == HELD_OUT:
            notes.append(
                verdict(
                    f"n={r['n']}: held-out test FPR in [{low}, {high}]",
                    low <= r["fpr"] <= high,
                    f"{interval}; power {r['power']:.2f} on {cfg.validity_shape}",
                )
            )
        else:
            notes.append(
                f"n={r['n']}: plug-in z-test on cross-fitted differences: FPR {interval}; the null spread of "
                f"the cross-fitted mean is {r['sd_ratio']:.2f}x its plug-in SE; power {r['power']:.2f}."
            )
    return notes


def _conformal_notes(rows: list[dict[str, Any]], cfg: BenchConfig) -> list[str]:
    """The shipped test must not flag well-specified split conformal beyond the level (up to seed noise: the
    Wilson interval of its rejection rate reaches down to the level)."""
    notes = []
    for r in rows:
        if r.get("part") != "conformal":
            continue
        interval = (
            f"{r['rejection_rate']:.3f} [{r['rate_lo']:.3f}, {r['rate_hi']:.3f}] in {r['runs']} runs; "
            f"marginal coverage {r['coverage_mean']:.3f} +- {r['coverage_sd']:.3f} across runs"
        )
        if r["system"] == HELD_OUT:
            notes.append(
                verdict(
                    f"split conformal n={r['n']}: held-out test rejects <= {cfg.level} (up to seed noise)",
                    r["rate_lo"] <= cfg.level,
                    interval,
                )
            )
        else:
            notes.append(f"split conformal n={r['n']}: {r['system']} rejects {interval}.")
    return notes


def _power_notes(rows: list[dict[str, Any]], cfg: BenchConfig) -> list[str]:
    notes = []
    power = [r for r in rows if r.get("part") == "power" and "power" in r]
    for n in cfg.ns:
        wins = 0
        for name in cfg.shapes:
            blk = {r["system"]: r["power"] for r in power if r["n"] == n and r["shape"] == name}
            wins += blk[METHOD] >= blk["CovGap"]
            beaten_by = [b for b in BASELINES if blk[b] > blk[METHOD]]
            if beaten_by:
                notes.append(
                    f"n={n}, {name}: {', '.join(beaten_by)} more powerful than ERT-L1 "
                    f"({', '.join(f'{b} {blk[b]:.2f}' for b in beaten_by)} vs {blk[METHOD]:.2f})."
                )
        notes.append(
            verdict(
                f"n={n}: power(ERT-L1) >= power(CovGap) on most shapes",
                wins > len(cfg.shapes) / 2,
                f"{wins}/{len(cfg.shapes)} shapes",
            )
        )
        none = {
            r["system"]: r for r in rows if r.get("part") == "power" and r["shape"] == "none" and r["n"] == n
        }
        notes.append(
            verdict(
                f"n={n}: null mean |ERT-L1| <= 0.005",
                abs(none[METHOD]["mean_stat"]) <= 0.005,
                f"{none[METHOD]['mean_stat']:+.4f}; CovGap null mean {none['CovGap']['mean_stat']:.4f}",
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
    if "localized" in cfg.shapes and 2000 in cfg.ns:
        blk = {r["system"]: r["power"] for r in power if r["n"] == 2000 and r["shape"] == "localized"}
        notes.append(
            verdict(
                "localized n=2000: power(ERT-L1) >= power(CovGap) + 0.15",
                blk[METHOD] >= blk["CovGap"] + 0.15,
                f"{blk[METHOD]:.2f} vs {blk['CovGap']:.2f}",
            )
        )
    return notes


def _report(rows: list[dict[str, Any]], cfg: BenchConfig, quick: bool, seconds: float) -> BenchReport:
    n_head = max(cfg.ns)
    headline = Headline.from_rows(
        rows,
        "power",
        higher_is_better=True,
        method_system=METHOD,
        where={"part": "power", "shape": "localized", "n": n_head},
    )
    notes = [
        "Synthetic designs with known p(x) (X ~ U(-1,1)^d, tau = 0.9); digits rows are real data without "
        f"ground truth. {cfg.n_jobs} worker process(es), one thread each; {seconds:.0f} s of wall time.",
        *_validity_notes(rows, cfg),
        *_conformal_notes(rows, cfg),
        *_power_notes(rows, cfg),
    ]
    if quick:
        notes.append(
            f"QUICK run: {cfg.r_alt} alternatives and {cfg.r_null} nulls per cell, so a power is a multiple "
            f"of 1/{cfg.r_alt} with a standard error up to {0.5 / math.sqrt(cfg.r_alt):.2f}; indicative only."
        )
    what = (
        f"ERT p-value FPR at n={'/'.join(map(str, cfg.validity_ns))} ({cfg.r_validity} nulls); power on "
        f"{'/'.join(cfg.shapes)}, n={'/'.join(map(str, cfg.ns))}, {cfg.r_alt} sets each"
    )
    if quick:
        full = BenchConfig()
        what += f" (full: {len(full.validity_ns)} n; {len(full.shapes)} shapes x {len(full.ns)} n)"
    return BenchReport(
        rows=rows,
        headline=headline,
        config=cfg.to_dict(),
        what=what,
        notes=notes,
        settings=cfg.settings(),
    )


def grid() -> list[dict[str, Any]]:
    """The settings of the full run (part, shape, d, n)."""
    return BenchConfig().settings()


def run(*, quick: bool = False, seed: int = 0) -> BenchReport:
    """Run the ERT validity / power / estimation benchmark (``quick``: the slice of
    :meth:`~benchmarks.ert.config.BenchConfig.quick`)."""
    from threadpoolctl import threadpool_limits

    cfg = BenchConfig.quick() if quick else BenchConfig()
    with Timer() as t, threadpool_limits(limits=1):
        rows = _validity_rows(cfg, seed) + _conformal_rows(cfg, seed)
        rows += _power_rows(cfg, seed) + _estimation_rows(cfg, seed)
        if cfg.digits:
            rows += _digits_rows(seed)
    return _report(rows, cfg, quick, t.seconds)


def plot(report: BenchReport, directory: Path) -> dict[str, str]:
    """``ert_validity.png`` (false-positive rate against n, with the target band) and ``ert_power.png``
    (power per shape and statistic at the largest n) in ``directory``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    level = report.config["level"]
    files = {}
    fig, ax = plt.subplots(figsize=(6.5, 4))
    ax.axhspan(*FPR_BAND, color="0.9", label=f"target band {FPR_BAND}")
    ax.axhline(level, color="0.5", lw=0.8, ls="--")
    for i, system in enumerate((HELD_OUT, ZTEST)):
        pts = [r for r in report.rows if r.get("part") == "validity" and r["system"] == system]
        if pts:
            ns = np.array([r["n"] for r in pts], dtype=float) * (1.0 + 0.04 * i)
            fpr = np.array([r["fpr"] for r in pts])
            err = np.array([[r["fpr"] - r["fpr_lo"] for r in pts], [r["fpr_hi"] - r["fpr"] for r in pts]])
            ax.errorbar(ns, fpr, yerr=err, fmt="o-", capsize=3, label=system)
    ax.set_xscale("log")
    ax.set_xlabel("n (data set size)")
    ax.set_ylabel(f"false-positive rate at level {level}")
    ax.set_title("ERT p-values on null data (p = tau), Wilson 95% intervals", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    files["validity"] = str(directory / "ert_validity.png")
    fig.savefig(files["validity"], dpi=120)
    plt.close(fig)

    n = max(r["n"] for r in report.rows if r.get("part") == "power")
    power = [r for r in report.rows if r.get("part") == "power" and r["n"] == n and "power" in r]
    names = list(dict.fromkeys(r["shape"] for r in power))
    systems = list(dict.fromkeys(r["system"] for r in power))
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(systems)
    for j, system in enumerate(systems):
        vals = [next(r["power"] for r in power if r["shape"] == s and r["system"] == system) for s in names]
        ax.bar(np.arange(len(names)) + j * width, vals, width, label=system)
    ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2, names)
    ax.set_ylabel("power at 5% (equal size)")
    ax.set_title(f"Power per shape, n = {n}", fontsize=9)
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    files["power"] = str(directory / "ert_power.png")
    fig.savefig(files["power"], dpi=120)
    plt.close(fig)
    return files
