"""F-MACEM: Fair Multi-Agent Cross-Entropy Method over per-agent policy parameters.

**[paper]** CEM over per-agent policy parameters maximising "direct rewards + rate-based terms - fairness
penalties" in a cooperative (team) objective. **[reconstructed]** everything concrete below: the policy
classes, the noisy-CEM schedule (Szita & Lorincz 2006), common random numbers, and the objective's scaling.

Objective of a joint candidate ``theta`` (per-step average, so ``alpha``/``beta`` do not scale with the
horizon)::

    J(theta) = 1/E sum_e [1/T sum_t (sum_n sum_k w_k c^R_{n,k,t} + alpha * sum_j rate_{j,t}) - beta * pen_e]

with ``pen_e`` the summed penalty keys of episode ``e``, reduced over the episode by ``penalty_reduce``:
``"episode"`` (default) is the gap between the groups' episode means (``dp_gap`` of the episode's approval
rates, ...), ``"mean"`` the mean of the per-step gaps and ``"final"`` the last step's gap. Per-step gaps of
two groups treated alike are still positive in a finite sample, which pushes the mean-of-steps penalty
towards approve-all or approve-none corners; the episode gap has no such bias. Global fairness components are
identical for every agent and are counted once (summing them over agents would only rescale
``alpha``/``beta`` by ``N``). ``objective="per_agent"`` (an hf-ext extension for mixed-motive studies, **not
in the paper**) ranks each agent's elites by its own ``J_n`` = its own weighted rewards + the same fairness
terms.

All ``P x E`` episodes of an iteration run at once in one
:class:`~hf_ext.mafe.vector.MAFEVectorEnv`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from hf_ext._registry import paper
from hf_ext._validation import check_choice, check_float, check_int, check_probability, check_sequence
from hf_ext.mafe.core import GAP_SOURCES
from hf_ext.mafe.env_base import MAFEParallelEnv
from hf_ext.mafe.policies import EpisodeLog, Policy, bind_all, run_episode
from hf_ext.mafe.vector import MAFEVectorEnv

logger = logging.getLogger(__name__)

HIDDEN = 16
VALIDATION_OFFSET = 500_000  # held-out validation seeds start here, past any iteration's training seeds


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
    check_int("population", population, low=2)
    check_probability("elite_frac", elite_frac, low_open=True)
    check_probability("smoothing", smoothing, low_open=True)
    check_int("iterations", iterations, low=1)
    mean = np.zeros(dim) if init_mean is None else np.asarray(init_mean, dtype=np.float64).copy()
    std = np.full(dim, check_float("init_std", init_std, low=0, low_open=True))
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

    Takes one observation ``(d,)`` or a batch ``(B, d)``. The parameters of an agent are one flat vector
    (shared by the batch) or one vector per batch row ``(B, size)`` (a population of candidates).

    Args:
        params: agent -> flat parameter vector ``(size,)`` or ``(B, size)``.
        obs_dims: agent -> observation length ``d``.
        action_spaces: agent -> ``Discrete`` or ``MultiDiscrete`` space (argmax per block).
        kind: ``"linear"`` (``theta in R^{(d+1) x |A|}``) or ``"mlp"`` (16 tanh units).
    """

    batched = True

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
            h = (h[..., None, :] @ w[..., :-1, :])[..., 0, :] + w[..., -1, :]
            if j < len(layers) - 1:
                h = np.tanh(h)
        space = self._spaces[agent]
        if isinstance(space, spaces.MultiDiscrete):
            bounds = np.cumsum(space.nvec)[:-1]
            return np.stack([np.argmax(part, -1) for part in np.split(h, bounds, axis=-1)], -1)
        action = np.argmax(h, -1)
        return int(action) if action.ndim == 0 else action


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
        out.append(flat[..., start : start + r * c].reshape(*flat.shape[:-1], r, c))
        start += r * c
    return out


def constant_params(
    space: spaces.Space, obs_dim: int, action: Any, *, kind: str = "linear", margin: float = 1.0
) -> np.ndarray:
    """Flat :class:`ParamPolicy` parameters that play ``action`` whatever the observation: zero weights and
    an output bias of ``margin`` on the action's logit (on each group's logit for ``MultiDiscrete``).

    A starting point for :class:`FMACEM` (``init_params``): the search then explores observation-dependent
    deviations from a good fixed action.

    Examples:
        >>> from gymnasium import spaces
        >>> p = constant_params(spaces.Discrete(3), 4, 2)
        >>> ParamPolicy({"a": p}, {"a": 4}, {"a": spaces.Discrete(3)})(np.ones(4), "a")
        2
    """
    n = _n_logits(space)
    check_choice("kind", kind, ("linear", "mlp"))
    offsets = (
        np.cumsum([0, *space.nvec[:-1]]) if isinstance(space, spaces.MultiDiscrete) else np.zeros(1, int)
    )
    if not space.contains(np.asarray(action, dtype=np.int64) if np.ndim(action) else action):
        raise ValueError(f"`action` {action!r} is not in the action space {space}.")
    bias = np.zeros(n)
    bias[offsets + np.atleast_1d(np.asarray(action, dtype=np.int64))] = margin
    shapes = _shapes(obs_dim, n, kind)
    flat = np.zeros(sum(r * c for r, c in shapes))
    flat[-n:] = bias  # the last row of the last layer is its bias
    return flat


class FMACEM:
    """F-MACEM trainer for a MAFE-style ParallelEnv (cooperative by default).

    Args:
        env_fn: Zero-argument constructor of the MAFE-style ParallelEnv to train on (called once). Its
            dynamics and settings are used; wrappers around it are not, since the objective is built from
            the reward and fairness components.
        policy: ``"linear"`` or ``"mlp"`` (one hidden layer of 16 tanh units).
        alpha: Weight of the rate terms ``sum_j rate_{j,t}``.
        beta: Weight of the fairness penalty (>= 0).
        reward_weights: component -> weight ``w_k`` of the reward components (``None``: every component 1,
            i.e. the environment's scalar rewards).
        rate_keys: Fairness keys of the rate terms (``None``: every ``rate/<g>``).
        penalty_keys: Fairness keys of the penalty (default ``("dp_gap",)``).
        penalty_reduce: ``"episode"`` (gap of the episode's group means), ``"mean"`` over steps or
            ``"final"`` step.
        population: Candidates ``P`` per iteration (>= 2).
        elite_frac: Elite fraction ``rho_e`` in (0, 1].
        smoothing: Update weight ``lambda`` of the search distribution, in (0, 1].
        init_std: Initial standard deviation ``sigma_0``.
        extra_noise: Extra noise ``eps_0`` added to ``sigma``, decaying linearly to 0.
        iterations: CEM iterations.
        episodes: Episodes ``E`` per candidate, on seeds ``seed * 10**6 + iteration * E + e`` shared by all
            candidates of an iteration (common random numbers).
        objective: ``"team"`` (paper) or ``"per_agent"`` (hf-ext extension, not in the paper).
        agents: Agents whose parameters are learned (default: all; at least one); the others play ``others``.
        others: Scripted policies for the agents not learned (called with batches of observations).
        seed: Seed of the search distribution and of the episode seeds.
        init_params: agent -> flat starting mean ``mu_n`` of the search (default zeros), e.g.
            :func:`constant_params` to start from a fixed action (a warm start; hf-ext extension).
        validation_episodes: ``0`` (default): the solution is the final search mean. ``V > 0`` (hf-ext
            extension): the solution is the best of the starting mean, each iteration's best candidate and
            the final mean, scored on ``V`` held-out episodes (seeds ``seed * 10**6 + 500_000 + v``, which no
            iteration trains on), so a search that ends worse than where it started or than a candidate it
            passed keeps the better one. The team objective ranks them (summed over agents under
            ``"per_agent"``).

    Attributes:
        best_params_: agent -> the solution (flat vector): the final search mean ``mu_n``, or with
            ``validation_episodes`` the validated choice.
        selection_: With ``validation_episodes``, ``(source, validation J)`` of every scored solution
            (source ``"start"``, ``"iteration <i>"`` or ``"final"``) and the chosen index; else ``None``.
        history_: Per iteration ``mean_J``, ``elite_J`` and the mean per-step reward, rate and penalty terms.

    Examples:
        >>> from hf_ext.mafe import loan_mafe_v0
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
        penalty_reduce: str = "episode",
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
        init_params: Mapping[str, np.ndarray] | None = None,
        validation_episodes: int = 0,
    ) -> None:
        self.policy_kind = check_choice("policy", policy, ("linear", "mlp"))
        self.penalty_reduce = check_choice("penalty_reduce", penalty_reduce, ("episode", "mean", "final"))
        self.objective = check_choice("objective", objective, ("team", "per_agent"))
        self.population = check_int("population", population, low=2)
        self.elite_frac = check_probability("elite_frac", elite_frac, low_open=True)
        self.smoothing = check_probability("smoothing", smoothing, low_open=True)
        self.episodes = check_int("episodes", episodes, low=1)
        self.iterations = check_int("iterations", iterations, low=1)
        self.init_std = check_float("init_std", init_std, low=0, low_open=True)
        self.extra_noise = check_float("extra_noise", extra_noise, low=0)
        self.alpha, self.beta = check_float("alpha", alpha), check_float("beta", beta, low=0)
        self.seed = check_int("seed", seed, low=0)
        self.validation_episodes = check_int("validation_episodes", validation_episodes, low=0)
        if self.validation_episodes and self.iterations * self.episodes > VALIDATION_OFFSET:
            raise ValueError(
                f"`iterations` x `episodes` = {self.iterations * self.episodes} training seeds would reach "
                f"the validation seeds (offset {VALIDATION_OFFSET}); use validation_episodes=0 or fewer."
            )
        self.env = env_fn()
        raw = getattr(self.env, "unwrapped", self.env)
        if not isinstance(raw, MAFEParallelEnv):
            raise TypeError(f"`env_fn` must build a MAFE-style ParallelEnv, got {type(raw).__name__}.")
        self._raw = raw
        self.reward_weights = None if reward_weights is None else dict(reward_weights)
        all_agents = list(raw.possible_agents)
        self.agents = all_agents if agents is None else check_sequence("agents", agents, min_length=1)
        bad = [a for a in self.agents if a not in all_agents]
        if bad:
            raise ValueError(f"`agents` {bad} are not agents of the environment {all_agents}.")
        self.others = bind_all(others or {}, raw)
        lacking = [a for a in all_agents if a not in self.agents and a not in self.others]
        if lacking:
            raise ValueError(f"agents {lacking} are neither learned (`agents`) nor scripted (`others`).")
        known = raw.fairness_keys()
        self.rate_keys = tuple(raw._keys["rate"] if rate_keys is None else rate_keys)
        self.penalty_keys = tuple(penalty_keys)
        for k in (*self.rate_keys, *self.penalty_keys):
            check_choice("fairness key", k, known)
        if self.penalty_reduce == "episode":
            for k in self.penalty_keys:
                check_choice(
                    "penalty_keys", k, tuple(GAP_SOURCES), hint="penalty_reduce='episode' needs gaps."
                )
        self._obs_dims = {a: raw.observation_space(a).shape[0] for a in self.agents}
        self._spaces = {a: raw.action_space(a) for a in self.agents}
        sizes = [
            sum(r * c for r, c in _shapes(self._obs_dims[a], _n_logits(self._spaces[a]), policy))
            for a in self.agents
        ]
        bounds = np.cumsum([0, *sizes])
        self._blocks = [slice(int(bounds[i]), int(bounds[i + 1])) for i in range(len(self.agents))]
        self._dim = int(bounds[-1])
        self._init_mean = None
        if init_params is not None:
            unknown = sorted(set(init_params) - set(self.agents))
            if unknown:
                raise ValueError(f"`init_params` has agents {unknown} that are not learned {self.agents}.")
            self._init_mean = np.zeros(self._dim)
            for a, sl in zip(self.agents, self._blocks):
                if a in init_params:
                    vec = np.asarray(init_params[a], dtype=np.float64)
                    if vec.shape != (sl.stop - sl.start,):
                        raise ValueError(
                            f"`init_params[{a!r}]` must have shape ({sl.stop - sl.start},) for the "
                            f"{policy!r} policy, got {vec.shape}."
                        )
                    self._init_mean[sl] = vec
        self._vec: MAFEVectorEnv | None = None

    def _split(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        return {a: flat[..., sl] for a, sl in zip(self.agents, self._blocks)}

    def policies(self, flat: np.ndarray | None = None) -> dict[str, Policy]:
        """All agents' policies: the parametric ones (``flat``, default the fitted mean; ``(B, dim)`` gives
        one parameter vector per copy of a vector env) plus ``others``."""
        params = self._split(flat) if flat is not None else self.best_params_
        learned = ParamPolicy(params, self._obs_dims, self._spaces, self.policy_kind)
        return {**self.others, **dict.fromkeys(self.agents, learned)}

    def policy(self, agent: str) -> Policy:
        """The fitted policy of ``agent``, a callable ``policy(obs, agent) -> action``."""
        if agent not in self.best_params_:
            raise KeyError(f"no learned policy for {agent!r}; learned agents: {self.agents}.")
        return ParamPolicy({agent: self.best_params_[agent]}, self._obs_dims, self._spaces, self.policy_kind)

    def penalty(self, log: EpisodeLog) -> np.ndarray:
        """The summed penalty keys of each episode of ``log``, reduced by ``penalty_reduce``."""
        if self.penalty_reduce == "episode":
            return sum((log.episode_gap(k) for k in self.penalty_keys), np.zeros(()))
        pen = sum((log.fairness[k] for k in self.penalty_keys), np.zeros(()))
        return pen.mean(0) if self.penalty_reduce == "mean" else pen[-1]

    def evaluate(
        self, candidates: np.ndarray, seeds: Sequence[int]
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Objective of joint parameter vectors ``(P, dim)`` (or one ``(dim,)``), each on every seed.

        Returns:
            ``(J, terms)``: ``J`` of shape ``(P, len(agents))`` under ``"per_agent"`` else ``(P, 1)``, and the
            unscaled mean per-step ``reward``, ``rate`` and ``penalty`` terms, each ``(P,)``.
        """
        cands = np.atleast_2d(np.asarray(candidates, dtype=np.float64))
        p, e = len(cands), len(seeds)
        if self._vec is None or self._vec.num_envs != p * e:
            self._vec = MAFEVectorEnv(self._raw, p * e)
        log = run_episode(
            self._vec,
            self.policies(np.repeat(cands, e, 0)),
            seed=[int(s) for _ in range(p) for s in seeds],
            weights=self.reward_weights,
        )
        rew = log.rewards.mean(0).reshape(p, e, -1).mean(1)  # (P, N)
        rate = sum((log.fairness[k] for k in self.rate_keys), np.zeros(()))
        rate = np.broadcast_to(np.mean(rate, 0), (p * e,)).reshape(p, e).mean(1)
        pen = np.broadcast_to(self.penalty(log), (p * e,)).reshape(p, e).mean(1)
        fair = self.alpha * rate - self.beta * pen
        if self.objective == "per_agent":
            idx = [self._raw.possible_agents.index(a) for a in self.agents]
            j = rew[:, idx] + fair[:, None]
        else:
            j = (rew.sum(1) + fair)[:, None]
        return j, {"reward": rew.sum(1), "rate": rate, "penalty": pen}

    def fit(self) -> FMACEM:
        """Run the CEM search; sets ``best_params_`` and ``history_``; returns ``self``."""
        rng = np.random.default_rng(self.seed)
        terms_log: list[dict[str, float]] = []
        best_of_iteration: list[np.ndarray] = []

        def objective(cands: np.ndarray, it: int) -> np.ndarray:
            seeds = [self.seed * 10**6 + it * self.episodes + e for e in range(self.episodes)]
            j, terms = self.evaluate(cands, seeds)
            terms_log.append({k: float(v.mean()) for k, v in terms.items()})
            best_of_iteration.append(cands[int(np.argmax(j.sum(1)))].copy())
            logger.debug("F-MACEM iteration %d: mean J %.4f", it, float(j.sum(1).mean()))
            return j

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
            init_mean=self._init_mean,
            blocks=self._blocks if self.objective == "per_agent" else None,
        )
        self.selection_: tuple[list[tuple[str, float]], int] | None = None
        if self.validation_episodes:
            start = np.zeros(self._dim) if self._init_mean is None else self._init_mean
            sources = ["start", *(f"iteration {i}" for i in range(self.iterations)), "final"]
            solutions = np.stack([start, *best_of_iteration, mean])
            offset = self.seed * 10**6 + VALIDATION_OFFSET
            j, _ = self.evaluate(solutions, [offset + v for v in range(self.validation_episodes)])
            scores = j.sum(1)
            chosen = int(np.argmax(scores))
            self.selection_ = ([(s, float(v)) for s, v in zip(sources, scores)], chosen)
            mean = solutions[chosen]
        self.best_params_ = self._split(mean)
        self.std_ = self._split(std)
        self.history_ = [{**h, **{f"mean_{k}": v for k, v in t.items()}} for h, t in zip(history, terms_log)]
        return self
