"""Batched entry to the MAFE-style environments: ``num_envs`` copies (many seeds at once) stepped together.

Like Gymnasium's ``VectorEnv`` for a multi-agent environment: observations, actions, rewards and components
carry a leading ``num_envs`` axis, and every copy runs the dynamics of the wrapped environment in one set of
numpy calls. Copy ``i`` reset with seed ``s`` follows exactly the episode of ``parallel_env`` reset with seed
``s`` under the same actions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from gymnasium.vector.utils import batch_space

from hf_ext._registry import paper
from hf_ext._validation import check_int
from hf_ext.mafe.core import Batch, fairness_dicts
from hf_ext.mafe.env_base import MAFEParallelEnv


class MAFEVectorEnv:
    """``num_envs`` lock-step copies of a MAFE-style environment, for training on many seeds at once.

    All copies share the wrapped environment's settings and episode length: they start with :meth:`reset`
    and truncate together after ``max_cycles`` steps (then call :meth:`reset` again).

    Args:
        env: The MAFE-style ``ParallelEnv`` whose settings and dynamics the copies use (it is not stepped).
        num_envs: Number of copies ``B`` (>= 1).

    Returned by :meth:`step` (``B`` = ``num_envs``): ``obs[agent]`` ``(B, d)`` float32, ``rewards[agent]``
    ``(B,)``, ``terminations``/``truncations[agent]`` ``(B,)`` bool, and ``infos[agent]`` with
    ``"reward_components"`` and ``"fairness_components"`` (each key -> ``(B,)``) and ``"empty_groups"``
    (``(B, G)`` bool: the groups with no sampled member in that copy).

    Examples:
        >>> import numpy as np
        >>> from hf_ext.mafe import loan_mafe_v0
        >>> venv = loan_mafe_v0.vector_env(num_envs=4, max_cycles=3)
        >>> obs, infos = venv.reset(seed=0)  # copies seeded 0, 1, 2, 3
        >>> obs["bank_0"].shape
        (4, 19)
        >>> actions = {a: np.full(4, 3) for a in venv.agents}
        >>> obs, rew, term, trunc, infos = venv.step(actions)
        >>> rew["bank_0"].shape, infos["bank_0"]["fairness_components"]["dp_gap"].shape
        ((4,), (4,))
    """

    _paper = paper("mafe")

    def __init__(self, env: MAFEParallelEnv, num_envs: int) -> None:
        if not isinstance(env, MAFEParallelEnv):
            raise TypeError(f"`env` must be a MAFE-style ParallelEnv, got {type(env).__name__}.")
        self.env = env
        self.num_envs = check_int("num_envs", num_envs, low=1)
        self.possible_agents = list(env.possible_agents)
        self.agents: list[str] = []
        self.metadata = dict(env.metadata)
        self._batch: Batch | None = None

    @property
    def unwrapped(self) -> MAFEParallelEnv:
        """The environment whose dynamics the copies run."""
        return self.env

    def single_observation_space(self, agent: str) -> spaces.Box:
        """The observation space of one copy."""
        return self.env.observation_space(agent)

    def single_action_space(self, agent: str) -> spaces.Space:
        """The action space of one copy."""
        return self.env.action_space(agent)

    def observation_space(self, agent: str) -> spaces.Space:
        """The batched observation space ``(num_envs, d)``."""
        return batch_space(self.env.observation_space(agent), self.num_envs)

    def action_space(self, agent: str) -> spaces.Space:
        """The batched action space (``MultiDiscrete`` of shape ``(num_envs,)`` or ``(num_envs, G)``)."""
        return batch_space(self.env.action_space(agent), self.num_envs)

    def reset(
        self, seed: int | Sequence[int] | None = None, options: dict | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
        """Start ``num_envs`` episodes; ``seed``: one int (copies get ``seed, seed + 1, ...``), one seed per
        copy, or ``None``."""
        if seed is None or isinstance(seed, int | np.integer):
            seeds: list[int | None] = (
                [None] * self.num_envs if seed is None else [int(seed) + i for i in range(self.num_envs)]
            )
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"`seed` must hold {self.num_envs} seeds (one per copy), got {len(seeds)}.")
        self._batch = self.env.new_batch([seeding.np_random(s)[0] for s in seeds])
        self.agents = list(self.possible_agents)
        means, gap = self.env.level_components(self._batch)
        comps = dict(zip(self.env._keys["mean_level"], means.T))
        comps["level_gap"] = gap
        infos = {a: {"reward_components": {}, "fairness_components": dict(comps)} for a in self.agents}
        return self._observations(), infos

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Step every copy; ``actions[agent]``: ``(num_envs,)`` (or ``(num_envs, G)`` per-group) integers."""
        if not self.agents or self._batch is None:
            raise RuntimeError("call reset() before step(): the episodes have not started or are over.")
        if set(actions) != set(self.agents):
            raise ValueError(
                f"`actions` must hold one array per agent {self.agents}, got keys {sorted(actions)}."
            )
        tr = self.env.advance(self._batch, {a: self._parse(a, actions[a]) for a in self.agents})
        common, own = fairness_dicts(self.env._keys, tr.owners, tr.means.transpose(1, 2, 0), tr.gaps.T)
        empty = tr.counts[:, 0] == 0
        rewards, infos = {}, {}
        for a in self.agents:
            comps = tr.components[a]
            rewards[a] = sum(comps.values())
            fair = {**common, **own[a]} if a in own else dict(common)
            infos[a] = {"reward_components": comps, "fairness_components": fair, "empty_groups": empty}
        done = self._batch.t >= self.env.max_cycles
        terms = {a: np.zeros(self.num_envs, dtype=bool) for a in self.agents}
        truncs = {a: np.full(self.num_envs, done) for a in self.agents}
        obs = self._observations()
        if done:
            self.agents = []
        return obs, rewards, terms, truncs, infos

    def state(self) -> np.ndarray:
        """``(num_envs, D)`` global states."""
        if self._batch is None:
            raise RuntimeError("call reset() before state().")
        return self.env.observe(self._batch)

    def close(self) -> None:
        self.env.close()

    def _observations(self) -> dict[str, np.ndarray]:
        state = self.env.observe(self._batch)  # type: ignore[arg-type]
        return {a: state[:, self.env._obs_index[a]] for a in self.possible_agents}

    def _parse(self, agent: str, action: Any) -> np.ndarray:
        space = self.env.action_space(agent)
        arr = np.asarray(action)
        nvec = space.nvec if isinstance(space, spaces.MultiDiscrete) else np.asarray(space.n)  # type: ignore[attr-defined]
        shape = (self.num_envs, *np.shape(nvec))
        if arr.shape != shape or arr.dtype.kind not in "iu" or (arr < 0).any() or (arr >= nvec).any():
            raise ValueError(
                f"actions of agent {agent!r} must be integers of shape {shape} in its action space {space}, "
                f"got shape {arr.shape} dtype {arr.dtype}."
            )
        return arr.astype(np.int64)
