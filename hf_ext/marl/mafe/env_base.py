"""Base class of the MAFE-style PettingZoo ``ParallelEnv`` classes: spaces, seeding, the step loop and the
reward/fairness components in ``infos`` (the dynamics are each environment's ``_simulate``).

**[reconstructed]** The observation layout, component keys and the regulator agent are hf-ext choices in the
formalism of the paper's Fair Dec-POMDP (see :mod:`hf_ext.marl.mafe.core`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from pettingzoo import ParallelEnv

from hf_ext._validation import check_bool, check_choice, check_float, check_int, check_sequence
from hf_ext.marl.mafe.core import INTENSITIES, REGULATOR, StepOutcome, fairness_stats
from hf_ext.metrics.functional.fairness import _group_gap_compute, _group_rate_compute

logger = logging.getLogger(__name__)


class MAFEParallelEnv(ParallelEnv):
    """Base class of the MAFE-style PettingZoo ``ParallelEnv`` classes (population, spaces, seeding,
    components).

    Subclasses define :meth:`_agent_table` (agent -> (action space, number of own features)),
    :meth:`_simulate` (one step of dynamics) and :meth:`_features` (agent-specific observation terms).

    Observation of every agent: ``Box(0, 1, (d,), float32)`` =
    ``[per-group level histograms (G*K), last per-group rates (G), intervention intensity (1),
    t/max_cycles (1),
    agent-specific terms]``. The state is the common part followed by every agent's terms.

    Args:
        groups: Group names (at least 2, distinct).
        group_shares: Population share of each group (non-negative, summing to 1); default equal shares.
        population_size: Individuals simulated (default 2000).
        n_per_step: Individuals sampled without replacement per step (default 200).
        max_cycles: Episode length in steps (truncation).
        intervention: One of the environment's ``interventions`` (``None`` for none).
        group_thresholds: Per-group thresholds (``MultiDiscrete``) for threshold agents instead of one.
        config: The environment's config dataclass (``None``: its defaults).
        render_mode: ``"ansi"`` (``render()`` returns a str), ``"human"`` (writes it to stdout) or ``None``.
    """

    metadata: dict[str, Any] = {
        "name": "mafe_v0",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": True,
    }
    interventions: tuple[str | None, ...] = (None,)
    config_cls: type = object
    decision_name = "decision"

    def __init__(
        self,
        *,
        groups: Sequence[str] = ("A", "B"),
        group_shares: Sequence[float] | None = None,
        population_size: int = 2000,
        n_per_step: int = 200,
        max_cycles: int = 100,
        intervention: str | None = None,
        group_thresholds: bool = False,
        config: Any = None,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        groups = tuple(str(g) for g in check_sequence("groups", groups, min_length=2))
        if len(set(groups)) != len(groups):
            raise ValueError(f"`groups` must have distinct names, got {groups!r}.")
        shares = np.asarray(
            [1.0 / len(groups)] * len(groups)
            if group_shares is None
            else check_sequence(
                "group_shares", group_shares, lambda n, v: check_float(n, v, low=0), length=len(groups)
            )
        )
        if not np.isclose(shares.sum(), 1.0):
            raise ValueError(f"`group_shares` must sum to 1, got {group_shares!r} (sum {shares.sum():g}).")
        max_cycles = check_int("max_cycles", max_cycles, low=1)
        population_size = check_int("population_size", population_size, low=2)
        n_per_step = check_int(
            "n_per_step", n_per_step, low=1, high=population_size, hint="At most `population_size`."
        )
        check_choice("intervention", intervention, self.interventions)
        check_bool("group_thresholds", group_thresholds)
        check_choice("render_mode", render_mode, (*self.metadata["render_modes"], None))
        self.config = self.config_cls() if config is None else config
        if not isinstance(self.config, self.config_cls):
            raise TypeError(f"`config` must be a {self.config_cls.__name__}, got {type(config).__name__}.")
        self.groups, self.group_shares = groups, shares
        self.num_groups, self.num_levels = len(groups), self.config.num_levels
        self.population_size, self.n_per_step, self.max_cycles = (
            int(population_size),
            int(n_per_step),
            int(max_cycles),
        )
        self.intervention, self.group_thresholds, self.render_mode = (
            intervention,
            bool(group_thresholds),
            render_mode,
        )
        self.disadvantaged = self.config.disadvantaged_group(self.num_groups)
        self._level_probs = self.config.level_probs(self.num_groups)
        counts = np.floor(shares * population_size).astype(np.int64)
        counts[np.argsort(-(shares * population_size - counts))[: population_size - counts.sum()]] += 1
        self._group = np.repeat(np.arange(self.num_groups), counts)
        self._group_counts = counts
        self._group_counts_f = counts.astype(np.float64)
        self._levels_f = np.arange(self.config.num_levels, dtype=np.float64)
        table = self._agent_table()
        self.possible_agents = list(table)
        self._act_spaces = {a: s for a, (s, _) in table.items()}
        self._n_features = {a: n for a, (_, n) in table.items()}
        g, k = self.num_groups, self.num_levels
        self._common_dim = g * k + g + 2
        self._obs_spaces = {
            a: spaces.Box(0.0, 1.0, (self._common_dim + n,), np.float32) for a, n in self._n_features.items()
        }
        self.state_space = spaces.Box(
            0.0, 1.0, (self._common_dim + sum(self._n_features.values()),), np.float32
        )
        offsets = np.cumsum([0, *self._n_features.values()]) + self._common_dim
        self._obs_index = {
            a: np.r_[np.arange(self._common_dim), np.arange(offsets[i], offsets[i + 1])]
            for i, a in enumerate(self.possible_agents)
        }
        self._keys = {
            "rate": [f"rate/{x}" for x in groups],
            "tpr": [f"tpr/{x}" for x in groups],
            "mean_level": [f"mean_level/{x}" for x in groups],
            "own": [f"own/rate/{x}" for x in groups],
        }
        self._np_random: np.random.Generator | None = None
        self._level: np.ndarray | None = None
        self.agents: list[str] = []

    # ----- spaces ---------------------------------------------------------------------------------
    def observation_space(self, agent: str) -> spaces.Box:
        """The agent's observation space (built once in ``__init__``: the same object on every call)."""
        return self._obs_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        """The agent's action space (built once in ``__init__``: the same object on every call)."""
        return self._act_spaces[agent]

    def threshold_space(self, n: int) -> spaces.Space:
        """``Discrete(n)`` or, with ``group_thresholds=True``, ``MultiDiscrete([n] * G)``."""
        return spaces.MultiDiscrete([n] * self.num_groups) if self.group_thresholds else spaces.Discrete(n)

    # ----- subclass hooks -------------------------------------------------------------------------
    def _agent_table(self) -> dict[str, tuple[spaces.Space, int]]:
        raise NotImplementedError

    def _simulate(self, idx: np.ndarray, actions: dict[str, Any]) -> StepOutcome:
        raise NotImplementedError

    def _features(self, agent: str) -> list[float]:
        return []

    def _reset_dynamics(self) -> None:
        """Reset subclass state after the population is drawn."""

    def myopic_values(self, obs: np.ndarray, agent: str) -> np.ndarray:
        """Expected one-step reward of each action of ``agent`` given its observation (for ``ProfitGreedy``).

        Shape: ``(n_actions,)`` for ``Discrete`` agents, ``(G, n)`` per-group values for ``MultiDiscrete``.
        The regulator's myopic best is no intervention (any intensity costs money): values ``-level``.
        """
        return -INTENSITIES.copy() if agent == REGULATOR else self._myopic_values(obs, agent)

    def _myopic_values(self, obs: np.ndarray, agent: str) -> np.ndarray:
        raise NotImplementedError

    def decode_obs(self, obs: np.ndarray) -> dict[str, np.ndarray]:
        """Split an observation into ``hist (G, K)``, ``rates (G,)``, ``intensity``, ``time``, ``own``."""
        g, k = self.num_groups, self.num_levels
        return {
            "hist": obs[: g * k].reshape(g, k),
            "rates": obs[g * k : g * k + g],
            "intensity": obs[g * k + g],
            "time": obs[g * k + g + 1],
            "own": obs[self._common_dim :],
        }

    # ----- API ------------------------------------------------------------------------------------
    @property
    def np_random(self) -> np.random.Generator:
        if self._np_random is None:
            self._np_random, _ = seeding.np_random(None)
        return self._np_random

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        if seed is not None or self._np_random is None:
            self._np_random, _ = seeding.np_random(seed)
        rng = self._np_random
        cdf = np.cumsum(self._level_probs, axis=1)
        u = rng.random(self.population_size)
        self._level = np.minimum((u[:, None] > cdf[self._group]).sum(1), self.num_levels - 1)
        self._level0 = self._level.copy()
        self._t = 0
        self._rates = np.zeros(self.num_groups)
        self._intensity = 0.0
        self.agents = list(self.possible_agents)
        self._agent_set = set(self.agents)
        self._reset_dynamics()
        g, k = self.num_groups, self.num_levels
        self._hist = np.bincount(self._group * k + self._level, minlength=g * k).reshape(g, k)
        state = self._state_vector()
        obs = {a: state[self._obs_index[a]] for a in self.agents}
        comps = self._level_components()
        infos = {
            a: {"reward_components": {}, "fairness_components": dict(comps), "empty_groups": []}
            for a in self.agents
        }
        return obs, infos

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        if not self.agents:
            raise RuntimeError("call reset() before step(): the episode has not started or is over.")
        if actions.keys() != self._agent_set:
            unknown = sorted(set(actions) - self._agent_set)
            if unknown:
                raise ValueError(
                    f"actions given for unknown or finished agents {unknown}; live agents: {self.agents}."
                )
            missing = [a for a in self.agents if a not in actions]
            raise ValueError(
                f"`actions` is missing live agents {missing}; pass one action per agent in env.agents."
            )
        parsed = {a: self._parse_action(a, act) for a, act in actions.items()}
        self._intensity = float(INTENSITIES[parsed[REGULATOR]]) if self.intervention is not None else 0.0
        idx = self._np_random.choice(self.population_size, self.n_per_step, replace=False, shuffle=False)
        before = self._level[idx]
        out = self._simulate(idx, parsed)
        after = self._level[idx]
        self._t += 1
        g, k = self.num_groups, self.num_levels
        grp = self._group[idx]
        self._hist += (
            np.bincount(grp * k + after, minlength=g * k) - np.bincount(grp * k + before, minlength=g * k)
        ).reshape(g, k)
        owners, means, counts, gaps = fairness_stats(out, self._hist @ self._levels_f, self._group_counts_f)
        n_sets = len(owners)
        self._rates = means[0]
        empty = [self.groups[i] for i in np.flatnonzero(counts[0] == 0)]
        means_l, gaps_l = means.tolist(), gaps.tolist()
        common = dict(zip(self._keys["mean_level"], means_l[-1]))
        common["level_gap"] = gaps_l[-1]
        common.update(zip(self._keys["rate"], means_l[0]))
        common.update(zip(self._keys["tpr"], means_l[n_sets]))
        common["dp_gap"], common["eo_gap"] = gaps_l[0], gaps_l[n_sets]
        own = {}
        for s_, agent in enumerate(owners[1:], start=1):
            d = dict(zip(self._keys["own"], means_l[s_]))
            d["own/dp_gap"], d["own/eo_gap"] = gaps_l[s_], gaps_l[n_sets + s_]
            own[agent] = d
        out.reward_components[REGULATOR]["welfare"] = self._welfare(before, after)
        truncated = self._t >= self.max_cycles
        state = self._state_vector()
        obs, rewards, infos = {}, {}, {}
        for a in self.agents:
            comps = out.reward_components[a]
            fair = dict(common)
            if a in own:
                fair.update(own[a])
            infos[a] = {"reward_components": comps, "fairness_components": fair, "empty_groups": list(empty)}
            rewards[a] = float(sum(comps.values()))
            obs[a] = state[self._obs_index[a]]
        terms = {a: False for a in self.agents}
        truncs = {a: truncated for a in self.agents}
        if truncated:
            self.agents = []
            self._agent_set = set()
        return obs, rewards, terms, truncs, infos

    def _welfare(self, before: np.ndarray, after: np.ndarray) -> float:
        """Regulator ``welfare``: mean level change of the sampled individuals, in the better direction."""
        sign = 1.0 if self.config._higher_level_is_better else -1.0
        return sign * float((after - before).sum()) / len(before)

    def _parse_action(self, agent: str, action: Any) -> Any:
        space = self._act_spaces[agent]
        if isinstance(space, spaces.Discrete):
            try:
                a = int(action)
                ok = a == action and 0 <= a < space.n
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise ValueError(f"action {action!r} of agent {agent!r} is not in its action space {space}.")
            return a
        arr = np.asarray(action)
        if (
            arr.shape != space.shape
            or arr.dtype.kind not in "iu"
            or (arr < 0).any()
            or (arr >= space.nvec).any()
        ):
            raise ValueError(f"action {action!r} of agent {agent!r} is not in its action space {space}.")
        return arr.astype(np.int64)

    def _threshold_of(self, action: Any, groups: np.ndarray) -> np.ndarray | int:
        """Per-individual threshold: the scalar action, or the group entry of a per-group action."""
        return action[groups] if isinstance(action, np.ndarray) else action

    def _level_components(self) -> dict[str, float]:
        sums, counts = self._hist @ self._levels_f, self._group_counts_f
        comps = dict(zip(self._keys["mean_level"], _group_rate_compute(sums, counts).tolist()))
        comps["level_gap"] = float(_group_gap_compute(sums, counts))
        return comps

    def _state_vector(self) -> np.ndarray:
        feats = [f for a in self.possible_agents for f in self._features(a)]
        hist = (self._hist / self._group_counts_f[:, None]).ravel()
        vec = np.concatenate([hist, self._rates, [self._intensity, self._t / self.max_cycles], feats])
        return np.minimum(np.maximum(vec, 0.0), 1.0).astype(np.float32)

    def state(self) -> np.ndarray:
        """Global state: the common observation part, then every agent's own terms, ``float32`` in [0, 1]."""
        if self._level is None:
            raise RuntimeError("call reset() before state().")
        return self._state_vector()

    def render(self) -> str | None:
        if self.render_mode is None:
            logger.warning("render() called without a render_mode; pass render_mode='ansi' or 'human'.")
            return None
        if self._level is None:
            text = f"{self.metadata['name']}: not reset"
        else:
            means = self._hist @ np.arange(self.num_levels) / self._group_counts
            parts = [
                f"{g}: mean level {m:.2f}, {self.decision_name} rate {r:.2f}"
                for g, m, r in zip(self.groups, means, self._rates)
            ]
            text = f"{self.metadata['name']} t={self._t}/{self.max_cycles} | " + " | ".join(parts)
        if self.render_mode == "ansi":
            return text
        sys.stdout.write(text + "\n")
        return None

    def close(self) -> None:
        pass
