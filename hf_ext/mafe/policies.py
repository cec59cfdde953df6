"""Scripted policies for the MAFE-style environments and an episode runner that logs every component.

A policy is a callable ``policy(obs, agent) -> action``. The scripted policies here also take a batch of
observations ``(B, d)`` from :class:`~hf_ext.mafe.vector.MAFEVectorEnv` and then return ``B`` actions
(they set ``batched = True``). Policies that read the environment's model (:class:`ProfitGreedy`) or its
observation layout (:class:`GapTriggeredIntervention`) get it through ``bind(env)``; :func:`run_episode`,
:class:`~hf_ext.mafe.wrappers.SingleAgentView` and :class:`~hf_ext.mafe.fmacem.FMACEM` call
``bind`` for you.

**[paper]** simple deterministic intervention policies; **[reconstructed]** their exact rules below.
:class:`ApproveAll`, :class:`ApproveNone` and :class:`RandomPolicy` are the trivial baselines.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium import spaces

from hf_ext._registry import paper
from hf_ext._validation import check_float, check_int
from hf_ext.mafe.core import GAP_SOURCES, episode_gap

Policy = Callable[[np.ndarray, str], Any]


class ScriptedPolicy:
    """Base of the scripted policies: ``bind(env)`` stores the unwrapped environment."""

    env: Any = None
    batched = True
    _paper = paper("mafe")  # accepts (B, d) observations and returns B actions

    def bind(self, env: Any) -> ScriptedPolicy:
        self.env = env.unwrapped
        return self

    def _require_env(self) -> Any:
        if self.env is None:
            raise RuntimeError(f"{type(self).__name__} needs the environment: call policy.bind(env) first.")
        return self.env

    def __call__(self, obs: np.ndarray, agent: str) -> Any:
        raise NotImplementedError


def _single(actions: np.ndarray, obs: Any) -> Any:
    """``actions`` for a batch of observations, or one action (an ``int`` or per-group array) for one."""
    if obs is not None and np.ndim(obs) == 2:
        return actions
    return int(actions) if np.ndim(actions) == 0 else actions


def _check_level(level: int) -> int:
    return check_int("level", level, low=0, high=4, hint="Intervention intensity index: 0, .25, .5, .75, 1.")


class FixedIntervention(ScriptedPolicy):
    """Regulator policy that always plays intervention intensity ``level`` (0..4 -> 0, .25, .5, .75, 1).

    Examples:
        >>> FixedIntervention(2)(None, "regulator_0")
        2
    """

    def __init__(self, level: int) -> None:
        self.level = _check_level(level)

    def __call__(self, obs: np.ndarray, agent: str) -> Any:
        return _single(np.full(np.shape(obs)[:-1], self.level), obs)


class GapTriggeredIntervention(ScriptedPolicy):
    """Regulator policy: play ``level`` while the observed last-step rate gap exceeds ``threshold``, else 0.

    The gap is ``max - min`` of the per-group rates in the observation (the environment's ``dp_gap`` of the
    previous step).

    Args:
        threshold: Gap in ``[0, 1]`` above which the intervention switches on.
        level: Intensity index 0..4 played while on.
    """

    def __init__(self, threshold: float, level: int) -> None:
        self.threshold = check_float("threshold", threshold, low=0, high=1)
        self.level = _check_level(level)

    def __call__(self, obs: np.ndarray, agent: str) -> Any:
        rates = self._require_env().decode_obs(obs)["rates"]
        return _single(np.where(rates.max(-1) - rates.min(-1) > self.threshold, self.level, 0), obs)


class ProfitGreedy(ScriptedPolicy):
    """The myopically reward-maximising action of each agent given its current observation.

    Uses the environment's ``myopic_values(obs, agent)`` (expected one-step reward of each action computed
    from the observed level histograms, rates and intervention intensity; see each environment). For a
    per-group ``MultiDiscrete`` action the best entry is chosen per group. The regulator's myopic best is
    no intervention (0).
    """

    def __call__(self, obs: np.ndarray, agent: str) -> Any:
        return _single(np.argmax(self._require_env().myopic_values(obs, agent), axis=-1), obs)


class _ExtremeThreshold(ScriptedPolicy):
    """The lowest or highest threshold of a threshold agent (a bank, a hospital, the university...)."""

    lowest = True

    def __call__(self, obs: np.ndarray, agent: str) -> Any:
        env = self._require_env()
        if agent not in env.deciders:
            raise ValueError(
                f"{type(self).__name__} sets thresholds: `agent` must be one of {env.deciders}, "
                f"got {agent!r}."
            )
        space = env.action_space(agent)
        top = space.nvec - 1 if isinstance(space, spaces.MultiDiscrete) else np.asarray(space.n - 1)
        action = np.zeros_like(top) if self.lowest else top
        return _single(np.broadcast_to(action, (*np.shape(obs)[:-1], *top.shape)).copy(), obs)


class ApproveAll(_ExtremeThreshold):
    """Trivial baseline for a threshold agent: threshold 0, so every individual gets the positive decision
    (every applicant approved, every care seeker eligible, every student admitted or hired)."""

    lowest = True


class ApproveNone(_ExtremeThreshold):
    """Trivial baseline for a threshold agent: the highest threshold ``K``, so no individual gets the
    positive decision."""

    lowest = False


class RandomPolicy(ScriptedPolicy):
    """Uniformly random actions from a private ``numpy`` generator (the spaces' own RNGs are left alone).

    Args:
        seed: Seed of the policy's generator.
    """

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def __call__(self, obs: np.ndarray, agent: str) -> Any:
        space = self._require_env().action_space(agent)
        high = space.nvec if isinstance(space, spaces.MultiDiscrete) else np.asarray(space.n)
        return _single(self.rng.integers(0, high, size=(*np.shape(obs)[:-1], *high.shape)), obs)


def bind_all(policies: Mapping[str, Policy], env: Any) -> dict[str, Policy]:
    """Bind every policy that has ``bind`` to ``env``; return the mapping as a dict."""
    for p in policies.values():
        if hasattr(p, "bind"):
            p.bind(env)
    return dict(policies)


def act(policy: Policy, obs: np.ndarray, agent: str) -> Any:
    """``policy(obs, agent)``; a batch of observations goes row by row to a policy that is not ``batched``."""
    if np.ndim(obs) == 1 or getattr(policy, "batched", False):
        return policy(obs, agent)
    return np.stack([np.asarray(policy(o, agent)) for o in obs])


@dataclass
class EpisodeLog:
    """Per-step record of one episode (or of ``B`` episodes of a vector env: the ``B`` axes below).

    Attributes:
        agents: The agents, in ``possible_agents`` order.
        groups: The group names.
        rewards: ``(T, [B,] N)`` per-agent rewards: the weighted sum of its reward components (all weights 1
            when no weights are given, which equals the environment's scalar reward).
        components: ``"<agent>/<component>"`` -> ``(T, [B])`` unweighted reward components.
        fairness: Global fairness key (``dp_gap``, ``rate/A``, ...) -> ``(T, [B])``.
        present: ``(T, [B,] G)`` bool, whether each group had a sampled member in that step.
    """

    agents: list[str]
    groups: list[str]
    rewards: np.ndarray
    components: dict[str, np.ndarray] = field(default_factory=dict)
    fairness: dict[str, np.ndarray] = field(default_factory=dict)
    present: np.ndarray | None = None

    def episode_gap(self, key: str) -> np.ndarray:
        """``dp_gap``, ``eo_gap`` or ``level_gap`` of the episode: the gap between the groups' episode
        means of ``rate/<g>``, ``tpr/<g>`` or ``mean_level/<g>`` (see
        :func:`~hf_ext.mafe.core.episode_gap`); a float, or ``(B,)`` for a vector env.

        A group counts in a step when it had a sampled member; for ``eo_gap`` a step where a group had
        members but none qualified enters its mean as ``tpr`` 0.0 (rare at the default sizes).
        """
        if key not in GAP_SOURCES:
            raise ValueError(f"`key` must be one of {sorted(GAP_SOURCES)}, got {key!r}.")
        values = np.stack([self.fairness[GAP_SOURCES[key] + g] for g in self.groups], -1)
        present = (
            self.present if key != "level_gap" and self.present is not None else np.ones(values.shape, bool)
        )
        return episode_gap(values, present)


def run_episode(
    env: Any,
    policies: Mapping[str, Policy],
    seed: int | Sequence[int] | None,
    weights: Mapping[str, float] | None = None,
) -> EpisodeLog:
    """Play one episode of a ParallelEnv (or one batch of episodes of a vector env) and log every component.

    Args:
        env: A MAFE-style ParallelEnv (or a wrapper of one), or a
            :class:`~hf_ext.mafe.vector.MAFEVectorEnv` (then ``seed`` may list one seed per copy).
        policies: One policy per agent of ``env.possible_agents``, called as ``policy(obs, agent)``.
        seed: Passed to ``env.reset``.
        weights: Optional component -> weight for :attr:`EpisodeLog.rewards` (missing components weigh 0).
    """
    agents = list(env.possible_agents)
    missing = [a for a in agents if a not in policies]
    if missing:
        raise ValueError(f"`policies` has no policy for agents {missing}; give one per agent of {agents}.")
    groups = list(env.unwrapped.groups)
    obs, infos = env.reset(seed=seed)
    first = agents[0]
    rewards, comps, fair, present = [], [], [], []
    while env.agents:
        obs, rew, _, _, infos = env.step({a: act(policies[a], obs[a], a) for a in env.agents})
        rc = [infos[a]["reward_components"] for a in agents]
        if weights is None:
            rewards.append(np.stack([rew[a] for a in agents], -1))
        else:
            rewards.append(np.stack([sum(weights.get(k, 0.0) * v for k, v in c.items()) for c in rc], -1))
        comps.append(rc)
        fair.append(infos[first]["fairness_components"])
        empty = infos[first]["empty_groups"]
        present.append(~empty if isinstance(empty, np.ndarray) else [g not in empty for g in groups])
    fair_keys = [k for k in fair[0] if not k.startswith("own/")] if fair else []
    return EpisodeLog(
        agents,
        groups,
        np.asarray(rewards, dtype=np.float64),
        {
            f"{a}/{k}": np.array([step[i][k] for step in comps])
            for i, a in enumerate(agents)
            for k in comps[0][i]
        }
        if comps
        else {},
        {k: np.array([f[k] for f in fair]) for k in fair_keys},
        np.asarray(present, dtype=bool),
    )
