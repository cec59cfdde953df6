"""Wrappers for the MAFE-style environments: fairness-penalised scalar rewards, constraint costs,
component logging, typed flat infos and ``Discrete`` joint actions (all
``pettingzoo.utils.BaseParallelWrapper``) and a single-agent Gymnasium view.

``FlatInfos`` and ``DiscreteActions`` are what MARL libraries need: torchrl's ``PettingZooWrapper`` turns
every info value into a tensor (nested dicts and lists of names fail), and SuperSuit's padding wrappers
homogenise only ``Discrete`` or only ``Box`` spaces (per-group thresholds are ``MultiDiscrete``, the regulator
``Discrete``).

**[reconstructed]** The scalarisation ``r = sum_k w_k c^R_k + alpha * sum_j rate_j - beta * sum_m pen_m`` and
the constraint cost ``sum_m max(0, c_m - limit_m)`` are hf-ext's concrete forms of the paper's
"direct rewards + rate-based terms - fairness penalties".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium
import numpy as np
from pettingzoo.utils import BaseParallelWrapper

from hf_ext._registry import paper
from hf_ext.mafe.policies import Policy, bind_all


def _lookup(components: Mapping[str, float], key: str, what: str) -> float:
    try:
        return components[key]
    except KeyError:
        raise KeyError(
            f"{what} key {key!r} is not in the components; available: {sorted(components)}."
        ) from None


class ScalarizeFairness(BaseParallelWrapper):
    """Replace each reward by ``sum_k w_k c^R_k + alpha * sum_j rate_j - beta * sum_m pen_m``.

    Args:
        env: A MAFE-style ParallelEnv.
        alpha: Weight of the rate terms.
        beta: Weight of the penalty terms.
        penalty_keys: Fairness keys penalised (e.g. ``("dp_gap",)``).
        rate_keys: Fairness keys rewarded with ``alpha`` (``None``: every ``rate/<g>``).
        reward_weights: component -> weight (``None``: 1 for every component, i.e. the env's reward).
        shared: ``True`` gives every agent the team reward: the sum over agents of their weighted components
            plus the fairness terms once (they are global). ``False``: each agent's own components plus the
            fairness terms of its own ``fairness_components``.

    Raises:
        KeyError: at the first step, when a key is absent from the fairness components (the message lists
            them).

    Examples:
        >>> from hf_ext.mafe import loan_mafe_v0
        >>> base = loan_mafe_v0.parallel_env(max_cycles=2)
        >>> env = ScalarizeFairness(base, beta=5.0, penalty_keys=("dp_gap",))
        >>> _ = env.reset(seed=0)
        >>> _, rew, *_ = env.step({"bank_0": 3, "bank_1": 3, "regulator_0": 0})
        >>> isinstance(rew["bank_0"], float)
        True
    """

    _paper = paper("mafe")

    def __init__(
        self,
        env: Any,
        alpha: float = 0.0,
        beta: float = 1.0,
        penalty_keys: Sequence[str] = ("dp_gap",),
        rate_keys: Sequence[str] | None = None,
        reward_weights: Mapping[str, float] | None = None,
        shared: bool = False,
    ) -> None:
        super().__init__(env)
        self.alpha, self.beta, self.shared = float(alpha), float(beta), bool(shared)
        self.penalty_keys = tuple(penalty_keys)
        self.rate_keys = None if rate_keys is None else tuple(rate_keys)
        self.reward_weights = None if reward_weights is None else dict(reward_weights)

    def _fair_term(self, fair: Mapping[str, float]) -> float:
        rate_keys = (
            self.rate_keys if self.rate_keys is not None else [k for k in fair if k.startswith("rate/")]
        )
        rate = sum(_lookup(fair, k, "rate") for k in rate_keys) if self.alpha else 0.0
        pen = sum(_lookup(fair, k, "penalty") for k in self.penalty_keys)
        return self.alpha * rate - self.beta * pen

    def _weighted(self, comps: Mapping[str, float]) -> float:
        if self.reward_weights is None:
            return float(sum(comps.values()))
        return float(sum(self.reward_weights.get(k, 0.0) * v for k, v in comps.items()))

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        obs, _, terms, truncs, infos = self.env.step(actions)
        own = {a: self._weighted(i["reward_components"]) for a, i in infos.items()}
        if self.shared:
            fair = self._fair_term(next(iter(infos.values()))["fairness_components"]) if infos else 0.0
            team = float(sum(own.values()) + fair)
            rewards = {a: team for a in infos}
        else:
            rewards = {a: float(own[a] + self._fair_term(i["fairness_components"])) for a, i in infos.items()}
        return obs, rewards, terms, truncs, infos


class FairnessConstraint(BaseParallelWrapper):
    """Add ``infos[agent]["cost"] = sum_m max(0, c_m - limit_m)`` over the fairness ``limits``; rewards
    unchanged.

    For constrained (Lagrangian, CMDP) learners.

    Args:
        env: A MAFE-style ParallelEnv.
        limits: fairness key -> upper limit, e.g. ``{"dp_gap": 0.1}``.
    """

    _paper = paper("mafe")

    def __init__(self, env: Any, limits: Mapping[str, float]) -> None:
        super().__init__(env)
        if not limits:
            raise ValueError("`limits` must name at least one fairness key, e.g. {'dp_gap': 0.1}.")
        self.limits = {str(k): float(v) for k, v in limits.items()}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        for info in infos.values():
            fair = info["fairness_components"]
            info["cost"] = float(sum(max(0.0, _lookup(fair, k, "limit") - v) for k, v in self.limits.items()))
        return obs, rewards, terms, truncs, infos


class ComponentLogger(BaseParallelWrapper):
    """Record every step's reward and fairness components of the current episode.

    Attributes:
        log: One dict per step: ``"<agent>/<component>"`` -> value plus the global fairness keys.
    """

    _paper = paper("mafe")

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.log: list[dict[str, float]] = []

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.log = []
        return self.env.reset(seed=seed, options=options)

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        out = self.env.step(actions)
        infos = out[4]
        row = {f"{a}/{k}": v for a, i in infos.items() for k, v in i["reward_components"].items()}
        if infos:
            fair = next(iter(infos.values()))["fairness_components"]
            row.update({k: v for k, v in fair.items() if not k.startswith("own/")})
        self.log.append(row)
        return out

    def series(self, key: str) -> np.ndarray:
        """``(T,)`` values of ``key`` over the episode so far."""
        if self.log and key not in self.log[-1]:
            raise KeyError(f"key {key!r} is not logged; available: {sorted(self.log[-1])}.")
        return np.array([r[key] for r in self.log])


class FlatInfos(BaseParallelWrapper):
    """Typed, flat infos: each ``infos[agent]`` is a member of ``info_space(agent)``, with the same keys at
    reset and at every step.

    ``{"reward_components": {"interest": x}, "fairness_components": {"dp_gap": y}, "empty_groups": ["B"]}``
    becomes ``{"reward_components/interest": float32(x), "fairness_components/dp_gap": float32(y),
    "empty_groups": int8 [0, 1]}``; a key the env did not emit this step (every reward component and the
    per-step rates at reset) is ``0.0``. Apply it last, after the wrappers that read the nested components.

    Args:
        env: A MAFE-style ParallelEnv (possibly wrapped).

    Examples:
        >>> from hf_ext.mafe import loan_mafe_v0
        >>> env = FlatInfos(loan_mafe_v0.parallel_env(max_cycles=2))
        >>> _, infos = env.reset(seed=0)
        >>> env.info_space("bank_0").contains(infos["bank_0"])
        True
        >>> infos["bank_0"]["reward_components/interest"]
        np.float32(0.0)
    """

    _paper = paper("mafe")

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        base = env.unwrapped
        self._spaces = {a: base.info_space(a) for a in base.possible_agents}
        self._groups = list(base.groups)

    def info_space(self, agent: str) -> gymnasium.spaces.Dict:
        """The ``gymnasium.spaces.Dict`` of ``agent``'s infos (see the env's ``info_space``)."""
        return self._spaces[agent]

    def _flatten(self, agent: str, info: Mapping[str, Any]) -> dict[str, Any]:
        values = {
            f"{part}/{k}": v
            for part in ("reward_components", "fairness_components")
            for k, v in info[part].items()
        }
        out: dict[str, Any] = {}
        for key in self._spaces[agent]:
            if key == "empty_groups":
                out[key] = np.array([g in info["empty_groups"] for g in self._groups], dtype=np.int8)
            else:
                out[key] = np.float32(values.get(key, 0.0))
        return out

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        obs, infos = self.env.reset(seed=seed, options=options)
        return obs, {a: self._flatten(a, i) for a, i in infos.items()}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        return obs, rewards, terms, truncs, {a: self._flatten(a, i) for a, i in infos.items()}


class DiscreteActions(BaseParallelWrapper):
    """Each ``MultiDiscrete(nvec)`` action space (per-group thresholds) as one ``Discrete(prod(nvec))`` joint
    index; ``Discrete`` agents are unchanged.

    The index is the row-major position of the per-group actions (``numpy.ravel_multi_index``, the last group
    varying fastest), so every agent has a ``Discrete`` space, as SuperSuit's ``pad_action_space_v0`` and
    many single-space learners require. The joint space grows as ``(K + 1) ** G``: 64 indices for two groups.

    Args:
        env: A MAFE-style ParallelEnv (possibly wrapped).

    Examples:
        >>> from hf_ext.mafe import loan_mafe_v0
        >>> env = DiscreteActions(loan_mafe_v0.parallel_env(group_thresholds=True, max_cycles=2))
        >>> env.action_space("bank_0"), env.action_space("regulator_0")
        (Discrete(64), Discrete(5))
        >>> env.decode_action("bank_0", 11)
        array([1, 3])
    """

    _paper = paper("mafe")

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self._nvec: dict[str, np.ndarray] = {}
        self._spaces: dict[str, gymnasium.spaces.Space] = {}
        for a in env.possible_agents:
            space = env.action_space(a)
            if isinstance(space, gymnasium.spaces.MultiDiscrete):
                self._nvec[a] = np.asarray(space.nvec, dtype=np.int64)
                self._spaces[a] = gymnasium.spaces.Discrete(int(np.prod(space.nvec)))
            else:
                self._spaces[a] = space

    def action_space(self, agent: str) -> gymnasium.spaces.Space:
        """``Discrete(prod(nvec))`` for a ``MultiDiscrete`` agent, else the env's own space (same object
        on every call)."""
        return self._spaces[agent]

    def decode_action(self, agent: str, action: Any) -> Any:
        """The env's action of ``agent`` for the joint index ``action`` (``Discrete`` agents: unchanged)."""
        if agent not in self._nvec:
            return action
        space = self._spaces[agent]
        try:
            index = int(action)
            ok = index == action and space.contains(index)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ValueError(f"action {action!r} of agent {agent!r} is not in its action space {space}.")
        return np.array(np.unravel_index(index, tuple(self._nvec[agent])), dtype=np.int64)

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        return self.env.step({a: self.decode_action(a, act) for a, act in actions.items()})


class SingleAgentView(gymnasium.Env):
    """A ``gymnasium.Env`` controlling one agent of a ParallelEnv while the others follow scripted policies.

    Args:
        env: A MAFE-style ParallelEnv.
        agent: The controlled agent.
        others: One policy ``policy(obs, agent)`` per other agent (bound to ``env`` if it has ``bind``).

    Examples:
        >>> from hf_ext.mafe import loan_mafe_v0
        >>> from hf_ext.mafe.policies import ProfitGreedy, FixedIntervention
        >>> g = SingleAgentView(loan_mafe_v0.parallel_env(max_cycles=3), "bank_0",
        ...                     {"bank_1": ProfitGreedy(), "regulator_0": FixedIntervention(0)})
        >>> obs, info = g.reset(seed=0)
        >>> obs, r, terminated, truncated, info = g.step(3)
        >>> sorted(info["reward_components"])
        ['default_loss', 'interest', 'subsidy']
    """

    _paper = paper("mafe")

    def __init__(self, env: Any, agent: str, others: Mapping[str, Policy]) -> None:
        agents = list(env.possible_agents)
        if agent not in agents:
            raise ValueError(f"`agent` {agent!r} is not an agent of the environment {agents}.")
        missing = [a for a in agents if a != agent and a not in others]
        extra = [a for a in others if a not in agents or a == agent]
        if missing or extra:
            raise ValueError(
                f"`others` must hold one policy per other agent; missing {missing}, unexpected {extra}."
            )
        self.env, self.agent = env, agent
        self.others = bind_all(others, env)
        self.observation_space = env.observation_space(agent)
        self.action_space = env.action_space(agent)
        self.metadata = {"render_modes": list(env.metadata.get("render_modes", []))}
        self.render_mode = getattr(env.unwrapped, "render_mode", None)
        self._obs: dict[str, np.ndarray] = {}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._obs, infos = self.env.reset(seed=seed, options=options)
        return self._obs[self.agent], infos[self.agent]

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        actions = {a: p(self._obs[a], a) for a, p in self.others.items()}
        actions[self.agent] = action
        self._obs, rewards, terms, truncs, infos = self.env.step(actions)
        a = self.agent
        return self._obs[a], rewards[a], bool(terms[a]), bool(truncs[a]), infos[a]

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()
