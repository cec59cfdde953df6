"""Base class of the MAFE-style PettingZoo ``ParallelEnv`` classes: spaces, seeding, the step loop and the
reward/fairness components in ``infos``.

The dynamics run on a :class:`~hf_ext.mafe.core.Batch` of environment copies, so one implementation
serves this ``ParallelEnv`` (one copy) and :class:`~hf_ext.mafe.vector.MAFEVectorEnv` (many seeds at
once); each environment's ``_simulate`` is vectorised over copies, agents and individuals.

**[reconstructed]** The observation layout, component keys and the regulator agent are hf-ext choices in the
formalism of the paper's Fair Dec-POMDP (see :mod:`hf_ext.mafe.core`).
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from pettingzoo import ParallelEnv

from hf_ext._registry import paper
from hf_ext._validation import check_bool, check_choice, check_float, check_int, check_sequence
from hf_ext.mafe.core import (
    INTENSITIES,
    REGULATOR,
    Batch,
    Sample,
    StepOutcome,
    draw_levels,
    draw_step,
    fairness_dicts,
    fairness_stats,
    update_histograms,
)
from hf_ext.metrics.functional.fairness import _group_gap_compute, _group_rate_compute

logger = logging.getLogger(__name__)


class Transition(NamedTuple):
    """One step of a batch: raw arrays that :class:`MAFEParallelEnv` and the vector env turn into dicts."""

    components: dict[str, dict[str, np.ndarray]]  # agent -> component -> (B,)
    owners: list[str | None]
    means: np.ndarray  # (B, 2S+1, G)
    counts: np.ndarray  # (B, 2S+1, G)
    gaps: np.ndarray  # (B, 2S+1)


class MAFEParallelEnv(ParallelEnv):
    """Base class of the MAFE-style PettingZoo ``ParallelEnv`` classes.

    Subclasses define :meth:`_agent_table` (agent -> (action space, number of own features)),
    :meth:`_simulate` (one step of dynamics over a batch of copies), :meth:`_reset_batch` (their own state and
    observation terms) and :meth:`_myopic_values` (for :class:`~hf_ext.mafe.policies.ProfitGreedy`).

    Observation of every agent: ``Box(0, 1, (d,), float32)`` = ``[per-group level histograms (G*K), last
    per-group rates (G), intervention intensity (1), t/max_cycles (1), agent-specific terms]``. The state is
    the common part followed by every agent's terms.

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
    config_cls: type[Any] = object
    decision_name = "decision"
    deciders: list[str]  # agents whose action is a threshold on levels (banks, hospitals, ...)
    n_uniform = 1  # uniform draws per sampled individual per step
    n_normal = 0  # standard-normal draws per sampled individual per step
    _paper = paper("mafe")

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
        names: list[Any] = check_sequence("groups", groups, min_length=2)
        groups = tuple(str(x) for x in names)
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
        self.max_cycles = check_int("max_cycles", max_cycles, low=1)
        self.population_size = check_int("population_size", population_size, low=2)
        self.n_per_step = check_int(
            "n_per_step", n_per_step, low=1, high=population_size, hint="At most `population_size`."
        )
        self.intervention = check_choice("intervention", intervention, self.interventions)
        self.group_thresholds = check_bool("group_thresholds", group_thresholds)
        self.render_mode = check_choice("render_mode", render_mode, (*self.metadata["render_modes"], None))
        self.config: Any = self.config_cls() if config is None else config
        if not isinstance(self.config, self.config_cls):
            raise TypeError(f"`config` must be a {self.config_cls.__name__}, got {type(config).__name__}.")
        self.groups, self.group_shares = groups, shares
        self.num_groups, self.num_levels = len(groups), self.config.num_levels
        self.disadvantaged = self.config.disadvantaged_group(self.num_groups)
        counts = np.floor(shares * population_size).astype(np.int64)
        counts[np.argsort(-(shares * population_size - counts))[: population_size - counts.sum()]] += 1
        self._group = np.repeat(np.arange(self.num_groups), counts)
        self._group_counts = counts.astype(np.float64)
        self._hist_scale = (1.0 / np.maximum(self._group_counts, 1.0))[:, None]  # histogram -> shares
        self._probs = self.config.level_probs(self.num_groups)[self._group]  # (N, K)
        self._levels_f = np.arange(self.num_levels, dtype=np.float64)
        table = self._agent_table()
        self.possible_agents = list(table)
        self._act_spaces = {a: s for a, (s, _) in table.items()}
        n_features = {a: n for a, (_, n) in table.items()}
        g, k = self.num_groups, self.num_levels
        self._common_dim = g * k + g + 2
        self._obs_spaces = {
            a: spaces.Box(0.0, 1.0, (self._common_dim + n,), np.float32) for a, n in n_features.items()
        }
        self._n_feats = sum(n_features.values())
        self.state_space = spaces.Box(0.0, 1.0, (self._common_dim + self._n_feats,), np.float32)
        offsets = np.cumsum([0, *n_features.values()]) + self._common_dim
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
        self._batch: Batch | None = None
        self.agents: list[str] = []

    # ----- spaces ---------------------------------------------------------------------------------
    def observation_space(self, agent: str) -> spaces.Box:
        """The agent's observation space (built once in ``__init__``: the same object on every call)."""
        return self._obs_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        """The agent's action space (built once in ``__init__``: the same object on every call)."""
        return self._act_spaces[agent]

    def info_space(self, agent: str) -> spaces.Dict:
        """Typed form of ``infos[agent]``, as :class:`~hf_ext.mafe.wrappers.FlatInfos` returns it.

        One ``Box((), float32)`` per ``"reward_components/<key>"`` and ``"fairness_components/<key>"`` of the
        agent (the keys of a step; the global fairness keys first, then the agent's ``own/...`` keys) and
        ``"empty_groups"`` as ``MultiBinary(G)``. The same object on every call.
        """
        return self._info_spaces[agent]

    @functools.cached_property
    def _info_spaces(self) -> dict[str, spaces.Dict]:
        # The keys are read from one step of a throwaway copy with its own generator, so that they always
        # match what ``step`` emits; the episode's generator is untouched.
        batch = self.new_batch([np.random.default_rng(0)])
        acts = {a: np.zeros((1, *(s.shape or ())), np.int64) for a, s in self._act_spaces.items()}
        tr = self.advance(batch, acts)
        common, own = fairness_dicts(self._keys, tr.owners, tr.means[0].tolist(), tr.gaps[0].tolist())
        out = {}
        for a in self.possible_agents:
            keys = [f"reward_components/{k}" for k in tr.components[a]]
            keys += [f"fairness_components/{k}" for k in (*common, *own.get(a, {}))]
            fields: dict[str, spaces.Space] = {k: spaces.Box(-np.inf, np.inf, (), np.float32) for k in keys}
            fields["empty_groups"] = spaces.MultiBinary(self.num_groups)
            out[a] = spaces.Dict(fields)
        return out

    def threshold_space(self, n: int) -> spaces.Discrete | spaces.MultiDiscrete:
        """``Discrete(n)`` or, with ``group_thresholds=True``, ``MultiDiscrete([n] * G)``."""
        return spaces.MultiDiscrete([n] * self.num_groups) if self.group_thresholds else spaces.Discrete(n)

    # ----- subclass hooks -------------------------------------------------------------------------
    def _agent_table(self) -> dict[str, tuple[spaces.Space, int]]:
        raise NotImplementedError

    def _reset_batch(self, batch: Batch) -> None:
        """Set ``batch.feats`` (the agents' own observation terms) and ``batch.extra`` after a reset."""
        raise NotImplementedError

    def _simulate(
        self, batch: Batch, s: Sample, acts: dict[str, np.ndarray], u: np.ndarray, z: np.ndarray
    ) -> StepOutcome:
        """One step of every copy: write the sampled individuals' new levels and ``batch.feats``.

        Args:
            batch: The copies; ``batch.intensity`` already holds this step's intervention intensity.
            s: The sampled individuals.
            acts: agent -> ``(B,)`` (or ``(B, G)`` per-group) integer actions.
            u, z: ``(n_uniform, B, n)`` uniforms and ``(n_normal, B, n)`` standard normals.
        """
        raise NotImplementedError

    def _myopic_values(self, obs: np.ndarray, agent: str) -> np.ndarray:
        raise NotImplementedError

    # ----- helpers for the subclasses and the scripted policies ----------------------------------
    def myopic_values(self, obs: np.ndarray, agent: str) -> np.ndarray:
        """Expected one-step reward of each action of ``agent`` given its observation (for ``ProfitGreedy``).

        ``obs`` is one observation ``(d,)`` or a batch ``(..., d)``. Shape of the result: ``(..., n_actions)``
        for ``Discrete`` agents, ``(..., G, n)`` per-group values for ``MultiDiscrete`` ones. The regulator's
        myopic best is no intervention (any intensity costs money): values ``-intensity``.
        """
        obs = np.asarray(obs, dtype=np.float64)
        if agent == REGULATOR:
            return np.broadcast_to(-INTENSITIES, (*obs.shape[:-1], len(INTENSITIES))).copy()
        return self._myopic_values(obs, agent)

    def decode_obs(self, obs: np.ndarray) -> dict[str, np.ndarray]:
        """Split observations ``(..., d)`` into ``hist (..., G, K)``, ``rates (..., G)``, ``intensity (...)``,
        ``time (...)`` and ``own (..., d_own)``."""
        g, k = self.num_groups, self.num_levels
        obs = np.asarray(obs)
        return {
            "hist": obs[..., : g * k].reshape(*obs.shape[:-1], g, k),
            "rates": obs[..., g * k : g * k + g],
            "intensity": obs[..., g * k + g],
            "time": obs[..., g * k + g + 1],
            "own": obs[..., self._common_dim :],
        }

    def fairness_keys(self) -> list[str]:
        """The global ``fairness_components`` keys of a step (the ``own/...`` keys are per agent)."""
        k = self._keys
        return [*k["mean_level"], "level_gap", *k["rate"], *k["tpr"], "dp_gap", "eo_gap"]

    def tail_values(self, value: np.ndarray) -> np.ndarray:
        """Value of each threshold ``tau = 0..K`` from per-level values ``(..., G, K)``: the sum over levels
        ``>= tau``, per group ``(..., G, K + 1)`` or summed over groups ``(..., K + 1)``."""
        tail = np.cumsum(value[..., ::-1], axis=-1)[..., ::-1]
        tail = np.concatenate([tail, np.zeros((*value.shape[:-1], 1))], axis=-1)
        return tail if self.group_thresholds else tail.sum(-2)

    def level_change(self, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        """``(B,)`` mean level change of the sampled individuals ``(B, n)``, > 0 when they fare better."""
        sign = 1.0 if self.config._higher_level_is_better else -1.0
        return (sign / before.shape[1]) * (after - before).sum(1)

    # ----- batched driver (shared with the vector env) --------------------------------------------
    def new_batch(self, rngs: list[np.random.Generator]) -> Batch:
        """Draw a fresh population for each generator: the start of ``len(rngs)`` episodes."""
        b, g, k = len(rngs), self.num_groups, self.num_levels
        level = draw_levels(rngs, self._probs)
        key = (np.arange(b)[:, None] * g + self._group) * k + level
        hist = np.bincount(key.ravel(), minlength=b * g * k).reshape(b, g, k)
        batch = Batch(rngs, level, hist, np.zeros((b, g)), np.zeros(b), np.zeros((b, self._n_feats)))
        self._reset_batch(batch)
        return batch

    def advance(self, batch: Batch, acts: dict[str, np.ndarray]) -> Transition:
        """One step of every copy of ``batch`` under the (already validated) integer actions ``acts``."""
        b = len(batch.rngs)
        if self.intervention is None:
            batch.intensity = np.zeros(b)
        else:
            batch.intensity = INTENSITIES[acts[REGULATOR]]
        idx, u, z = draw_step(
            batch.rngs, self.population_size, self.n_per_step, self.n_uniform, self.n_normal
        )
        rows = np.arange(b)[:, None]
        before = batch.level[rows, idx]
        grp = self._group[idx]
        out = self._simulate(batch, Sample(idx, rows, grp, before, grp == self.disadvantaged), acts, u, z)
        update_histograms(batch.hist, out.groups, before, batch.level[rows, idx])
        batch.t += 1
        level_sums = batch.hist @ self._levels_f
        group_counts = np.repeat(self._group_counts[None], b, 0)
        owners, means, counts, gaps = fairness_stats(out, level_sums, group_counts)
        batch.rates = means[:, 0]
        return Transition(out.reward_components, owners, means, counts, gaps)

    def observe(self, batch: Batch) -> np.ndarray:
        """``(B, D)`` states: the common observation part, then every agent's own terms, in ``[0, 1]``."""
        b, g, k = batch.hist.shape
        vec = np.empty((b, self._common_dim + self._n_feats))
        vec[:, : g * k] = (batch.hist * self._hist_scale).reshape(b, -1)
        vec[:, g * k : g * k + g] = batch.rates
        vec[:, g * k + g] = batch.intensity
        vec[:, g * k + g + 1] = batch.t / self.max_cycles
        vec[:, self._common_dim :] = batch.feats
        return np.minimum(np.maximum(vec, 0.0), 1.0).astype(np.float32)

    def level_components(self, batch: Batch) -> tuple[np.ndarray, np.ndarray]:
        """``(B, G)`` mean level per group and ``(B,)`` level gap of the whole population."""
        sums = batch.hist @ self._levels_f
        counts = np.broadcast_to(self._group_counts, sums.shape)
        return _group_rate_compute(sums, counts), _group_gap_compute(sums, counts)

    # ----- PettingZoo API -------------------------------------------------------------------------
    @property
    def np_random(self) -> np.random.Generator:
        if self._np_random is None:
            self._np_random, _ = seeding.np_random(None)
        return self._np_random

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        if seed is not None or self._np_random is None:
            self._np_random, _ = seeding.np_random(seed)
        self._batch = self.new_batch([self._np_random])
        self.agents = list(self.possible_agents)
        self._agent_set = set(self.agents)
        state = self.observe(self._batch)[0]
        obs = {a: state[self._obs_index[a]] for a in self.agents}
        means, gap = self.level_components(self._batch)
        comps = dict(zip(self._keys["mean_level"], means[0].tolist()))
        comps["level_gap"] = float(gap[0])
        infos = {
            a: {"reward_components": {}, "fairness_components": dict(comps), "empty_groups": []}
            for a in self.agents
        }
        return obs, infos

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        if not self.agents or self._batch is None:
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
        acts = {a: self._parse_action(a, act)[None] for a, act in actions.items()}
        tr = self.advance(self._batch, acts)
        common, own = fairness_dicts(self._keys, tr.owners, tr.means[0].tolist(), tr.gaps[0].tolist())
        empty = [self.groups[i] for i in np.flatnonzero(tr.counts[0, 0] == 0)]
        truncated = self._batch.t >= self.max_cycles
        state = self.observe(self._batch)[0]
        obs, rewards, infos = {}, {}, {}
        for a in self.agents:
            comps = {k: float(v[0]) for k, v in tr.components[a].items()}
            fair = {**common, **own[a]} if a in own else dict(common)
            infos[a] = {"reward_components": comps, "fairness_components": fair, "empty_groups": list(empty)}
            rewards[a] = float(sum(comps.values()))
            obs[a] = state[self._obs_index[a]]
        terms = dict.fromkeys(self.agents, False)
        truncs = dict.fromkeys(self.agents, truncated)
        if truncated:
            self.agents = []
            self._agent_set = set()
        return obs, rewards, terms, truncs, infos

    def _parse_action(self, agent: str, action: Any) -> np.ndarray:
        space = self._act_spaces[agent]
        if isinstance(space, spaces.Discrete):
            try:
                a = int(action)
                ok = a == action and 0 <= a < int(space.n)
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise ValueError(f"action {action!r} of agent {agent!r} is not in its action space {space}.")
            return np.asarray(a)
        arr = np.asarray(action)
        nvec = space.nvec  # type: ignore[attr-defined]
        if arr.shape != space.shape or arr.dtype.kind not in "iu" or (arr < 0).any() or (arr >= nvec).any():
            raise ValueError(f"action {action!r} of agent {agent!r} is not in its action space {space}.")
        return arr.astype(np.int64)

    def state(self) -> np.ndarray:
        """Global state: the common observation part, then every agent's own terms, ``float32`` in [0, 1]."""
        if self._batch is None:
            raise RuntimeError("call reset() before state().")
        return self.observe(self._batch)[0]

    def render(self) -> str | None:
        if self.render_mode is None:
            logger.warning("render() called without a render_mode; pass render_mode='ansi' or 'human'.")
            return None
        if self._batch is None:
            text = f"{self.metadata['name']}: not reset"
        else:
            means, _ = self.level_components(self._batch)
            parts = [
                f"{g}: mean level {m:.2f}, {self.decision_name} rate {r:.2f}"
                for g, m, r in zip(self.groups, means[0], self._batch.rates[0])
            ]
            text = f"{self.metadata['name']} t={self._batch.t}/{self.max_cycles} | " + " | ".join(parts)
        if self.render_mode == "ansi":
            return text
        sys.stdout.write(text + "\n")
        return None

    def close(self) -> None:
        pass
