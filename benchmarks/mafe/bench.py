"""``hf-ext bench mafe``: trivial, scripted and learned baselines vs F-MACEM on the three MAFE-style
environments.

Everything is synthetic (reconstructed MAFE-style dynamics); nothing is compared with the paper's numbers,
which are trade-off curves without reusable figures. Per environment every arm runs on the same evaluation
seeds (paired comparison) in the same setting: default sizes, per-group thresholds, 100-step episodes.

- Trivial: ``approve-all`` / ``approve-none`` (threshold agents at their lowest / highest threshold, the
  other agents profit-greedy, no intervention) and ``random`` (every agent uniform).
- Scripted: profit-greedy agents without intervention, with each intervention at a fixed intensity (0.5),
  and with the primary intervention triggered by the observed gap.
- Constant: ``best constant``, every agent's one fixed action for the whole episode, searched on training
  seeds for the headline's ``fair_return`` (a random screen of joint actions, then coordinate ascent over each
  agent's whole action grid; ``_constant``).
- Learned baselines: ``F-MACEM beta=0`` (the same learner, blind to fairness) and ``independent CEM beta=5``
  (each agent's elites ranked by its own reward minus the same penalty: decentralised learners).
- Method: F-MACEM at beta = 5 (cooperative team objective, search from zero parameters) and the headline arm
  ``F-MACEM beta=5, warm start``: the same search started at the linear parameters that play the best
  constant action, keeping the best of its start, each iteration's best candidate and its final mean on
  held-out validation episodes (``validation_episodes``), so it falls back to the constant when the search
  ends worse (its training time includes the constant search).

Figures per row: ``return`` = mean per-step team return (the sum of every agent's reward), ``gap_value`` =
the episode gap of the domain's fairness key (``gap``), and the headline figure ``fair_return`` =
``return - 5 * gap_value``, the objective F-MACEM beta=5 trains for, scored on held-out seeds for every arm.
Also the episode ``dp_gap``/``eo_gap``, the final population ``level_gap`` and the regulator's spending. Cost
figures: agent-steps/s on one core of one ``ParallelEnv`` and of a 64-copy vector env, F-MACEM training time.

The full run's grid is the three environments; ``--quick`` (also the tour) runs its Loan setting with fewer
evaluation episodes and smaller F-MACEM and constant-search budgets (``BUDGETS`` in ``evaluation``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import BenchReport, Headline, Timer, progress, verdict
from benchmarks.mafe.evaluation import (
    BUDGETS,
    DOMAINS,
    FIXED_LEVEL,
    GAP_LEVEL,
    GAP_THRESHOLD,
    HEADLINE_BETA,
    MAX_CYCLES,
    VECTOR_COPIES,
    constant_policies,
    evaluate,
    make_env,
    paired_ci,
    row,
    scripted_arms,
    search_constant,
    setting,
    throughput,
    train,
    warm_start,
)

METHOD = f"F-MACEM beta={HEADLINE_BETA:g}, warm start"
COLD = f"F-MACEM beta={HEADLINE_BETA:g}"
CONSTANT = "best constant"
GREEDY = "greedy, no intervention"
SPEED_TARGET = 20_000  # agent-steps/s on one core, Loan at the default size


def run(*, quick: bool = False, seed: int = 0) -> BenchReport:
    """Run the benchmark (see the module docstring); ``quick`` runs the Loan setting only, with smaller
    evaluation and F-MACEM budgets."""
    cfg = BUDGETS[quick]
    envs: tuple[str, ...] = cfg["envs"]
    rows: list[dict[str, Any]] = []
    curves: dict[str, dict[str, list[list[float]]]] = {}
    paired: dict[str, dict[str, tuple[float, float]]] = {}
    speeds: dict[str, dict[str, float]] = {}
    over_constant: dict[str, tuple[float, float]] = {}
    actions: dict[str, dict[str, Any]] = {}
    selected: dict[str, str] = {}
    with Timer() as total:
        for env_name in envs:
            domain = DOMAINS[env_name]
            seeds = [10_000 * (seed + 1) + i for i in range(cfg["eval_episodes"][env_name])]
            res: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {}
            for system, kind, iv, policies in progress(scripted_arms(domain, seed), desc=f"{env_name} arms"):
                env = make_env(domain, iv)
                res[system] = kind, evaluate(env, policies(env), seeds, domain.gap), {}
            constant, seconds = search_constant(domain, cfg, seed)
            env = make_env(domain, domain.primary)
            res[CONSTANT] = (
                "constant",
                evaluate(env, constant_policies(constant, len(seeds)), seeds, domain.gap),
                {"train_s": seconds},
            )
            actions[env_name] = {a: np.asarray(v).tolist() for a, v in constant.items()}
            learners = [(f"F-MACEM beta={b:g}", b, "team") for b in cfg["betas"]]
            learners.append((f"independent CEM beta={HEADLINE_BETA:g}", HEADLINE_BETA, "per_agent"))
            learners.append((METHOD, HEADLINE_BETA, "team"))
            for system, beta, objective in progress(learners, desc=f"{env_name} training"):
                warm = system == METHOD
                init = warm_start(domain, constant) if warm else None
                cem, seconds = train(
                    domain, cfg, beta, objective, seed, init, cfg["validation_episodes"] if warm else 0
                )
                if warm and cem.selection_ is not None:
                    scored, chosen = cem.selection_
                    selected[env_name] = scored[chosen][0]
                if init is not None:
                    seconds += res[CONSTANT][2]["train_s"]  # the search that found its start
                kind = "method" if objective == "team" and beta > 0 else "learned"
                env = make_env(domain, domain.primary)
                res[system] = kind, evaluate(env, cem.policies(), seeds, domain.gap), {"train_s": seconds}
            speeds[env_name] = throughput(domain, cfg["speed_steps"], cfg["vector_steps"])
            base = res[GREEDY][1]
            paired[env_name] = {
                s: paired_ci(r["gap"], base["gap"])
                for s, (_, r, _) in res.items()
                if s.startswith("greedy +")
            }
            over_constant[env_name] = paired_ci(res[METHOD][1]["fair"], res[CONSTANT][1]["fair"])
            rows += [row(env_name, s, k, r, domain.gap, **x) for s, (k, r, x) in res.items()]
            curves[env_name] = {
                s: _curve(r["series"]) for s, (_, r, _) in res.items() if s in (GREEDY, CONSTANT, METHOD)
            }
    notes = _notes(rows, paired, over_constant, speeds, total.seconds, quick)
    headline_env = "loan" if "loan" in envs else envs[0]
    headline = Headline.from_rows(
        rows, "fair_return", higher_is_better=True, method_system=METHOD, where={"env": headline_env}
    )
    config = {
        **{k: (list(v) if isinstance(v, tuple) else v) for k, v in cfg.items()},
        "max_cycles": MAX_CYCLES,
        "headline_beta": HEADLINE_BETA,
        "gap_keys": {e: DOMAINS[e].gap for e in envs},
        "fixed_level": FIXED_LEVEL,
        "gap_trigger": [GAP_THRESHOLD, GAP_LEVEL],
        "group_thresholds": True,
        "best_constant_actions": actions,
        "warm_start_selected": selected,
        "agent_steps_per_s": speeds,
        "gap_over_time": curves,
        "total_wall_s": total.seconds,
    }
    return BenchReport(
        rows=rows,
        headline=headline,
        config=config,
        notes=notes,
        what=_what(cfg, quick),
        settings=[setting(e) for e in envs],
    )


def grid() -> list[dict[str, Any]]:
    """The settings of the full run: each environment with ``MAX_CYCLES``-step episodes."""
    return [setting(e) for e in BUDGETS[False]["envs"]]


def _what(cfg: dict[str, Any], quick: bool) -> str:
    """The tour's "what ran" line: environments, evaluation episodes, CEM iterations (and the full run's)."""

    def part(c: dict[str, Any]) -> str:
        envs = c["envs"][0] if len(c["envs"]) == 1 else f"{len(c['envs'])} envs"
        n = sorted(set(c["eval_episodes"].values()))
        return f"{envs}, {'-'.join(map(str, n))} episodes, CEM {c['iterations']} iters"

    return f"{part(cfg)} (full: {part(BUDGETS[False])})" if quick else part(cfg)


def _curve(series: np.ndarray) -> list[list[float]]:
    """Per-step mean and 95% half-width over the episodes of a ``(T, episodes)`` gap series."""
    n = series.shape[1]
    half = 1.96 * series.std(1, ddof=1) / math.sqrt(n) if n > 1 else np.zeros(len(series))
    return [np.round(series.mean(1), 4).tolist(), np.round(half, 4).tolist()]


def _best(rows: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return max((r for r in rows if r["kind"] == kind), key=lambda r: r["fair_return"])


def _notes(
    rows: list[dict[str, Any]],
    paired: dict[str, dict[str, tuple[float, float]]],
    over_constant: dict[str, tuple[float, float]],
    speeds: dict[str, dict[str, float]],
    total_s: float,
    quick: bool,
) -> list[str]:
    notes = [
        "Synthetic: MAFE-style reconstructed dynamics, not the paper's; no numerical parity is claimed.",
        f"fair_return = return - {HEADLINE_BETA:g} * gap_value (episode gap of the env's `gap` key), "
        "on held-out seeds.",
    ]
    for env_name in dict.fromkeys(r["env"] for r in rows):
        mine = [r for r in rows if r["env"] == env_name]
        by = {r["system"]: r for r in mine}
        method, greedy = by[METHOD], by[GREEDY]
        for kind in ("trivial", "constant", "scripted", "learned"):
            best = _best(mine, kind)
            margin = method["fair_return"] - best["fair_return"]
            notes.append(
                verdict(
                    f"[{env_name}] {METHOD} fair_return above the best {kind} baseline",
                    margin > 0,
                    f"{method['fair_return']:+.4f} vs {best['fair_return']:+.4f} ({best['system']}), "
                    f"margin {margin:+.4f}",
                )
            )
        lo, hi = over_constant[env_name]
        notes.append(
            verdict(
                f"[{env_name}] {METHOD} beats the best constant policy beyond the seed spread (paired 95% CI "
                "of fair_return above 0)",
                lo > 0,
                f"difference CI [{lo:+.4f}, {hi:+.4f}]; {COLD} minus best constant "
                f"{by[COLD]['fair_return'] - by[CONSTANT]['fair_return']:+.4f}",
            )
        )
        trivial = max((r for r in mine if r["kind"] == "trivial"), key=lambda r: r["return"])
        blind = by["F-MACEM beta=0"]
        notes.append(
            verdict(
                f"[{env_name}] trivial policies lose on return to F-MACEM beta=0",
                trivial["return"] < blind["return"],
                f"best trivial {trivial['system']} {trivial['return']:+.4f} vs {blind['return']:+.4f} "
                f"(greedy {greedy['return']:+.4f})",
            )
        )
        for system, (lo, hi) in paired[env_name].items():
            notes.append(
                verdict(
                    f"[{env_name}] {system} lowers {greedy['gap']} vs greedy (paired 95% CI below 0)",
                    hi < 0,
                    f"change CI [{lo:+.3f}, {hi:+.3f}]",
                )
            )
        cem = sorted(
            (r for r in mine if r["system"].startswith("F-MACEM") and r["system"] != METHOD),
            key=lambda r: r["system"],
        )
        lo_b, hi_b = cem[0], cem[-1]
        notes.append(
            verdict(
                f"[{env_name}] F-MACEM frontier monotone (beta 0 -> {HEADLINE_BETA:g}: gap down, "
                "return not up)",
                hi_b["gap_value"] < lo_b["gap_value"] and lo_b["return"] >= hi_b["return"],
                f"gap {lo_b['gap_value']:.3f} -> {hi_b['gap_value']:.3f}, "
                f"return {lo_b['return']:+.4f} -> {hi_b['return']:+.4f}",
            )
        )
        sp = speeds[env_name]
        notes.append(
            f"[{env_name}] agent-steps/s on one core ({sp['n_agents']:.0f} agents, default size, full "
            f"infos): {sp['single']:,.0f} for one ParallelEnv, {sp['vector']:,.0f} for a "
            f"{VECTOR_COPIES}-copy vector env"
        )
    loan = speeds.get("loan")
    if loan is not None:
        notes.append(
            verdict(
                f"[loan] >= {SPEED_TARGET:,} agent-steps/s on one core (batched vector env)",
                loan["vector"] >= SPEED_TARGET,
                f"{loan['vector']:,.0f}; one ParallelEnv: {loan['single']:,.0f}",
            )
        )
        seconds = 100 * 400 * loan["n_agents"] / loan["vector"]
        notes.append(
            "Paper's unconfirmed cost (reviews): 2-3 days for 100 episodes x 400 steps; here "
            f"{seconds:.1f} s of Loan steps at the vector-env rate (different, reconstructed simulators)."
        )
    limit = 15 if quick else 600
    notes.append(verdict(f"whole bench <= {limit} s", total_s <= limit, f"{total_s:.0f} s"))
    return notes


def plot(report: BenchReport, directory: Path) -> dict[str, str]:
    """Draw the return-vs-gap frontier and the gap over time per environment as PNG files in ``directory``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = list(dict.fromkeys(r["env"] for r in report.rows))
    files = {}
    fig, axes = plt.subplots(1, len(envs), figsize=(5 * len(envs), 4.2), squeeze=False)
    markers = {"trivial": "x", "constant": "D", "scripted": "s", "learned": "^", "method": "o"}
    for ax, env_name in zip(axes[0], envs):
        mine = [r for r in report.rows if r["env"] == env_name]
        for r in mine:
            ax.scatter(r["gap_value"], r["return"], marker=markers[r["kind"]], label=r["system"])
        cem = sorted(
            (r for r in mine if r["system"].startswith("F-MACEM") and r["system"] != METHOD),
            key=lambda r: r["system"],
        )
        ax.plot([r["gap_value"] for r in cem], [r["return"] for r in cem], "k-", lw=0.8)
        ax.set(title=env_name, xlabel=f"episode {mine[0]['gap']}", ylabel="mean per-step team return")
        ax.legend(fontsize=6)
    fig.tight_layout()
    files["frontier"] = str(directory / "mafe_frontier.png")
    fig.savefig(files["frontier"], dpi=100)
    plt.close(fig)
    fig, axes = plt.subplots(1, len(envs), figsize=(5 * len(envs), 3.6), squeeze=False)
    for ax, env_name in zip(axes[0], envs):
        for system, (mean, half) in report.config["gap_over_time"][env_name].items():
            m, h = np.asarray(mean), np.asarray(half)
            ax.plot(m, label=system)
            ax.fill_between(np.arange(len(m)), m - h, m + h, alpha=0.2)
        ax.set(
            title=f"{env_name}: per-step {report.config['gap_keys'][env_name]} (mean, 95% CI)", xlabel="step"
        )
        ax.legend(fontsize=7)
    fig.tight_layout()
    files["gap_over_time"] = str(directory / "mafe_gap_over_time.png")
    fig.savefig(files["gap_over_time"], dpi=100)
    plt.close(fig)
    return files
