"""What only ``hf-ext bench mafe`` uses: the benchmark settings, the arms (trivial, scripted, learned),
their evaluation on a vector env of shared seeds, and the throughput measurements."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.harness import Timer, mean_se, pinned_threads
from benchmarks.mafe._constant import ConstantTable, best_constant
from hf_ext.mafe import education_mafe_v0, healthcare_mafe_v0, loan_mafe_v0
from hf_ext.mafe.core import REGULATOR
from hf_ext.mafe.fmacem import FMACEM, constant_params
from hf_ext.mafe.policies import (
    ApproveAll,
    ApproveNone,
    FixedIntervention,
    GapTriggeredIntervention,
    Policy,
    ProfitGreedy,
    RandomPolicy,
    bind_all,
    run_episode,
)
from hf_ext.mafe.vector import MAFEVectorEnv


@dataclass(frozen=True)
class Domain:
    """One environment of the benchmark: its module, primary intervention, other interventions and the
    fairness gap its headline penalises (loan approvals and hiring: demographic parity; health care: access
    among those in need, since the sicker group is rightly treated more often)."""

    module: Any
    primary: str
    others: tuple[str, ...]
    gap: str


DOMAINS = {
    "loan": Domain(loan_mafe_v0, "subsidy", ("quota", "score_boost"), "dp_gap"),
    "healthcare": Domain(
        healthcare_mafe_v0, "premium_subsidy", ("capacity_reservation", "outreach"), "eo_gap"
    ),
    "education": Domain(education_mafe_v0, "tutoring_subsidy", ("admission_quota", "blind_hiring"), "dp_gap"),
}
HEADLINE_BETA = (
    5.0  # fair return = return - HEADLINE_BETA * gap: the weight F-MACEM's headline arm trains with
)
FIXED_LEVEL, GAP_THRESHOLD, GAP_LEVEL = 2, 0.1, 4
VECTOR_COPIES = 64


MAX_CYCLES = 100  # episode length of every setting
# Environments and budgets of a run, keyed by `quick`: evaluation episodes per arm, F-MACEM population,
# iterations, episodes and betas, steps of the speed measurements. The quick run is the Loan slice of the
# full grid with smaller budgets.
BUDGETS: dict[bool, dict[str, Any]] = {
    False: {
        "envs": ("loan", "healthcare", "education"),
        "eval_episodes": {"loan": 200, "healthcare": 100, "education": 100},
        "population": 32,
        "iterations": 30,
        "episodes": 4,
        "betas": (0.0, 5.0),
        "validation_episodes": 8,
        "constant_screen": 256,
        "constant_sweeps": 3,
        "constant_episodes": 8,
        "speed_steps": 4_000,
        "vector_steps": 100,
    },
    True: {
        "envs": ("loan",),
        "eval_episodes": {"loan": 32},
        "population": 16,
        "iterations": 10,
        "episodes": 2,
        "betas": (0.0, 5.0),
        "validation_episodes": 4,
        "constant_screen": 32,
        "constant_sweeps": 1,
        "constant_episodes": 4,
        "speed_steps": 500,
        "vector_steps": 10,
    },
}


def setting(env_name: str) -> dict[str, Any]:
    """The keys that define one setting of the grid: the environment and the episode length."""
    return {"env": env_name, "max_cycles": MAX_CYCLES}


def make_env(domain: Domain, intervention: str | None) -> Any:
    """The benchmark setting: default sizes, per-group thresholds (the lever a fair policy needs),
    ``MAX_CYCLES``-step episodes."""
    return domain.module.parallel_env(intervention=intervention, group_thresholds=True, max_cycles=MAX_CYCLES)


def scripted(env: Any, deciders: Callable[[], Policy], regulator: Policy) -> dict[str, Policy]:
    """``deciders()`` for the threshold agents, ``regulator`` for the regulator, greedy for the rest."""
    pols: dict[str, Policy] = {
        a: deciders() if a in env.deciders else ProfitGreedy() for a in env.possible_agents if a != REGULATOR
    }
    pols[REGULATOR] = regulator
    return pols


def scripted_arms(domain: Domain, seed: int) -> list[tuple[str, str, str | None, Callable[[Any], dict]]]:
    """``(system, kind, intervention, policies(env))`` of the trivial and scripted arms."""
    arms: list[tuple[str, str, str | None, Callable[[Any], dict]]] = [
        ("approve-all", "trivial", domain.primary, lambda e: scripted(e, ApproveAll, FixedIntervention(0))),
        ("approve-none", "trivial", domain.primary, lambda e: scripted(e, ApproveNone, FixedIntervention(0))),
        ("random", "trivial", domain.primary, lambda e: {a: RandomPolicy(seed) for a in e.possible_agents}),
        (
            "greedy, no intervention",
            "scripted",
            domain.primary,
            lambda e: scripted(e, ProfitGreedy, FixedIntervention(0)),
        ),
    ]
    for iv in (domain.primary, *domain.others):
        arms.append(
            (
                f"greedy + fixed {iv}",
                "scripted",
                iv,
                lambda e: scripted(e, ProfitGreedy, FixedIntervention(FIXED_LEVEL)),
            )
        )
    arms.append(
        (
            f"greedy + gap-triggered {domain.primary}",
            "scripted",
            domain.primary,
            lambda e: scripted(e, ProfitGreedy, GapTriggeredIntervention(GAP_THRESHOLD, GAP_LEVEL)),
        )
    )
    return arms


def search_constant(domain: Domain, cfg: dict[str, Any], seed: int) -> tuple[dict[str, Any], float]:
    """The best constant joint action on the benchmark setting (training seeds disjoint from F-MACEM's and
    the evaluation's); returns it and the search's wall time."""
    env = make_env(domain, domain.primary)
    seeds = [seed * 10**6 + 900_000 + i for i in range(cfg["constant_episodes"])]
    with Timer() as t:
        actions, _, _ = best_constant(
            env,
            seeds,
            domain.gap,
            HEADLINE_BETA,
            screen=cfg["constant_screen"],
            sweeps=cfg["constant_sweeps"],
            rng=np.random.default_rng(seed),
        )
    return actions, t.seconds


def constant_policies(actions: dict[str, Any], copies: int) -> dict[str, Policy]:
    """The constant joint action as batched policies for a ``copies``-copy vector env."""
    table = ConstantTable({a: np.repeat(np.asarray(v)[None], copies, 0) for a, v in actions.items()})
    return dict.fromkeys(actions, table)


def warm_start(domain: Domain, actions: dict[str, Any]) -> dict[str, np.ndarray]:
    """Linear F-MACEM parameters that play the constant joint action ``actions`` (its search's start)."""
    env = make_env(domain, domain.primary)
    return {
        a: constant_params(env.action_space(a), env.observation_space(a).shape[0], v)
        for a, v in actions.items()
    }


def train(
    domain: Domain,
    cfg: dict[str, Any],
    beta: float,
    objective: str,
    seed: int,
    init_params: dict[str, np.ndarray] | None = None,
    validation_episodes: int = 0,
    **fmacem_kwargs: Any,
) -> tuple[FMACEM, float]:
    """F-MACEM (or its per-agent variant) on the benchmark setting, optionally warm-started at
    ``init_params`` and keeping the best of its start, iteration bests and final mean on
    ``validation_episodes`` held-out episodes; returns the trainer and its wall time. ``fmacem_kwargs``
    (e.g. ``policy``, ``init_std``) go to :class:`FMACEM` as they are."""
    with Timer() as t:
        cem = FMACEM(
            lambda: make_env(domain, domain.primary),
            **fmacem_kwargs,
            beta=beta,
            penalty_keys=(domain.gap,),
            population=cfg["population"],
            iterations=cfg["iterations"],
            episodes=cfg["episodes"],
            objective=objective,
            seed=seed,
            init_params=init_params,
            validation_episodes=validation_episodes,
        ).fit()
    return cem, t.seconds


def evaluate(env: Any, policies: dict[str, Policy], seeds: list[int], gap: str) -> dict[str, Any]:
    """Every episode of ``seeds`` at once: per-episode return, gaps, regulator spending, gap over time."""
    pols = bind_all(policies, env)
    with Timer() as t:
        log = run_episode(MAFEVectorEnv(env, len(seeds)), pols, seed=seeds)
    ret = log.rewards.sum(-1).mean(0)  # (episodes,) mean per-step team return
    gaps = {k: log.episode_gap(k) for k in ("dp_gap", "eo_gap")}
    return {
        "return": ret,
        "gap": gaps[gap],
        "fair": ret - HEADLINE_BETA * gaps[gap],
        "dp_gap": gaps["dp_gap"],
        "eo_gap": gaps["eo_gap"],
        "level_gap_final": log.fairness["level_gap"][-1],
        "reg_spend": -log.components[f"{REGULATOR}/subsidy_cost"].mean(0),
        "series": log.fairness[gap],  # (T, episodes) per-step gap
        "wall_s": t.seconds,
    }


def row(env_name: str, system: str, kind: str, res: dict[str, Any], gap: str, **extra: Any) -> dict[str, Any]:
    """One table row: means over the evaluation episodes."""
    fair, fair_se, _ = mean_se(res["fair"].tolist())
    return {
        "env": env_name,
        "system": system,
        "kind": kind,
        "is_baseline": kind in ("trivial", "constant", "scripted", "learned"),
        "fair_return": fair,
        "fair_return_se": fair_se,
        "return": float(res["return"].mean()),
        "gap": gap,
        "gap_value": float(res["gap"].mean()),
        "dp_gap": float(res["dp_gap"].mean()),
        "eo_gap": float(res["eo_gap"].mean()),
        "level_gap_final": float(res["level_gap_final"].mean()),
        "reg_spend": float(res["reg_spend"].mean()),
        **extra,
    }


def paired_ci(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """95% interval of the mean per-episode difference ``a - b`` (same seeds)."""
    mean, se, _ = mean_se((a - b).tolist())
    return mean - 1.96 * se, mean + 1.96 * se


def throughput(domain: Domain, n_steps: int, vector_steps: int) -> dict[str, float]:
    """Agent-steps/s on one core at the default sizes: one ``ParallelEnv`` (full infos) and the vector env
    (``VECTOR_COPIES`` copies); actions from the profit-greedy policies, timed around ``step`` only."""
    env = domain.module.parallel_env(max_cycles=MAX_CYCLES)
    pols = bind_all(scripted(env, ProfitGreedy, FixedIntervention(0)), env)
    n_agents = len(env.possible_agents)
    with pinned_threads(1):
        obs, _ = env.reset(seed=0)
        single = 0.0
        for i in range(n_steps):
            if not env.agents:
                obs, _ = env.reset(seed=i)
            actions = {a: pols[a](obs[a], a) for a in env.agents}
            with Timer() as t:
                obs, *_ = env.step(actions)
            single += t.seconds
        venv = MAFEVectorEnv(env, VECTOR_COPIES)
        obs, _ = venv.reset(seed=0)
        vector = 0.0
        for i in range(vector_steps):
            if not venv.agents:
                obs, _ = venv.reset(seed=i * VECTOR_COPIES)
            actions = {a: pols[a](obs[a], a) for a in venv.agents}
            with Timer() as t:
                obs, *_ = venv.step(actions)
            vector += t.seconds
    return {
        "single": n_agents * n_steps / single,
        "vector": n_agents * VECTOR_COPIES * vector_steps / vector,
        "n_agents": float(n_agents),
    }
