"""F-MACEM: Fair Multi-Agent Cross-Entropy Method over per-agent policy parameters.

**[paper]** CEM over per-agent policy parameters maximising "direct rewards + rate-based terms - fairness
penalties" in a cooperative (team) objective. **[reconstructed]** everything concrete below: the policy
classes, the noisy-CEM schedule (Szita & Lorincz 2006), common random numbers, and the objective's scaling.

Objective of a joint candidate ``theta`` (per-step average, so ``alpha``/``beta`` do not scale with the
horizon)::

    J(theta) = 1/E sum_e [1/T sum_t (sum_n sum_k w_k c^R_{n,k,t} + alpha * sum_j rate_{j,t}) - beta * pen_e]

with ``pen_e`` = the mean over steps (``penalty_reduce="mean"``) or the final value (``"final"``) of the
summed penalty keys. Global fairness components are identical for every agent and are counted once (summing
them over agents would only rescale ``alpha``/``beta`` by ``N``). ``objective="per_agent"`` (an hf-ext
extension for mixed-motive studies, **not in the paper**) ranks each agent's elites by its own
``J_n`` = its own weighted rewards + the same fairness terms.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from hf_ext._registry import paper
from hf_ext.marl.mafe.policies import Policy, bind_all, run_episode

logger = logging.getLogger(__name__)

HIDDEN = 16


def cem_optimize(
    objective: Callable[[np.ndarray, int], np.ndarray],
    dim: int,
    *,
    population: int = 32,
    elite_frac: float = 0.2,
    smoothing: float = 1.0,
    init_std: float = 1.0,
    extra_noise: float = 0.1,
    iterations: int = 30,
    rng: np.random.Generator,
    init_mean: np.ndarray | None = None,
    blocks: Sequence[slice] | None = None,
) -> tuple[np.ndarray, np.ndarray, list[dict[str, float]]]:
    """Noisy cross-entropy maximisation with a diagonal Gaussian search distribution.

    Each iteration ``i`` samples ``population`` candidates, scores them with ``objective(candidates, i)``
    (shape ``(P,)``, or ``(P, len(blocks))`` to select elites per parameter block), keeps the top
    ``ceil(elite_frac * P)`` and sets ``mu <- (1 - lam) mu + lam mean(elite)``,
    ``sigma <- (1 - lam) sigma + lam std(elite) + eps_i`` with ``eps_i = extra_noise * (1 - i / iterations)``.

    Returns:
        ``(mean (dim,), std (dim,), history)``; ``history[i]`` holds ``mean_J`` and ``elite_J``.
    """
    if not isinstance(population, int) or population < 2:
        raise ValueError(f"`population` must be an int >= 2, got {population!r}.")
    if not 0.0 < elite_frac <= 1.0:
        raise ValueError(f"`elite_frac` must be in (0, 1], got {elite_frac!r}.")
    if not 0.0 < smoothing <= 1.0:
        raise ValueError(f"`smoothing` must be in (0, 1], got {smoothing!r}.")
    if not isinstance(iterations, int) or iterations < 1:
        raise ValueError(f"`iterations` must be an int >= 1, got {iterations!r}.")
    mean = np.zeros(dim) if init_mean is None else np.asarray(init_mean, dtype=np.float64).copy()
    std = np.full(dim, float(init_std))
    n_elite = max(1, math.ceil(elite_frac * population))
    blocks = [slice(0, dim)] if blocks is None else list(blocks)
    history = []
    for i in range(iterations):
        cands = mean + std * rng.standard_normal((population, dim))
        scores = np.asarray(objective(cands, i), dtype=np.float64).reshape(population, -1)
        if scores.shape[1] not in (1, len(blocks)):
            raise ValueError(
                f"objective returned {scores.shape[1]} scores per candidate for {len(blocks)} blocks."
            )
        eps = extra_noise * (1.0 - i / iterations)
        for b, sl in enumerate(blocks):
            col = scores[:, b if scores.shape[1] > 1 else 0]
            elite = cands[np.argsort(-col, kind="stable")[:n_elite], sl]
            mean[sl] = (1 - smoothing) * mean[sl] + smoothing * elite.mean(0)
            std[sl] = (1 - smoothing) * std[sl] + smoothing * elite.std(0) + eps
        total = scores.sum(1)
        history.append({"mean_J": float(total.mean()), "elite_J": float(np.sort(total)[-n_elite:].mean())})
    return mean, std, history


class ParamPolicy:
    """Deterministic parametric policy: ``argmax`` of a linear map or a one-hidden-layer tanh MLP.

    Args:
        params: agent -> flat parameter vector.
        obs_dims: agent -> observation length ``d``.
        action_spaces: agent -> ``Discrete`` or ``MultiDiscrete`` space (argmax per block).
        kind: ``"linear"`` (``theta in R^{(d+1) x |A|}``) or ``"mlp"`` (16 tanh units).
    """

    def __init__(
        self,
        params: Mapping[str, np.ndarray],
        obs_dims: Mapping[str, int],
        action_spaces: Mapping[str, spaces.Space],
        kind: str = "linear",
    ) -> None:
        self.kind = kind
        self._layers = {
            a: _unflatten(np.asarray(p), obs_dims[a], _n_logits(action_spaces[a]), kind)
            for a, p in params.items()
        }
        self._spaces = dict(action_spaces)

    def __call__(self, obs: np.ndarray, agent: str) -> Any:
        layers = self._layers[agent]
        h = np.asarray(obs, dtype=np.float64)
        for j, w in enumerate(layers):
            h = h @ w[:-1] + w[-1]
            if j < len(layers) - 1:
                h = np.tanh(h)
        space = self._spaces[agent]
        if isinstance(space, spaces.MultiDiscrete):
            out, start = [], 0
            for n in space.nvec.tolist():
                out.append(int(np.argmax(h[start : start + n])))
                start += n
            return np.asarray(out, dtype=np.int64)
        return int(np.argmax(h))


def _n_logits(space: spaces.Space) -> int:
    if isinstance(space, spaces.MultiDiscrete):
        return int(space.nvec.sum())
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    raise TypeError(f"F-MACEM supports Discrete and MultiDiscrete actions, got {space}.")


def _shapes(d: int, a: int, kind: str) -> list[tuple[int, int]]:
    return [(d + 1, a)] if kind == "linear" else [(d + 1, HIDDEN), (HIDDEN + 1, a)]


def _unflatten(flat: np.ndarray, d: int, a: int, kind: str) -> list[np.ndarray]:
    out, start = [], 0
    for r, c in _shapes(d, a, kind):
        out.append(flat[start : start + r * c].reshape(r, c))
        start += r * c
    return out


class FMACEM:
    """F-MACEM trainer for a MAFE-style ParallelEnv (cooperative by default).

    Args:
        env_fn: Zero-argument constructor of the ParallelEnv to train on (called once).
        policy: ``"linear"`` or ``"mlp"`` (one hidden layer of 16 tanh units).
        alpha: Weight of the rate terms ``sum_j rate_{j,t}``.
        beta: Weight of the fairness penalty.
        reward_weights: component -> weight ``w_k`` of the reward components (``None``: every component 1,
            i.e. the environment's scalar rewards).
        rate_keys: Fairness keys of the rate terms (``None``: every ``rate/<g>``).
        penalty_keys: Fairness keys of the penalty (default ``("dp_gap",)``).
        penalty_reduce: ``"mean"`` over steps or ``"final"`` step.
        population: Candidates ``P`` per iteration (>= 2).
        elite_frac: Elite fraction ``rho_e`` in (0, 1].
        smoothing: Update weight ``lambda`` of the search distribution.
        init_std: Initial standard deviation ``sigma_0``.
        extra_noise: Extra noise ``eps_0`` added to ``sigma``, decaying linearly to 0.
        iterations: CEM iterations.
        episodes: Episodes ``E`` per candidate, on seeds ``seed * 10**6 + iteration * E + e`` shared by all
            candidates of an iteration (common random numbers).
        objective: ``"team"`` (paper) or ``"per_agent"`` (hf-ext extension, not in the paper).
        agents: Agents whose parameters are learned (default: all); the others play ``others``.
        others: Scripted policies for the agents not learned.
        seed: Seed of the search distribution and of the episode seeds.

    Attributes:
        best_params_: agent -> final search mean ``mu_n`` (flat vector), the CEM solution.
        history_: Per iteration ``mean_J``, ``elite_J`` and the mean per-step reward and penalty terms.

    Examples:
        >>> from hf_ext.marl import loan_mafe_v0
        >>> cem = FMACEM(lambda: loan_mafe_v0.parallel_env(max_cycles=5), beta=5.0, population=4,
        ...              iterations=2, episodes=1, seed=0).fit()
        >>> sorted(cem.best_params_)
        ['bank_0', 'bank_1', 'regulator_0']
        >>> cem.policy("bank_0")(cem.env.reset(seed=0)[0]["bank_0"], "bank_0") in range(8)
        True
    """

    _paper = paper("mafe")

    def __init__(
        self,
        env_fn: Callable[[], Any],
        *,
        policy: str = "linear",
        alpha: float = 0.0,
        beta: float = 1.0,
        reward_weights: Mapping[str, float] | None = None,
        rate_keys: Sequence[str] | None = None,
        penalty_keys: Sequence[str] = ("dp_gap",),
        penalty_reduce: str = "mean",
        population: int = 32,
        elite_frac: float = 0.2,
        smoothing: float = 1.0,
        init_std: float = 1.0,
        extra_noise: float = 0.1,
        iterations: int = 30,
        episodes: int = 2,
        objective: str = "team",
        agents: Sequence[str] | None = None,
        others: Mapping[str, Policy] | None = None,
        seed: int = 0,
    ) -> None:
        if policy not in ("linear", "mlp"):
            raise ValueError(f"unknown `policy` {policy!r}; valid: ['linear', 'mlp'].")
        if penalty_reduce not in ("mean", "final"):
            raise ValueError(f"unknown `penalty_reduce` {penalty_reduce!r}; valid: ['mean', 'final'].")
        if objective not in ("team", "per_agent"):
            raise ValueError(f"unknown `objective` {objective!r}; valid: ['team', 'per_agent'].")
        if not isinstance(population, int) or population < 2:
            raise ValueError(f"`population` must be an int >= 2, got {population!r}.")
        if not 0.0 < elite_frac <= 1.0:
            raise ValueError(f"`elite_frac` must be in (0, 1], got {elite_frac!r}.")
        if not isinstance(episodes, int) or episodes < 1:
            raise ValueError(f"`episodes` must be an int >= 1, got {episodes!r}.")
        self.env = env_fn()
        self.policy_kind, self.alpha, self.beta = policy, float(alpha), float(beta)
        self.reward_weights = None if reward_weights is None else dict(reward_weights)
        self.penalty_keys, self.penalty_reduce = tuple(penalty_keys), penalty_reduce
        self.population, self.elite_frac, self.smoothing = population, elite_frac, smoothing
        self.init_std, self.extra_noise, self.iterations, self.episodes = (
            init_std,
            extra_noise,
            iterations,
            episodes,
        )
        self.objective, self.seed = objective, seed
        all_agents = list(self.env.possible_agents)
        self.agents = all_agents if agents is None else list(agents)
        bad = [a for a in self.agents if a not in all_agents]
        if bad:
            raise ValueError(f"`agents` {bad} are not agents of the environment {all_agents}.")
        self.others = bind_all(others or {}, self.env)
        lacking = [a for a in all_agents if a not in self.agents and a not in self.others]
        if lacking:
            raise ValueError(f"agents {lacking} are neither learned (`agents`) nor scripted (`others`).")
        known = self._fairness_keys()
        self.rate_keys = (
            tuple(k for k in known if k.startswith("rate/")) if rate_keys is None else tuple(rate_keys)
        )
        for k in (*self.rate_keys, *self.penalty_keys):
            if k not in known:
                raise ValueError(f"unknown fairness key {k!r}; valid: {sorted(known)}.")
        self._obs_dims = {a: self.env.observation_space(a).shape[0] for a in self.agents}
        self._spaces = {a: self.env.action_space(a) for a in self.agents}
        sizes = [
            sum(r * c for r, c in _shapes(self._obs_dims[a], _n_logits(self._spaces[a]), policy))
            for a in self.agents
        ]
        bounds = np.cumsum([0, *sizes])
        self._blocks = [slice(int(bounds[i]), int(bounds[i + 1])) for i in range(len(self.agents))]
        self._dim = int(bounds[-1])

    def _fairness_keys(self) -> set[str]:
        env = self.env
        env.reset(seed=0)
        _, _, _, _, infos = env.step(
            {
                a: 0
                if isinstance(env.action_space(a), spaces.Discrete)
                else np.zeros(env.action_space(a).shape, np.int64)
                for a in env.agents
            }
        )
        return {k for k in infos[env.possible_agents[0]]["fairness_components"] if not k.startswith("own/")}

    def _split(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        return {a: flat[sl] for a, sl in zip(self.agents, self._blocks)}

    def policies(self, flat: np.ndarray | None = None) -> dict[str, Policy]:
        """All agents' policies: the parametric ones (``flat``, default the fitted mean) plus ``others``."""
        params = self._split(flat) if flat is not None else self.best_params_
        learned = ParamPolicy(params, self._obs_dims, self._spaces, self.policy_kind)
        return {**self.others, **{a: learned for a in self.agents}}

    def policy(self, agent: str) -> Policy:
        """The fitted policy of ``agent``, a callable ``policy(obs, agent) -> action``."""
        if agent not in self.best_params_:
            raise KeyError(f"no learned policy for {agent!r}; learned agents: {self.agents}.")
        return ParamPolicy({agent: self.best_params_[agent]}, self._obs_dims, self._spaces, self.policy_kind)

    def evaluate(self, flat: np.ndarray, seeds: Sequence[int]) -> tuple[np.ndarray, dict[str, float]]:
        """Objective of one joint parameter vector on ``seeds``.

        Returns:
            ``(J, terms)``: ``J`` of shape ``(len(agents),)`` under ``"per_agent"`` else ``(1,)``, and the
            unscaled mean per-step ``reward``, ``rate`` and ``penalty`` terms.
        """
        pols = self.policies(flat)
        idx = [self.env.possible_agents.index(a) for a in self.agents]
        per_agent, rate_t, pen_t = [], [], []
        for s in seeds:
            log = run_episode(self.env, pols, seed=int(s), weights=self.reward_weights)
            per_agent.append(log.rewards.mean(0))
            rate_t.append(sum(log.fairness[k] for k in self.rate_keys).mean() if self.rate_keys else 0.0)
            pen = sum(log.fairness[k] for k in self.penalty_keys) if self.penalty_keys else np.zeros(1)
            pen_t.append(float(pen.mean() if self.penalty_reduce == "mean" else pen[-1]))
        rew = np.mean(per_agent, axis=0)
        fair = self.alpha * float(np.mean(rate_t)) - self.beta * float(np.mean(pen_t))
        j = rew[idx] + fair if self.objective == "per_agent" else np.array([rew.sum() + fair])
        terms = {"reward": float(rew.sum()), "rate": float(np.mean(rate_t)), "penalty": float(np.mean(pen_t))}
        return j, terms

    def fit(self) -> FMACEM:
        """Run the CEM search; sets ``best_params_`` and ``history_``; returns ``self``."""
        rng = np.random.default_rng(self.seed)
        terms_log: list[dict[str, float]] = []

        def objective(cands: np.ndarray, it: int) -> np.ndarray:
            seeds = [self.seed * 10**6 + it * self.episodes + e for e in range(self.episodes)]
            out, terms = [], []
            for c in cands:
                j, t = self.evaluate(c, seeds)
                out.append(j)
                terms.append(t)
            terms_log.append({k: float(np.mean([t[k] for t in terms])) for k in terms[0]})
            logger.debug("F-MACEM iteration %d: mean J %.4f", it, float(np.mean(np.sum(out, axis=1))))
            return np.asarray(out)

        mean, std, history = cem_optimize(
            objective,
            self._dim,
            population=self.population,
            elite_frac=self.elite_frac,
            smoothing=self.smoothing,
            init_std=self.init_std,
            extra_noise=self.extra_noise,
            iterations=self.iterations,
            rng=rng,
            blocks=self._blocks if self.objective == "per_agent" else None,
        )
        self.best_params_ = self._split(mean)
        self.std_ = self._split(std)
        self.history_ = [{**h, **{f"mean_{k}": v for k, v in t.items()}} for h, t in zip(history, terms_log)]
        return self
