"""``hf-ext bench sysrs``: SySRs against uniform, uniform-synced, SR, SH and SH-synced, side by side.

Two settings, as in the paper's claim: the **fixed-budget** error rate (wrong best model) and mean simple
regret over ``reps`` seeded runs, and the **fixed-confidence** budget, the smallest budget on a geometric grid
at which the error rate is at most 5%. Matrices: real out-of-fold correctness of 11 scikit-learn classifiers
(digits, breast cancer, wine), Rasch-model (IRT) draws with low and high model similarity, and a sweep of
coupled draws whose model correlation goes from 0 to 0.95. The headline is the error rate averaged over the
real-data settings that ran (six in the full run: three datasets, two budgets each; four in ``--quick``:
breast cancer and wine) against the best baseline's average.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import BenchReport, Headline, Timer, verdict
from benchmarks.sysrs._grid import (
    HIGH_RHO,
    PAPER_SCHEDULE,
    grid_cells,
    grid_matrix,
    grid_rows,
    grid_summary,
)
from benchmarks.sysrs._paired import Errors, extended_errors, paired_rows, run_errors
from benchmarks.sysrs._search import SEARCH_BUDGET, search_rows, search_settings
from benchmarks.sysrs.figures import (
    DELTA,
    METHOD,
    SYSTEMS,
    final_duel,
    fixed_budget_rows,
    fixed_confidence_rows,
)
from benchmarks.sysrs.matrices import (
    coupled_matrix,
    irt_matrix,
    mean_pairwise_correlation,
    sklearn_correctness_matrix,
)
from hf_ext.sysrs.core import sr_schedule
from hf_ext.sysrs.simulation import simulate

logger = logging.getLogger(__name__)

TARGET_RATIO = 0.5
SWEEP = (0.0, 0.25, 0.5, 0.75, 0.9, 0.95)
SWEEP_ACCURACIES = tuple(np.linspace(0.60, 0.70, 10).round(4).tolist())
SWEEP_BUDGET = 6000
PAIRED_REPS = 2000
"""Runs per setting of the long paired comparison of SySRs, its SR-schedule variant and the best baseline."""


@dataclass(frozen=True)
class Setting:
    """One score matrix of the benchmark and its fixed budgets."""

    name: str
    build: Callable[[], np.ndarray]
    budgets: tuple[int, ...]
    kind: str  # "real", "irt" or "sweep"
    correlated: bool = False
    quick: bool = False  # in the ``--quick`` slice


def _zoo(dataset: str) -> Callable[[], np.ndarray]:
    return lambda: sklearn_correctness_matrix(dataset)[0]


def _irt(scale: float) -> Callable[[], np.ndarray]:
    return lambda: irt_matrix(10, 3000, ability_range=(0.0, 0.3), difficulty_scale=scale, seed=0)


def _coupled(rho: float) -> Callable[[], np.ndarray]:
    return lambda: coupled_matrix(SWEEP_ACCURACIES, 3000, correlation=rho, seed=0)


#: The full run's matrices; the quick slice is the two smallest real ones. Breast cancer and wine are
#: run at half and twice their number of rows N (569 and 178).
SETTINGS = (
    Setting("digits", _zoo("digits"), (1000, 3000), "real", correlated=True),
    Setting("breast_cancer", _zoo("breast_cancer"), (284, 1138), "real", quick=True),
    Setting("wine", _zoo("wine"), (89, 356), "real", quick=True),
    Setting("irt_s3", _irt(3.0), (2000, 6000), "irt", correlated=True),
    Setting("irt_s0.3", _irt(0.3), (2000, 6000), "irt"),
    *(Setting(f"rho={r:g}", _coupled(r), (SWEEP_BUDGET,), "sweep") for r in SWEEP),
)


def _grid_of(settings: tuple[Setting, ...]) -> list[dict[str, Any]]:
    """The benchmark settings of ``settings``: each fixed budget, and the budget to 5% error."""
    fixed = [{"table": "fixed budget", "matrix": s.name, "budget": b} for s in settings for b in s.budgets]
    return fixed + [{"table": "fixed confidence", "matrix": s.name, "delta": DELTA} for s in settings]


def grid() -> list[dict[str, Any]]:
    """The settings of the full run (table, matrix, budget or target error rate; regime cells; the search)."""
    return _grid_of(SETTINGS) + grid_cells(False) + search_settings()


def run(*, quick: bool = False, seed: int = 0) -> BenchReport:
    """Every algorithm on every matrix, 400 runs per cell and a x1.2 budget grid, the regime grid (K = 5, 10,
    20) and the fit-budget search over 10 seeds; ``quick``: breast cancer and wine only, 100 runs per cell, a
    x1.5 grid and the regime grid at K = 5; no search (its grid search alone takes seconds per seed)."""
    if quick:
        quick_settings = tuple(s for s in SETTINGS if s.quick)
        return _report(quick_settings, reps=100, factor=1.5, seed=seed, regime=grid_cells(True))
    return _report(
        SETTINGS,
        reps=400,
        factor=1.2,
        seed=seed,
        regime=grid_cells(False),
        search_seeds=10,
        paired_reps=PAIRED_REPS,
    )


def _report(
    settings: tuple[Setting, ...],
    *,
    reps: int,
    factor: float,
    seed: int,
    regime: list[dict[str, Any]] | None = None,
    search_seeds: int = 0,
    paired_reps: int = 0,
) -> BenchReport:
    mats, build_s = {}, {}
    for s in settings:
        with Timer() as t:
            mats[s.name] = s.build()
        build_s[s.name] = t.seconds
    fixed, needed = [], []
    real_errors: Errors = {}
    for s in settings:
        S, corr = mats[s.name], mean_pairwise_correlation(mats[s.name])
        for b in s.budgets:
            errors = real_errors if s.kind == "real" else None
            fixed += fixed_budget_rows(s.name, S, b, corr, reps, seed, errors)
            if errors is not None:
                paper = simulate(S, b, "sysrs", reps=reps, seed=seed, schedule="sr")
                errors[((s.name, b), PAPER_SCHEDULE)] = run_errors(paper)
        needed += fixed_confidence_rows(s.name, S, corr, factor, reps, seed)
        logger.info("sysrs bench: %s done", s.name)
    grid_errors: Errors = {}
    regime_rows = grid_rows(regime or [], reps=reps, seed=seed, errors=grid_errors)
    summary = grid_summary(regime_rows) if regime_rows else []
    paired = (paired_rows(grid_errors, "regime grid") if grid_errors else []) + (
        paired_rows(real_errors, "real data") if real_errors else []
    )
    searches = search_rows(range(seed, seed + search_seeds)) if search_seeds else []
    real = {s.name for s in settings if s.kind == "real"}
    over = ("real data", real) if real else ("every matrix", set(mats))
    means = [_mean_row(fixed, system, *over) for system in SYSTEMS]
    headline = Headline.from_rows(means, "error_rate", higher_is_better=False, method_system=METHOD)
    if paired_reps:
        rivals: dict[str, tuple[dict[Any, tuple[np.ndarray, int]], str]] = {
            "regime grid": (
                {(c["rho"], c["budget"], c["K"]): (grid_matrix(c), c["budget"]) for c in regime or []},
                min((r for r in summary if r["is_baseline"]), key=lambda r: r["mean_error"])["system"],
            ),
            "real data": (
                {(s.name, b): (mats[s.name], b) for s in settings if s.kind == "real" for b in s.budgets},
                headline.best_baseline_system,
            ),
        }
        for scope, (problems, best) in rivals.items():
            systems = {METHOD: ("sysrs", {}), PAPER_SCHEDULE: ("sysrs", {"schedule": "sr"})}
            systems[best] = (SYSTEMS[best], {})
            errors = extended_errors(problems, systems, reps=paired_reps, seed=seed)
            paired += paired_rows(errors, f"{scope} (extended)")
    return BenchReport(
        rows=means + fixed + needed + summary + paired + regime_rows + searches,
        headline=headline,
        config={
            "reps": reps,
            "seed": seed,
            "grid_factor": factor,
            "delta": DELTA,
            "systems": SYSTEMS,
            "sweep": {
                "correlation": list(SWEEP),
                "accuracies": list(SWEEP_ACCURACIES),
                "budget": SWEEP_BUDGET,
            },
        },
        what=_what(settings, reps),
        notes=_notes(fixed, needed, settings, mats, build_s)
        + _regime_notes(summary)
        + _paired_notes(paired)
        + _search_notes(searches),
        settings=_grid_of(settings) + (regime or []) + (search_settings() if search_seeds else []),
    )


def _regime_notes(summary: list[dict[str, Any]]) -> list[str]:
    if not summary:
        return []
    me = next(r for r in summary if r["system"] == METHOD)
    others = [r for r in summary if r["system"] != METHOD]
    best = min(others, key=lambda r: r["mean_error"])
    detail = (
        f"SySRs {me['mean_error']:.3f} vs {best['system']} {best['mean_error']:.3f} over {me['cells']} cells"
    )
    lines = [
        verdict("Regime grid: SySRs has the lowest mean error", me["mean_error"] < best["mean_error"], detail)
    ]
    lines.append(
        verdict(
            f"Regime grid: err(SySRs) <= {TARGET_RATIO} x err(SR) at rho >= {HIGH_RHO}",
            me["err/SR_rho>=0.7"] <= TARGET_RATIO,
            f"mean ratio {me['err/SR_rho>=0.7']:.2f}; mean error {me['mean_error_rho>=0.7']:.3f} vs SR "
            f"{next(r for r in summary if r['system'] == 'SR')['mean_error_rho>=0.7']:.3f}",
        )
    )
    return lines


def _paired_notes(paired: list[dict[str, Any]]) -> list[str]:
    lines = []
    for scope in ("regime grid", "real data"):
        long = {
            r["system"]: r for r in paired if r["table"] == f"paired {scope} (extended)" and r["is_baseline"]
        }
        rows = [
            long.get(r["system"], r) for r in paired if r["table"] == f"paired {scope}" and r["is_baseline"]
        ]
        if not rows:
            continue
        worst = max(rows, key=lambda r: r["ci_high"])
        lines.append(
            verdict(
                f"{scope.capitalize()}: SySRs below every baseline (paired 95% interval below 0)",
                worst["ci_high"] < 0,
                "; ".join(
                    f"vs {r['system']} {r['mean_diff']:+.4f} [{r['ci_low']:+.4f}, {r['ci_high']:+.4f}], "
                    f"{r['runs']} runs"
                    for r in sorted(rows, key=lambda r: -r["mean_diff"])[:2]
                ),
            )
        )
    return lines


def _search_notes(searches: list[dict[str, Any]]) -> list[str]:
    if not searches:
        return []
    me = next(r for r in searches if r["system"] == "SySRsSearchCV(sysrs)")
    ok = me["speedup"] >= 3 and me["same_share"] >= 0.9
    return [
        verdict(
            "SySRsSearchCV: >= 3x less wall time than GridSearchCV, same pick in >= 90% of seeds",
            ok,
            f"x{me['speedup']:.1f} faster, same pick {me['same_pick']}, fit work {me['fit_share']:.2f} "
            f"of the grid's (budget {SEARCH_BUDGET:.2f})",
        )
    ]


def _what(settings: tuple[Setting, ...], reps: int) -> str:
    names = "all matrices" if len(settings) == len(SETTINGS) else " + ".join(s.name for s in settings)
    budgets = sum(len(s.budgets) for s in settings)
    text = f"best-model ID, {len(SYSTEMS)} algorithms on {names}: {budgets} budgets + 5%-error, {reps} runs"
    if len(settings) < len(SETTINGS):
        text += f" (full: {len(SETTINGS)} matrices, 400 runs)"
    return text


def _mean_row(fixed: list[dict[str, Any]], system: str, label: str, names: set[str]) -> dict[str, Any]:
    """One system's fixed-budget figures averaged over the matrices ``names`` (the headline rows)."""
    cells = [r for r in fixed if r["system"] == system and r["matrix"] in names]
    return {
        "system": system,
        "is_baseline": system != METHOD,
        "table": f"mean over {label}",
        "settings": len(cells),
        "error_rate": float(np.mean([r["error_rate"] for r in cells])),
        "regret_pts": float(np.mean([r["regret_pts"] for r in cells])),
    }


def _get(rows: list[dict[str, Any]], system: str, **where: Any) -> dict[str, Any]:
    return next(r for r in rows if r["system"] == system and all(r[k] == v for k, v in where.items()))


def _winners(rows: list[dict[str, Any]], figure: str) -> str:
    best = min(float(r[figure]) for r in rows)
    return "/".join(r["system"] for r in rows if float(r[figure]) == best)


def _notes(
    fixed: list[dict[str, Any]],
    needed: list[dict[str, Any]],
    settings: tuple[Setting, ...],
    mats: dict[str, np.ndarray],
    build_s: dict[str, float],
) -> list[str]:
    notes = [
        "Real: out-of-fold correctness of 11 scikit-learn classifiers (digits, breast_cancer, wine), built "
        "in code. Synthetic: Rasch-model matrices (irt_s3, irt_s0.3; s = spread of question difficulty, "
        "larger = more similar) and coupled draws rho=... (10 models, accuracies 0.60..0.70, a share rho of "
        "the queries decided by one draw for every model; corr = measured mean pairwise correlation).",
        "Matrix build seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in build_s.items()) + ".",
    ]
    for s in settings:
        if not s.correlated:
            continue
        for b in s.budgets:
            me, sr = _get(fixed, METHOD, matrix=s.name, budget=b), _get(fixed, "SR", matrix=s.name, budget=b)
            ok = me["error_rate"] <= TARGET_RATIO * sr["error_rate"]
            detail = f"{me['error_rate']:.3f} vs {sr['error_rate']:.3f}, ratio {me['err_vs_SR']:.2f}"
            if not ok:
                sh_last = _sh_last_round(len(mats[s.name]), b)
                detail += f"; limited by: {final_duel(mats[s.name], b)}; SH gives its last pair {sh_last}"
            notes.append(verdict(f"err(SySRs) <= {TARGET_RATIO} x err(SR) on {s.name} @ {b}", ok, detail))
    cells = [r for r in fixed if r["system"] == METHOD]
    regret_ok = sum(r["regret_pts"] <= _get(fixed, "SR", **_key(r))["regret_pts"] for r in cells)
    notes.append(f"regret(SySRs) <= regret(SR) in {regret_ok}/{len(cells)} fixed-budget settings.")
    uni = sum(
        _get(fixed, "uniform-synced", **_key(r))["error_rate"]
        <= _get(fixed, "uniform", **_key(r))["error_rate"]
        for r in cells
    )
    notes.append(f"err(uniform-synced) <= err(uniform) in {uni}/{len(cells)} settings (sharing alone helps).")
    over = [r for r in fixed if r["max_spent"] > r["budget"]]
    notes.append(verdict("Spend <= budget in every run", not over, f"{len(over)} cells over"))
    for s in settings:
        if s.kind != "sweep":
            continue
        b = s.budgets[0]
        row = [r for r in fixed if r["matrix"] == s.name and r["budget"] == b]
        line = (
            f"Sweep {s.name} (corr {row[0]['corr']:.2f}): fixed budget {b}: SySRs err "
            f"{_get(row, METHOD)['error_rate']:.3f}, lowest {_winners(row, 'error_rate')}"
        )
        conf = [r for r in needed if r["matrix"] == s.name]
        if conf:
            line += (
                f"; fixed confidence: SySRs needs {_get(conf, METHOD)['budget_to_delta']}, "
                f"least {_winners(conf, 'share_of_K*N')}"
            )
        notes.append(line + ".")
    return notes


def _sh_last_round(n_models: int, budget: int) -> str:
    from hf_ext.sysrs.baselines import sh_schedule

    return f"{sh_schedule(n_models, budget)[-1][0]} vs SR's {sr_schedule(n_models, budget)[-1]} queries"


def _key(row: dict[str, Any]) -> dict[str, Any]:
    return {"matrix": row["matrix"], "budget": row["budget"]}


def plot(report: BenchReport, directory: Path) -> dict[str, str]:
    """``sysrs_sweep.png``: error rate at the fixed budget and budget to 5% error against the correlation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    sweep = [r for r in report.rows if str(r.get("matrix", "")).startswith("rho=")]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    panels = (
        ("fixed budget", "error_rate", "error rate at budget 6000"),
        ("fixed confidence", "share_of_K*N", "budget to 5% error / (K N)"),
    )
    for ax, (table, figure, label) in zip(axes, panels):
        for system in SYSTEMS:
            pts = sorted(
                (r["corr"], r[figure]) for r in sweep if r["table"] == table and r["system"] == system
            )
            if pts:
                ax.plot(
                    *zip(*pts),
                    marker="o" if system == METHOD else ".",
                    lw=2 if system == METHOD else 1,
                    label=system,
                )
        ax.set(xlabel="mean pairwise correlation of the models' correctness", ylabel=label, title=table)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path = directory / "sysrs_sweep.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return {"sweep": str(path)}
