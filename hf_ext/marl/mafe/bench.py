"""``hf-ext bench mafe``: scripted baselines vs interventions vs F-MACEM on the three MAFE-style environments.

Everything is synthetic (reconstructed MAFE-style dynamics); nothing is compared with the paper's numbers,
which are trade-off curves without reusable figures. Per environment, every policy is evaluated on the same
episode seeds (paired comparison, common random numbers). Figures per row: mean per-step team ``return``
(the environment's money-valued reward components summed over agents; for healthcare also the regulator's
``welfare`` = mean severity decrease, since on money alone a cooperative insurer + hospital team maximises its
return by denying all care), the loan banks' ``profit``, mean and final ``dp_gap``/``eo_gap``/``level_gap``,
regulator spending, ratios against the profit-greedy baseline without intervention, and the paired 95% CIs of
the ``dp_gap`` and ``eo_gap`` changes against that baseline. Cost figures: env steps/s of one unwrapped env
(``n_per_step=200``, full infos, greedy actions; wall clock) and F-MACEM training wall time.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from hf_ext.benchmarking import BenchReport, Headline, Timer, verdict
from hf_ext.marl import education_mafe_v0, healthcare_mafe_v0, loan_mafe_v0
from hf_ext.marl.mafe.core import REGULATOR
from hf_ext.marl.mafe.fmacem import FMACEM
from hf_ext.marl.mafe.policies import (
    FixedIntervention,
    GapTriggeredIntervention,
    ProfitGreedy,
    RandomPolicy,
    bind_all,
    run_episode,
)

logger = logging.getLogger(__name__)

# env -> (module, primary intervention, extra interventions, team-return components)
ENVS: dict[str, tuple[Any, str, tuple[str, ...], tuple[str, ...]]] = {
    "loan": (loan_mafe_v0, "subsidy", (), ("profit", "subsidy_cost")),
    "healthcare": (
        healthcare_mafe_v0,
        "premium_subsidy",
        ("capacity_reservation", "outreach"),
        ("premiums", "claims", "revenue", "treatment_cost", "subsidy_cost", "welfare"),
    ),
    "education": (
        education_mafe_v0,
        "tutoring_subsidy",
        ("admission_quota", "blind_hiring"),
        ("skill_gain", "tutoring_cost", "admit_quality", "productivity", "wages", "subsidy_cost"),
    ),
}
BETAS = (0.0, 1.0, 5.0)
FIXED_LEVEL, GAP_THRESHOLD, GAP_LEVEL = 2, 0.1, 4


def _settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "eval_episodes": {"loan": 6, "healthcare": 4, "education": 4},
            "eval_cycles": 50,
            "train_cycles": 20,
            "population": 8,
            "iterations": 4,
            "episodes": 1,
            "betas": (0.0, 5.0),
            "speed_steps": 3_000,
        }
    return {
        "eval_episodes": {"loan": 200, "healthcare": 20, "education": 20},
        "eval_cycles": 100,
        "train_cycles": 50,
        "population": 24,
        "iterations": 20,
        "episodes": 2,
        "betas": BETAS,
        "speed_steps": 10_000,
    }


def _greedy(env: Any, reg: Any) -> dict[str, Any]:
    pols = {a: ProfitGreedy() for a in env.possible_agents if a != REGULATOR}
    pols[REGULATOR] = reg
    return bind_all(pols, env)


def _evaluate(env: Any, pols: dict[str, Any], seeds: list[int], keys: tuple[str, ...]) -> dict[str, Any]:
    weights = dict.fromkeys(keys, 1.0)
    ret, profit, cost, series = [], [], [], {k: [] for k in ("dp_gap", "eo_gap", "level_gap")}
    with Timer() as t:
        for s in seeds:
            log = run_episode(env, pols, seed=s, weights=weights)
            ret.append(log.rewards.sum(1).mean())
            profit.append(sum(v.mean() for k, v in log.components.items() if k.endswith("/profit")))
            cost.append(-log.components[f"{REGULATOR}/subsidy_cost"].mean())
            for k in series:
                series[k].append(log.fairness[k])
    return {
        "return": np.array(ret),
        "profit": np.array(profit),
        "cost": np.array(cost),
        "series": {k: np.stack(v) for k, v in series.items()},
        "wall_s": t.seconds,
    }


def _steps_per_s(module: Any, n_steps: int) -> float:
    env = module.parallel_env(max_cycles=100)
    pols = _greedy(env, FixedIntervention(0))
    obs, _ = env.reset(seed=0)
    wall = 0.0
    for i in range(n_steps):
        if not env.agents:
            obs, _ = env.reset(seed=i)
        actions = {a: pols[a](obs[a], a) for a in env.agents}
        with Timer() as t:
            obs, *_ = env.step(actions)
        wall += t.seconds
    return n_steps / wall


def _row(env_name: str, system: str, res: dict[str, Any], base: dict[str, Any] | None, **extra: Any) -> dict:
    dp = res["series"]["dp_gap"]
    row = {
        "env": env_name,
        "system": system,
        "is_baseline": not system.startswith("F-MACEM"),
        **extra,
        "return": float(res["return"].mean()),
        "profit": float(res["profit"].mean()),
        "dp_gap_mean": float(dp.mean()),
        "dp_gap_final": float(dp[:, -1].mean()),
        "eo_gap_mean": float(res["series"]["eo_gap"].mean()),
        "level_gap_mean": float(res["series"]["level_gap"].mean()),
        "level_gap_final": float(res["series"]["level_gap"][:, -1].mean()),
        "reg_spend": float(res["cost"].mean()),
        "eval_wall_s": res["wall_s"],
    }
    if base is not None:
        b_ret = float(base["return"].mean())
        row["return_ratio"] = row["return"] / b_ret if b_ret else math.nan
        b_dp = float(base["series"]["dp_gap"].mean())
        row["dp_gap_ratio"] = row["dp_gap_mean"] / b_dp if b_dp else math.nan
        for key, short in (("dp_gap", "dp"), ("eo_gap", "eo")):
            diff = res["series"][key].mean(1) - base["series"][key].mean(1)
            half = 1.96 * float(diff.std(ddof=1)) / math.sqrt(len(diff)) if len(diff) > 1 else math.nan
            row[f"{short}_diff_ci_lo"] = float(diff.mean()) - half
            row[f"{short}_diff_ci_hi"] = float(diff.mean()) + half
    return row


def _plot(results: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(results), figsize=(5 * len(results), 8), squeeze=False)
    for j, (env_name, res) in enumerate(results.items()):
        ax = axes[0, j]
        cem = [(s, r) for s, r in res.items() if s.startswith("F-MACEM")]
        for s, r in res.items():
            if not s.startswith("F-MACEM"):
                ax.scatter(r["series"]["dp_gap"].mean(), r["return"].mean(), label=s, marker="s")
        xs = [r["series"]["dp_gap"].mean() for _, r in cem]
        ys = [r["return"].mean() for _, r in cem]
        ax.plot(xs, ys, "o-", color="k", label="F-MACEM (beta sweep)")
        for (s, _), x, y in zip(cem, xs, ys):
            ax.annotate(s.split()[-1], (x, y), fontsize=8)
        ax.set(
            title=f"{env_name}: return vs fairness gap",
            xlabel="mean dp_gap",
            ylabel="mean per-step team return",
        )
        ax.legend(fontsize=6)
        ax = axes[1, j]
        for s, r in res.items():
            if s.startswith(("greedy", "F-MACEM beta=5")):
                dp = r["series"]["dp_gap"]
                m = dp.mean(0)
                h = 1.96 * dp.std(0, ddof=1) / math.sqrt(len(dp)) if len(dp) > 1 else np.zeros_like(m)
                ax.plot(m, label=s)
                ax.fill_between(np.arange(len(m)), m - h, m + h, alpha=0.2)
        ax.set(title=f"{env_name}: dp_gap over time (mean +- 95% CI)", xlabel="step", ylabel="dp_gap")
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _out_dir() -> Path:
    out = Path(os.environ.get("HF_EXT_BENCH_DIR", Path(tempfile.gettempdir()) / "hf_ext_bench"))
    out.mkdir(parents=True, exist_ok=True)
    return out


def run(*, quick: bool, seed: int) -> BenchReport:
    """Run the benchmark (see the module docstring); ``quick`` shrinks every budget to finish in < 60 s."""
    return _run(quick=quick, seed=seed, envs=tuple(ENVS))


def _run(*, quick: bool, seed: int, envs: tuple[str, ...]) -> BenchReport:
    cfg = _settings(quick)
    with Timer() as total:
        rows: list[dict[str, Any]] = []
        results: dict[str, dict[str, Any]] = {}
        speeds: dict[str, float] = {}
        for env_name in envs:
            module, primary, extra, keys = ENVS[env_name]
            seeds = [10_000 * (seed + 1) + i for i in range(cfg["eval_episodes"][env_name])]
            res: dict[str, Any] = {}

            def make(intervention: str | None, cycles: int, module: Any = module) -> Any:
                return module.parallel_env(intervention=intervention, max_cycles=cycles)

            env = make(primary, cfg["eval_cycles"])
            res["random"] = _evaluate(
                env, bind_all({a: RandomPolicy(seed) for a in env.possible_agents}, env), seeds, keys
            )
            res["greedy, no intervention"] = _evaluate(env, _greedy(env, FixedIntervention(0)), seeds, keys)
            for name in (primary, *extra):
                e = make(name, cfg["eval_cycles"])
                res[f"greedy + fixed {name}"] = _evaluate(
                    e, _greedy(e, FixedIntervention(FIXED_LEVEL)), seeds, keys
                )
            res[f"greedy + gap-triggered {primary}"] = _evaluate(
                env, _greedy(env, GapTriggeredIntervention(GAP_THRESHOLD, GAP_LEVEL)), seeds, keys
            )
            train_s = {}
            for beta in cfg["betas"]:
                with Timer() as t:
                    cem = FMACEM(
                        lambda m=make, p=primary: m(p, cfg["train_cycles"]),
                        beta=beta,
                        alpha=0.0,
                        reward_weights=dict.fromkeys(keys, 1.0),
                        population=cfg["population"],
                        iterations=cfg["iterations"],
                        episodes=cfg["episodes"],
                        seed=seed,
                    ).fit()
                name = f"F-MACEM beta={beta:g}"
                train_s[name] = t.seconds
                res[name] = _evaluate(env, cem.policies(), seeds, keys)
            speeds[env_name] = _steps_per_s(module, cfg["speed_steps"])
            base = res["greedy, no intervention"]
            for system, r in res.items():
                extra_cols: dict[str, Any] = {
                    "beta": float(system.split("=")[1]) if "=" in system else math.nan
                }
                if system == "greedy, no intervention":
                    extra_cols["steps_per_s"] = speeds[env_name]
                if system in train_s:
                    extra_cols["train_s"] = train_s[system]
                rows.append(_row(env_name, system, r, None if r is base else base, **extra_cols))
            results[env_name] = res
    total_s = total.seconds
    plot: Path | None = _out_dir() / f"mafe_frontier_{'quick' if quick else 'full'}_seed{seed}.png"
    try:
        _plot(results, plot)
    except ImportError:
        logger.warning("matplotlib is not installed: no frontier plot (pip install matplotlib).")
        plot = None
    notes = _verdicts(rows, speeds, total_s, quick, plot, cfg["speed_steps"])
    headline_env = "loan" if "loan" in envs else envs[0]
    top_beta = max(cfg["betas"])
    headline = Headline.from_rows(
        rows,
        "dp_gap_mean",
        higher_is_better=False,
        method_system=f"F-MACEM beta={top_beta:g}",
        where={"env": headline_env},
    )
    config = {
        **{k: (v if not isinstance(v, tuple) else list(v)) for k, v in cfg.items()},
        "envs": list(envs),
        "fixed_level": FIXED_LEVEL,
        "gap_trigger": [GAP_THRESHOLD, GAP_LEVEL],
        "plot": str(plot) if plot else None,
        "total_wall_s": total_s,
    }
    return BenchReport(
        rows=rows,
        headline=headline,
        config=config,
        notes=notes,
        files={"frontier": str(plot)} if plot else {},
        what=f"MAFE-style {', '.join(envs)}: greedy vs interventions vs F-MACEM beta sweep",
    )


def _verdicts(
    rows: list[dict],
    speeds: dict[str, float],
    total_s: float,
    quick: bool,
    plot: Path | None,
    n_steps: int,
) -> list[str]:
    notes = [
        "Synthetic: MAFE-style reconstructed dynamics, not the paper's; no numerical parity is claimed.",
        f"Frontier + gap-over-time plot: {plot}"
        if plot
        else "No plot: matplotlib is not installed (target MISSED).",
    ]
    by = {(r["env"], r["system"]): r for r in rows}
    for env_name in dict.fromkeys(r["env"] for r in rows):
        mine = [r for r in rows if r["env"] == env_name]
        greedy = by[(env_name, "greedy, no intervention")]
        for r in mine:
            if r["system"].startswith("greedy +"):
                ok = r["dp_diff_ci_hi"] < 0
                notes.append(
                    f"[{env_name}] {r['system']}: dp_gap change "
                    f"{r['dp_gap_mean'] - greedy['dp_gap_mean']:+.3f}, "
                    f"paired 95% CI [{r['dp_diff_ci_lo']:+.3f}, {r['dp_diff_ci_hi']:+.3f}] -> "
                    f"{'lowers the gap (CI excludes 0)' if ok else 'target MISSED'}; eo_gap change paired CI "
                    f"[{r['eo_diff_ci_lo']:+.3f}, {r['eo_diff_ci_hi']:+.3f}]"
                )
        cem = sorted((r for r in mine if r["system"].startswith("F-MACEM")), key=lambda r: r["beta"])
        if len(cem) >= 2:
            lo, hi = cem[0], cem[-1]
            mono = hi["dp_gap_mean"] < lo["dp_gap_mean"] and lo["return"] >= hi["return"]
            notes.append(
                f"[{env_name}] frontier beta={lo['beta']:g}->{hi['beta']:g}: dp_gap {lo['dp_gap_mean']:.3f}->"
                f"{hi['dp_gap_mean']:.3f}, return {lo['return']:.4f}->{hi['return']:.4f} -> "
                f"{'monotone (target met)' if mono else 'NOT monotone (target missed)'}"
            )
            gap = lo["return"] / greedy["return"] - 1 if greedy["return"] else math.nan
            notes.append(
                f"[{env_name}] F-MACEM beta=0 return vs greedy: {gap:+.1%} -> "
                f"{'met (>= -5%)' if gap >= -0.05 else 'MISSED (< -5%)'}"
            )
        wall = speeds[env_name]
        notes.append(
            verdict(f"[{env_name}] env steps/s >= 10k", wall >= 10_000, f"{wall:,.0f} over {n_steps:,} steps")
        )
    limit = 60 if quick else 600
    notes.append(verdict(f"whole bench <= {limit} s", total_s <= limit, f"{total_s:.0f} s"))
    notes.append("Paper's unconfirmed cost (reviews): 2-3 days for 100 episodes x 400 steps.")
    return notes


def tour(*, quick: bool = True, seed: int = 0) -> BenchReport:
    """Tour entry: the quick benchmark on the Loan environment only."""
    return _run(quick=True, seed=seed, envs=("loan",))
