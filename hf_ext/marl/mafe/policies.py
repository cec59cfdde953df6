"""Scripted policies for the MAFE-style environments and an episode runner that logs every component.

A policy is a callable ``policy(obs, agent) -> action``. Policies that read the environment's model
(:class:`ProfitGreedy`) or its observation layout (:class:`GapTriggeredIntervention`) get it through
``bind(env)``; :func:`run_episode`, :class:`~hf_ext.marl.mafe.wrappers.SingleAgentView` and
:class:`~hf_ext.marl.mafe.fmacem.FMACEM` call ``bind`` for you.

**[paper]** simple deterministic intervention policies; **[reconstructed]** their exact rules below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium import spaces

Policy = Callable[[np.ndarray, str], Any]


class ScriptedPolicy:
    """Base of the scripted policies: ``bind(env)`` stores the unwrapped environment."""

    env: Any = None

    def bind(self, env: Any) -> ScriptedPolicy:
        self.env = env.unwrapped
        return self

    def _require_env(self) -> Any:
        if self.env is None:
            raise RuntimeError(f"{type(self).__name__} needs the environment: call policy.bind(env) first.")
        return self.env

    def __call__(self, obs: np.ndarray, agent: str) -> Any:
        raise NotImplementedError


def _check_level(level: int) -> int:
    if not isinstance(level, int | np.integer) or not 0 <= level <= 4:
        raise ValueError(
            f"`level` must be an int in 0..4 (intervention intensity 0, .25, .5, .75, 1), got {level!r}."
        )
    return int(level)


class FixedIntervention(ScriptedPolicy):
    """Regulator policy that always plays intervention intensity ``level`` (0..4 -> 0, .25, .5, .75, 1).

    Examples:
        >>> FixedIntervention(2)(None, "regulator_0")
        2
    """

    def __init__(self, level: int) -> None:
        self.level = _check_level(level)

    def __call__(self, obs: np.ndarray, agent: str) -> int:
        return self.level


class GapTriggeredIntervention(ScriptedPolicy):
    """Regulator policy: play ``level`` while the observed last-step rate gap exceeds ``threshold``, else 0.

    The gap is ``max - min`` of the per-group rates in the observation (the environment's ``dp_gap`` of the
    previous step).

    Args:
        threshold: Gap in ``[0, 1]`` above which the intervention switches on.
        level: Intensity index 0..4 played while on.
    """

    def __init__(self, threshold: float, level: int) -> None:
        if not 0.0 <= float(threshold) <= 1.0:
            raise ValueError(f"`threshold` must be in [0, 1], got {threshold!r}.")
        self.threshold, self.level = float(threshold), _check_level(level)

    def __call__(self, obs: np.ndarray, agent: str) -> int:
        rates = self._require_env().decode_obs(obs)["rates"]
        return self.level if float(rates.max() - rates.min()) > self.threshold else 0


class ProfitGreedy(ScriptedPolicy):
    """The myopically reward-maximising action of each agent given its current observation.

    Uses the environment's ``myopic_values(obs, agent)`` (expected one-step reward of each action computed
    from the observed level histograms, rates and intervention intensity; see each environment). For a
    per-group ``MultiDiscrete`` action the best entry is chosen per group. The regulator's myopic best is
    no intervention (0).
    """

    def __call__(self, obs: np.ndarray, agent: str) -> Any:
        values = self._require_env().myopic_values(obs, agent)
        return np.argmax(values, axis=-1).astype(np.int64) if values.ndim == 2 else int(np.argmax(values))


class RandomPolicy(ScriptedPolicy):
    """Uniformly random actions from a private ``numpy`` generator (the spaces' own RNGs are left alone).

    Args:
        seed: Seed of the policy's generator.
    """

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def __call__(self, obs: np.ndarray, agent: str) -> Any:
        space = self._require_env().action_space(agent)
        if isinstance(space, spaces.MultiDiscrete):
            return self.rng.integers(0, space.nvec).astype(np.int64)
        return int(self.rng.integers(space.n))


def bind_all(policies: Mapping[str, Policy], env: Any) -> dict[str, Policy]:
    """Bind every policy that has ``bind`` to ``env``; return the mapping as a dict."""
    for p in policies.values():
        if hasattr(p, "bind"):
            p.bind(env)
    return dict(policies)


@dataclass
class EpisodeLog:
    """Per-step record of one episode.

    Attributes:
        agents: The agents, in ``possible_agents`` order.
        rewards: ``(T, N)`` per-agent rewards: the weighted sum of its reward components (all weights 1 when
            no weights are given, which equals the environment's scalar reward).
        components: ``"<agent>/<component>"`` -> ``(T,)`` unweighted reward components.
        fairness: Global fairness key (``dp_gap``, ``rate/A``, ...) -> ``(T,)``.
    """

    agents: list[str]
    rewards: np.ndarray
    components: dict[str, np.ndarray] = field(default_factory=dict)
    fairness: dict[str, np.ndarray] = field(default_factory=dict)


def run_episode(
    env: Any, policies: Mapping[str, Policy], seed: int | None, weights: Mapping[str, float] | None = None
) -> EpisodeLog:
    """Play one episode of a ParallelEnv with ``policies[agent](obs, agent)`` and log every component.

    Args:
        env: A MAFE-style ParallelEnv (or a wrapper of one).
        policies: One policy per agent of ``env.possible_agents``.
        seed: Passed to ``env.reset``.
        weights: Optional component -> weight for :attr:`EpisodeLog.rewards` (missing components weigh 0).
    """
    agents = list(env.possible_agents)
    missing = [a for a in agents if a not in policies]
    if missing:
        raise ValueError(f"`policies` has no policy for agents {missing}; give one per agent of {agents}.")
    obs, infos = env.reset(seed=seed)
    first = agents[0]
    rewards, comps, fair = [], [], []
    while env.agents:
        obs, rew, _, _, infos = env.step({a: policies[a](obs[a], a) for a in env.agents})
        rc = [infos[a]["reward_components"] for a in agents]
        if weights is None:
            rewards.append([rew[a] for a in agents])
        else:
            rewards.append([sum(weights.get(k, 0.0) * v for k, v in c.items()) for c in rc])
        comps.append(rc)
        fair.append(infos[first]["fairness_components"])
    fair_keys = [k for k in fair[0] if not k.startswith("own/")] if fair else []
    return EpisodeLog(
        agents,
        np.asarray(rewards, dtype=np.float64).reshape(len(rewards), len(agents)),
        {
            f"{a}/{k}": np.array([step[i][k] for step in comps])
            for i, a in enumerate(agents)
            for k in comps[0][i]
        }
        if comps
        else {},
        {k: np.array([f[k] for f in fair]) for k in fair_keys},
    )
