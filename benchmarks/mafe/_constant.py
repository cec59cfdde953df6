"""The best constant policy: every agent plays one fixed action all episode, the joint choice found by
coordinate ascent over each agent's whole action grid (after a random-restart screen of joint choices).

Each candidate is one copy of a vector env, so a sweep over an agent's actions is one batched rollout; all
candidates of a round share the training seeds (common random numbers). The score is the benchmark's
``fair_return`` (mean per-step team return minus ``beta`` times the episode gap), on training seeds disjoint
from the evaluation seeds."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from hf_ext.mafe.policies import run_episode
from hf_ext.mafe.vector import MAFEVectorEnv


def action_grid(space: spaces.Space) -> np.ndarray:
    """Every action of a ``Discrete(n)`` (shape ``(n,)``) or ``MultiDiscrete(nvec)`` space
    (``(prod(nvec), len(nvec))``, row-major)."""
    if isinstance(space, spaces.Discrete):
        return np.arange(int(space.n))
    if isinstance(space, spaces.MultiDiscrete):
        nvec = tuple(int(n) for n in space.nvec)
        return np.stack(np.unravel_index(np.arange(int(np.prod(nvec))), nvec), -1)
    raise TypeError(f"constant search supports Discrete and MultiDiscrete actions, got {space}.")


class ConstantTable:
    """Batched policy playing a fixed action per copy: ``actions[agent]`` is ``(B,)`` or ``(B, G)``."""

    batched = True

    def __init__(self, actions: dict[str, np.ndarray]) -> None:
        self.actions = actions

    def __call__(self, obs: np.ndarray, agent: str) -> Any:
        return self.actions[agent]


def score(env: Any, joint: dict[str, np.ndarray], seeds: list[int], gap: str, beta: float) -> np.ndarray:
    """``(C,)`` mean ``fair_return`` over ``seeds`` of ``C`` joint constant choices, agent -> ``(C, ...)``."""
    c, e = len(next(iter(joint.values()))), len(seeds)
    table = ConstantTable({a: np.repeat(v, e, 0) for a, v in joint.items()})
    log = run_episode(MAFEVectorEnv(env, c * e), dict.fromkeys(joint, table), seed=seeds * c)
    fair = log.rewards.sum(-1).mean(0) - beta * log.episode_gap(gap)
    return fair.reshape(c, e).mean(1)


def best_constant(
    env: Any, seeds: list[int], gap: str, beta: float, *, screen: int, sweeps: int, rng: np.random.Generator
) -> tuple[dict[str, Any], float, int]:
    """Best joint constant action of ``env``'s agents; returns ``(agent -> action, training score,
    candidates scored)``."""
    grids = {a: action_grid(env.action_space(a)) for a in env.possible_agents}
    picks = {a: rng.integers(len(g), size=screen) for a, g in grids.items()}
    scores = score(env, {a: grids[a][p] for a, p in picks.items()}, seeds, gap, beta)
    best = {a: int(p[np.argmax(scores)]) for a, p in picks.items()}
    value, scored = float(scores.max()), screen
    for _ in range(sweeps):
        changed = False
        for agent, grid in grids.items():
            joint = {a: np.repeat(grids[a][best[a]][None], len(grid), 0) for a in grids}
            joint[agent] = grid
            s = score(env, joint, seeds, gap, beta)
            scored += len(grid)
            # the same seeds for every round, so the current choice scores ``value`` again within ``s``
            if s.max() > value + 1e-12:
                best[agent], value, changed = int(np.argmax(s)), float(s.max()), True
        if not changed:
            break
    return {a: grids[a][i] for a, i in best.items()}, value, scored
