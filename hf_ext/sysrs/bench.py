"""``hf-ext bench sysrs``: SySRs against uniform, uniform-synced, SR, SH and SH-synced on real and IRT data.

Two figures per method and matrix: the error rate (wrong best model) and mean simple regret over ``reps``
seeded runs at fixed budgets, and the smallest budget on a geometric grid (from ``K + 1`` to ``K * N``) at
which the error rate is at most 5%. Real data: out-of-fold correctness of 11 scikit-learn classifiers on
digits, breast cancer and wine. Synthetic: Rasch-model matrices with low (s = 0.3) and high (s = 3) model
similarity.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from hf_ext.benchmarking import BenchReport, Headline, Timer, verdict
from hf_ext.sysrs.core import sr_schedule
from hf_ext.sysrs.matrices import irt_matrix, mean_pairwise_correlation, sklearn_correctness_matrix
from hf_ext.sysrs.scores import true_means
from hf_ext.sysrs.simulate import iter_runs, simulate

logger = logging.getLogger(__name__)

SYSTEMS = {
    "uniform": "uniform",
    "uniform-synced": "uniform_synced",
    "SR": "sr",
    "SySRs": "sysrs",
    "SH": "sh",
    "SH-synced": "sh_synced",
}
METHOD = "SySRs"
TARGET_ERROR = 0.05
TARGET_RATIO = 0.5


@dataclass(frozen=True)
class Setting:
    """One score matrix of the benchmark and its fixed budgets (callables of ``(K, N)``)."""

    name: str
    build: Callable[[], np.ndarray]
    budgets: Callable[[int, int], tuple[int, ...]]
    correlated: bool
    real: bool


def _zoo(dataset: str) -> Callable[[], np.ndarray]:
    return lambda: sklearn_correctness_matrix(dataset)[0]


def _irt(scale: float) -> Callable[[], np.ndarray]:
    return lambda: irt_matrix(10, 3000, ability_range=(0.0, 0.3), difficulty_scale=scale, seed=0)


SETTINGS = (
    Setting("digits", _zoo("digits"), lambda k, n: (1000, 3000), correlated=True, real=True),
    Setting("irt_s3", _irt(3.0), lambda k, n: (2000, 6000), correlated=True, real=False),
    Setting("irt_s0.3", _irt(0.3), lambda k, n: (2000, 6000), correlated=False, real=False),
    Setting(
        "breast_cancer", _zoo("breast_cancer"), lambda k, n: (n // 2, 2 * n), correlated=False, real=True
    ),
    Setting("wine", _zoo("wine"), lambda k, n: (n // 2, 2 * n), correlated=False, real=True),
)


def budget_grid(n_models: int, n_queries: int, factor: float) -> list[int]:
    """Geometric budgets ``K + 1, (K + 1) * factor, ...`` rounded up, ending with ``K * N`` (everything)."""
    top, b, grid = n_models * n_queries, float(n_models + 1), []
    while b < top:
        grid.append(math.ceil(b))
        b *= factor
    return sorted(set(grid)) + [top]


def budget_to_error(
    S: np.ndarray, algorithm: str, grid: list[int], *, reps: int, seed: int, target: float = TARGET_ERROR
) -> int | None:
    """Smallest budget of ``grid`` whose error rate over ``reps`` runs is ``<= target``; ``None`` if none.

    A grid point is abandoned as soon as its error count exceeds ``target * reps`` (the full count could only
    be larger), which gives the same answer as running every repetition.
    """
    means = true_means(S)
    best = set(np.flatnonzero(means >= means.max() - 1e-12).tolist())
    allowed = math.floor(target * reps + 1e-9)
    for budget in grid:
        errors = 0
        for pick, _ in iter_runs(S, budget, algorithm, reps, seed):
            errors += pick not in best
            if errors > allowed:
                break
        else:
            return budget
    return None


def _final_duel(S: np.ndarray, budget: int) -> str:
    """What limits SR-type identification on ``S``: the gap of the top two models against the noise of the
    last elimination (``n_{K-1}`` shared queries, paired standard deviation)."""
    means = true_means(S)
    top2 = np.argsort(-means, kind="stable")[:2]
    gap = means[top2[0]] - means[top2[1]]
    n_last = sr_schedule(len(S), budget)[-1] if budget > len(S) else 0
    sd_paired = float(np.std(S[top2[0]] - S[top2[1]]))
    sd_indep = float(np.sqrt(S[top2[0]].var() + S[top2[1]].var()))
    z_p, z_i = (gap * math.sqrt(n_last) / sd if sd > 0 else math.inf for sd in (sd_paired, sd_indep))

    def tail(z: float) -> float:  # P(N(0, 1) > z)
        return 0.5 * math.erfc(z / math.sqrt(2))

    return (
        f"top-2 gap {100 * gap:.2f} pts; last SR phase n_(K-1) = {n_last} queries; "
        f"paired sd {sd_paired:.3f} vs unpaired {sd_indep:.3f} -> P(final duel lost, normal approx.) ~ "
        f"{tail(z_p):.3f} paired, {tail(z_i):.3f} unpaired"
    )


def _fixed_budget_rows(
    name: str, S: np.ndarray, budget: int, corr: float, reps: int, seed: int
) -> list[dict[str, Any]]:
    rows = []
    for system, algo in SYSTEMS.items():
        with Timer() as t:
            out = simulate(S, budget, algo, reps=reps, seed=seed)
        rows.append(
            {
                "system": system,
                "is_baseline": system != METHOD,
                "matrix": name,
                "K": S.shape[0],
                "N": S.shape[1],
                "corr": round(corr, 3),
                "budget": budget,
                "error_rate": out["error_rate"],
                "regret_pts": out["simple_regret"],
                "max_spent": int(out["spent"].max()),
                "seconds": t.seconds,
            }
        )
    sr = next(r for r in rows if r["system"] == "SR")
    for r in rows:
        r["err_vs_SR"] = r["error_rate"] / sr["error_rate"] if sr["error_rate"] else math.nan
        r["regret_vs_SR"] = r["regret_pts"] / sr["regret_pts"] if sr["regret_pts"] else math.nan
    return rows


def _budget_rows(
    name: str, S: np.ndarray, corr: float, factor: float, reps: int, seed: int
) -> list[dict[str, Any]]:
    n_models, n_queries = S.shape
    grid = budget_grid(n_models, n_queries, factor)
    rows: list[dict[str, Any]] = []
    for system, algo in SYSTEMS.items():
        with Timer() as t:
            need = budget_to_error(S, algo, grid, reps=reps, seed=seed)
        rows.append(
            {
                "system": system,
                "is_baseline": system != METHOD,
                "matrix": name,
                "corr": round(corr, 3),
                "K*N": S.size,
                "budget_to_5pct": need if need is not None else "not reached",
                "share_of_K*N": need / S.size if need is not None else math.nan,
                "seconds": t.seconds,
            }
        )
    sr = float(next(r for r in rows if r["system"] == "SR")["share_of_K*N"])
    for r in rows:
        r["budget_vs_SR"] = float(r["share_of_K*N"]) / sr if not math.isnan(sr) else math.nan
    return rows


def _notes(
    fixed: list[dict[str, Any]],
    needed: list[dict[str, Any]],
    settings: tuple[Setting, ...],
    mats: dict[str, np.ndarray],
    build_s: dict[str, float],
) -> list[str]:
    def get(rows: list[dict[str, Any]], system: str, **where: Any) -> dict[str, Any]:
        return next(r for r in rows if r["system"] == system and all(r[k] == v for k, v in where.items()))

    real = ", ".join(s.name for s in settings if s.real)
    synthetic = ", ".join(s.name for s in settings if not s.real)
    notes = [
        f"Real: out-of-fold correctness of 11 scikit-learn classifiers ({real}), built in code. "
        f"Synthetic: Rasch-model matrices ({synthetic}; s = spread of question difficulty, "
        "larger = more similar).",
        "Matrix build seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in build_s.items()) + ".",
    ]
    for s in settings:
        if not s.correlated:
            continue
        for b in sorted({r["budget"] for r in fixed if r["matrix"] == s.name}):
            me, sr = get(fixed, METHOD, matrix=s.name, budget=b), get(fixed, "SR", matrix=s.name, budget=b)
            ok = me["error_rate"] <= TARGET_RATIO * sr["error_rate"]
            detail = f"{me['error_rate']:.3f} vs {sr['error_rate']:.3f}, ratio {me['err_vs_SR']:.2f}"
            if not ok:
                detail += f"; limited by: {_final_duel(mats[s.name], b)}"
            notes.append(
                verdict(f"Target err(SySRs) <= {TARGET_RATIO} x err(SR) on {s.name} @ {b}", ok, detail)
            )
    regret_ok = [
        r
        for r in fixed
        if r["system"] == METHOD and r["regret_pts"] <= get(fixed, "SR", **_key(r))["regret_pts"]
    ]
    n_set = sum(r["system"] == METHOD for r in fixed)
    notes.append(f"regret(SySRs) <= regret(SR) in {len(regret_ok)}/{n_set} settings.")
    uni_ok = [
        r
        for r in fixed
        if r["system"] == "uniform-synced"
        and r["error_rate"] <= get(fixed, "uniform", **_key(r))["error_rate"]
    ]
    notes.append(f"err(uniform-synced) <= err(uniform) in {len(uni_ok)}/{n_set} settings.")
    over = [r for r in fixed if r["max_spent"] > r["budget"]]
    notes.append(f"spend <= budget in every run: {'yes' if not over else 'NO: ' + str(over)}.")
    shs = [
        f"{r['matrix']}@{r['budget']}: {r['error_rate']:.3f} vs "
        f"{get(fixed, 'SH-synced', **_key(r))['error_rate']:.3f}"
        for r in fixed
        if r["system"] == METHOD
    ]
    notes.append("SySRs vs SH-synced error (reported, not a target): " + "; ".join(shs) + ".")
    for s in settings if needed else ():
        me, sr = get(needed, METHOD, matrix=s.name), get(needed, "SR", matrix=s.name)
        notes.append(
            f"Budget to 5% error on {s.name}: SySRs {me['budget_to_5pct']} vs SR {sr['budget_to_5pct']}."
        )
    return notes


def _key(row: dict[str, Any]) -> dict[str, Any]:
    return {"matrix": row["matrix"], "budget": row["budget"]}


def run(*, quick: bool = False, seed: int = 0) -> BenchReport:
    """Run every method on every matrix; ``quick`` uses 100 repetitions and a x1.5 budget grid (400 and x1.2
    in the full run)."""
    reps, factor = (100, 1.5) if quick else (400, 1.2)
    return _report(SETTINGS, reps=reps, factor=factor, seed=seed)


def tour(*, quick: bool = True, seed: int = 0) -> BenchReport:
    """The tour's few-second version: the digits zoo and the high-similarity IRT matrix at their fixed
    budgets, 100 repetitions, no budget-to-5% search (``quick`` is accepted for the common signature)."""
    return _report(SETTINGS[:2], reps=100, factor=None, seed=seed)


def _report(settings: tuple[Setting, ...], *, reps: int, factor: float | None, seed: int) -> BenchReport:
    mats, build_s, corr = {}, {}, {}
    for s in settings:
        with Timer() as t:
            mats[s.name] = s.build()
        build_s[s.name], corr[s.name] = t.seconds, mean_pairwise_correlation(mats[s.name])
    fixed, needed = [], []
    for s in settings:
        S = mats[s.name]
        for b in s.budgets(*S.shape):
            fixed += _fixed_budget_rows(s.name, S, b, corr[s.name], reps, seed)
        if factor is not None:
            needed += _budget_rows(s.name, S, corr[s.name], factor, reps, seed)
        logger.info("sysrs bench: %s done", s.name)
    headline = Headline.from_rows(
        fixed,
        "error_rate",
        higher_is_better=False,
        method_system=METHOD,
        where={"matrix": "digits", "budget": 3000},
    )
    return BenchReport(
        rows=fixed + needed,
        headline=headline,
        config={
            "reps": reps,
            "seed": seed,
            "grid_factor": factor,
            "target_error": TARGET_ERROR,
            "systems": SYSTEMS,
        },
        what=(
            f"best-model identification, {len(SYSTEMS)} algorithms x {len(settings)} matrices, "
            f"{reps} seeded runs each"
        ),
        notes=_notes(fixed, needed, settings, mats, build_s),
    )
