"""Fixed-budget best-model identification as ask/tell schedulers (pure numpy).

Setting: ``n_models`` models, a finite benchmark of ``n_queries`` queries, scores in [0, 1] (usually 0/1
correctness) and a budget counted in (model, query) evaluations. The target is the model with the highest mean
score on the whole benchmark. Every scheduler runs a fixed plan of phases; in each phase every surviving model is
scored on the same number of new queries (``ask`` / ``tell``), then the worst survivors are dropped.

* :class:`SuccessiveRejects` -- Audibert & Bubeck (2010), one model dropped per phase [paper, standard algorithm].
* :class:`SynchronizedSuccessiveRejects` (alias :data:`SySRs`) -- the same schedule on *shared* queries, so every
  elimination compares models on identical prompts (paired comparison). [reconstructed from the abstract of
  arXiv 2606.07726: the elimination statistic, the phase lengths and the bound of the paper are unknown.]
* :class:`SequentialHalving` -- Karnin, Koren & Somekh (2013), half of the survivors dropped per round.
* :class:`UniformAllocation` -- ``budget // n_models`` queries per model, then the best empirical mean.

``synchronized=True`` shares the queries in every scheduler (one random permutation of the benchmark, consumed in
order by all survivors). [reconstructed] finite-benchmark rules: a model never sees a query twice (counts are capped
at ``n_queries``); ``budget >= n_models * n_queries`` evaluates everything and returns the exact argmax; a phase that
adds no query eliminates on the data already seen; ties are broken uniformly at random with the seeded generator.
"""

from __future__ import annotations

import copy
import logging
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from typing import Any

import numpy as np

from hf_ext._registry import paper

logger = logging.getLogger(__name__)

NAN_POLICIES = ("zero", "drop_query")
Statistic = Callable[[np.ndarray], np.ndarray]


def check_int(name: str, value: Any, minimum: int, hint: str = "") -> int:
    """Return ``value`` as an int, raising ``TypeError`` for non-integers and ``ValueError`` below ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be an int, got {value!r} ({type(value).__name__}).")
    if value < minimum:
        raise ValueError(f"`{name}` must be an int >= {minimum}, got {value}.{' ' + hint if hint else ''}")
    return int(value)


def logbar(n_models: int) -> Fraction:
    """``1/2 + sum_{i=2}^{K} 1/i``, the normaliser of the Successive Rejects schedule (exact rational)."""
    return Fraction(1, 2) + sum((Fraction(1, i) for i in range(2, n_models + 1)), Fraction(0))


@cache
def sr_schedule(n_models: int, budget: int) -> tuple[int, ...]:
    """Cumulative per-model query counts ``n_1..n_{K-1}`` of Successive Rejects (Audibert & Bubeck, 2010).

    ``n_k = ceil((B - K) / (logbar(K) * (K + 1 - k)))``, computed in exact rational arithmetic. The total cost
    ``n_1 + ... + n_{K-1} + n_{K-1}`` never exceeds ``budget``. Consecutive equal counts (zero-size phases) occur
    at small budgets and are kept as they are: forcing one new query per phase would overspend.

    >>> sr_schedule(3, 30)
    (7, 11)
    """
    check_int("n_models", n_models, 2)
    check_int("budget", budget, n_models + 1, "Successive Rejects needs budget > n_models.")
    lb = logbar(n_models)
    return tuple(
        math.ceil(Fraction(budget - n_models) / (lb * (n_models + 1 - k))) for k in range(1, n_models)
    )


def sh_schedule(n_models: int, budget: int) -> tuple[tuple[int, int], ...]:
    """Sequential Halving rounds as ``(cumulative per-model count, survivors kept)`` pairs.

    ``R = ceil(log2 K)`` rounds; in round ``r`` each of the ``|S_r|`` survivors gets ``floor(B / (|S_r| R))`` new
    queries, then the top ``ceil(|S_r| / 2)`` are kept.

    >>> sh_schedule(4, 100)
    ((12, 2), (37, 1))
    """
    check_int("n_models", n_models, 2)
    rounds = math.ceil(math.log2(n_models))
    plan, size, cum = [], n_models, 0
    for _ in range(rounds):
        cum += budget // (size * rounds)
        size = math.ceil(size / 2)
        plan.append((cum, size))
    return tuple(plan)


@dataclass(frozen=True)
class Batch:
    """One request of a scheduler: score ``model_ids[i]`` on ``query_ids[i, j]`` for every ``i, j``.

    Attributes:
        model_ids: Surviving model ids, ascending (length ``n_active``).
        query_ids: Int array of shape ``(n_active, n_new)``; no row repeats a query the model has already seen.
        phase: Index of the phase (0-based) this batch belongs to.
        shared_query_ids: Synchronised schedulers only: the 1-D array of ``n_new`` query ids every row of
            ``query_ids`` equals, so one batched pass over these prompts can serve all models; ``None`` otherwise.
    """

    model_ids: list[int]
    query_ids: np.ndarray
    phase: int
    shared_query_ids: np.ndarray | None = None


def mean_statistic(obs: np.ndarray) -> np.ndarray:
    """Per-model mean of ``obs`` (shape ``(n_active, n_seen)``) ignoring NaN (dropped queries); 0 with no data."""
    valid = ~np.isnan(obs)
    count = valid.sum(axis=1)
    total = np.where(valid, obs, 0.0).sum(axis=1)
    out: np.ndarray = np.divide(total, count, out=np.zeros(len(obs)), where=count > 0)
    return out


class BestArmScheduler:
    """Shared ask/tell machinery: a fixed plan of phases, shared or independent query orders, eliminations.

    Subclasses only define ``_phases()``, the plan as ``(cumulative per-model count, survivors kept)`` pairs, and
    ``_min_budget``. See :class:`SuccessiveRejects` for the parameters.
    """

    _paper = paper("sysrs")
    _min_budget_hint = ""

    def __init__(
        self,
        n_models: int,
        n_queries: int,
        budget: int,
        *,
        synchronized: bool = False,
        seed: int | None = None,
        nan_policy: str = "zero",
        score_range: tuple[float, float] | None = None,
        statistic: str | Statistic = "mean",
    ) -> None:
        self.n_models = check_int("n_models", n_models, 1)
        self.n_queries = check_int("n_queries", n_queries, 1)
        self.budget = check_int("budget", budget, 0)
        full = self.n_models * self.n_queries
        if self.n_models > 1 and self.budget < min(self._min_budget(self.n_models), full):
            raise ValueError(
                f"`budget` must be an int >= {self._min_budget(self.n_models)} for {type(self).__name__} with "
                f"n_models={self.n_models}, got {self.budget}.{self._min_budget_hint}"
            )
        if nan_policy not in NAN_POLICIES:
            raise ValueError(f"`nan_policy` must be one of {NAN_POLICIES}, got {nan_policy!r}.")
        self.synchronized = bool(synchronized)
        self.nan_policy = nan_policy
        self.score_range = _check_score_range(score_range)
        self._statistic = _resolve_statistic(statistic)
        self._rng = np.random.default_rng(seed)
        if self.n_models == 1:
            self._plan: tuple[tuple[int, int], ...] = ()
        elif self.budget >= full:
            self._plan = ((self.n_queries, 1),)
        else:
            self._plan = tuple((min(c, self.n_queries), keep) for c, keep in self._phases())
        width = self._plan[-1][0] if self._plan else 0
        if self.synchronized:
            self._orders = self._rng.permutation(self.n_queries)[None, :width]
        else:
            tiled = np.tile(np.arange(self.n_queries), (self.n_models, 1))
            self._orders = self._rng.permuted(tiled, axis=1)[:, :width]
        self._obs = np.zeros((self.n_models, width))
        self._active = np.arange(self.n_models)
        self._phase = 0
        self._seen = 0
        self._asked = False
        self.spent = 0
        self.history: list[dict[str, Any]] = []
        self._skip_empty_phases()

    # -- subclass hooks ---------------------------------------------------------------------------------------
    @staticmethod
    def _min_budget(n_models: int) -> int:
        return n_models + 1

    def _phases(self) -> tuple[tuple[int, int], ...]:
        raise NotImplementedError

    # -- public protocol --------------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        """Whether the plan is finished (one model left)."""
        return self._phase >= len(self._plan)

    @property
    def active(self) -> list[int]:
        """Ids of the surviving models, ascending."""
        return [int(m) for m in self._active]

    @property
    def phase(self) -> int:
        """Index of the current phase (equals the number of phases when done)."""
        return self._phase

    def ask(self) -> Batch:
        """The next batch to score; asking again before :meth:`tell` returns the same batch.

        Raises:
            RuntimeError: the scheduler is done.
        """
        if self.done:
            raise RuntimeError("the scheduler is done; call recommend() instead of ask().")
        self._asked = True
        stop = self._plan[self._phase][0]
        if self.synchronized:
            shared = self._orders[0, self._seen : stop]
            ids = np.broadcast_to(shared, (len(self._active), len(shared)))
            return Batch(self.active, ids, self._phase, shared)
        return Batch(self.active, self._orders[self._active, self._seen : stop], self._phase)

    def tell(self, scores: Any) -> None:
        """Report the scores of the last :meth:`ask` batch, shape ``(n_active, n_new)``, values in [0, 1].

        NaN marks a failed evaluation: ``nan_policy="zero"`` scores it 0; ``"drop_query"`` ignores it (in
        synchronised mode the query is dropped for every survivor, so comparisons stay paired). Dropped
        evaluations still count against the budget.

        Raises:
            RuntimeError: no pending :meth:`ask`, or the scheduler is done.
            ValueError: wrong shape, or scores outside [0, 1] (after ``score_range`` rescaling).
        """
        if self.done:
            raise RuntimeError("the scheduler is done; tell() has nothing to receive.")
        if not self._asked:
            raise RuntimeError("tell() was called before ask(); call ask() to get the batch to score first.")
        stop = self._plan[self._phase][0]
        shape = (len(self._active), stop - self._seen)
        scores = np.array(scores, dtype=float)
        if scores.shape != shape:
            raise ValueError(f"`scores` must have shape {shape} (n_active, n_new), got {scores.shape}.")
        scores = self._prepare(scores)
        self._obs[self._active, self._seen : stop] = scores
        if self.synchronized and self.nan_policy == "drop_query":
            cols = np.isnan(self._obs[self._active, :stop]).any(axis=0)
            self._obs[np.ix_(self._active, np.flatnonzero(cols))] = np.nan
        self.spent += scores.size
        self._seen = stop
        self._asked = False
        self._end_phase(shape[1])
        self._skip_empty_phases()

    def recommend(self, *, allow_partial: bool = False) -> int:
        """The identified best model.

        Args:
            allow_partial: Before the plan is done, return the current leader (highest statistic among the
                survivors, ties broken at random without touching the scheduler's generator) instead of raising.

        Raises:
            RuntimeError: the scheduler is not done and ``allow_partial`` is false.
        """
        if self.done:
            return int(self._active[0])
        if not allow_partial:
            raise RuntimeError(
                f"the scheduler is not done (phase {self._phase} of {len(self._plan)}); keep calling ask()/tell(), "
                "or pass allow_partial=True for the current leader."
            )
        return int(self._active[self._ranking(copy.deepcopy(self._rng))[0]])

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume (plain Python and numpy objects; picklable). The statistic is not saved."""
        return {
            "config": self._config(),
            "rng": copy.deepcopy(self._rng.bit_generator.state),
            "orders": self._orders.copy(),
            "obs": self._obs.copy(),
            "active": self._active.copy(),
            "phase": self._phase,
            "seen": self._seen,
            "asked": self._asked,
            "spent": self.spent,
            "history": copy.deepcopy(self.history),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output into a scheduler built with the same arguments.

        Raises:
            ValueError: the state was saved by a scheduler with a different configuration.
        """
        if state["config"] != self._config():
            raise ValueError(
                f"`state` was saved with config {state['config']}, this scheduler has {self._config()}."
            )
        self._rng.bit_generator.state = copy.deepcopy(state["rng"])
        self._orders = state["orders"].copy()
        self._obs = state["obs"].copy()
        self._active = state["active"].copy()
        self._phase, self._seen, self._asked = state["phase"], state["seen"], state["asked"]
        self.spent = state["spent"]
        self.history = copy.deepcopy(state["history"])

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(n_models={self.n_models}, n_queries={self.n_queries}, budget={self.budget}, "
            f"synchronized={self.synchronized}, phase={self._phase}/{len(self._plan)}, spent={self.spent})"
        )

    # -- internals --------------------------------------------------------------------------------------------
    def _config(self) -> dict[str, Any]:
        return {
            "class": type(self).__name__,
            "n_models": self.n_models,
            "n_queries": self.n_queries,
            "budget": self.budget,
            "synchronized": self.synchronized,
            "nan_policy": self.nan_policy,
            "score_range": self.score_range,
        }

    def _prepare(self, scores: np.ndarray) -> np.ndarray:
        if self.score_range is not None:
            lo, hi = self.score_range
            scores = (scores - lo) / (hi - lo)
        finite = scores[~np.isnan(scores)]
        if finite.size and (finite.min() < 0.0 or finite.max() > 1.0):
            bad = float(finite[(finite < 0.0) | (finite > 1.0)][0])
            where = "after rescaling by `score_range` " if self.score_range is not None else ""
            raise ValueError(
                f"`scores` must lie in [0, 1] {where}(bounded rewards), got {bad!r}. "
                "Pass score_range=(lo, hi) to rescale scores from another range."
            )
        if self.nan_policy == "zero":
            scores = np.nan_to_num(scores, nan=0.0)
        return scores

    def _ranking(self, rng: np.random.Generator) -> np.ndarray:
        """Positions in ``self._active``, best first; ties in the statistic broken uniformly at random."""
        stat = np.asarray(self._statistic(self._obs[self._active, : self._seen]), dtype=float)
        if stat.shape != (len(self._active),):
            raise ValueError(f"`statistic` must return shape ({len(self._active)},), got {stat.shape}.")
        return np.lexsort((rng.random(len(stat)), -stat))

    def _end_phase(self, n_new: int) -> None:
        keep = self._plan[self._phase][1]
        order = self._ranking(self._rng)
        dropped = np.sort(self._active[order[keep:]])
        self._active = np.sort(self._active[order[:keep]])
        self.history.append(
            {
                "phase": self._phase,
                "n_new": n_new,
                "n_seen": self._seen,
                "spent": self.spent,
                "eliminated": [int(m) for m in dropped],
                "survivors": self.active,
            }
        )
        logger.debug("phase %d: %d new queries, dropped %s", self._phase, n_new, dropped.tolist())
        self._phase += 1

    def _skip_empty_phases(self) -> None:
        while not self.done and self._plan[self._phase][0] <= self._seen:
            self._end_phase(0)


class SuccessiveRejects(BestArmScheduler):
    """Successive Rejects (Audibert & Bubeck, 2010) as an ask/tell scheduler; ``synchronized=True`` is SySRs.

    Phase ``k = 1..K-1`` brings every survivor to ``n_k`` queries (:func:`sr_schedule`) and drops the survivor
    with the lowest mean. With ``synchronized=False`` each model draws its own queries without replacement
    (classical SR). With ``synchronized=True`` one random permutation of the benchmark is consumed in order by
    every survivor, so all eliminations compare models on the same queries (SySRs [reconstructed]).

    Parameters
    ----------
    n_models : int
        Number of models ``K`` (>= 1; ``K = 1`` is done at once and recommends model 0 at zero cost).
    n_queries : int
        Number of queries ``N`` in the benchmark (>= 1).
    budget : int
        Total (model, query) evaluations allowed; must exceed ``n_models``. ``budget >= K * N`` (always
        allowed) evaluates everything once and returns the exact best model [reconstructed rule].
    synchronized : bool, default=False
        Share the queries across survivors (paired comparisons).
    seed : int or None, default=None
        Seed of the generator that draws query orders and breaks ties.
    nan_policy : {"zero", "drop_query"}, default="zero"
        How a NaN score (failed evaluation) counts; see :meth:`tell`.
    score_range : (float, float) or None, default=None
        ``(lo, hi)`` of the raw scores, rescaled to [0, 1]; without it scores outside [0, 1] raise.
    statistic : "mean" or callable, default="mean"
        Elimination statistic, higher is better: ``f(obs) -> array (n_active,)`` where ``obs`` has shape
        ``(n_active, n_seen)`` and NaN marks dropped queries. The paper's exact statistic is unknown
        [reconstructed: the mean on shared queries, equal to the mean paired difference against the leader].

    Examples
    --------
    >>> import numpy as np
    >>> S = np.random.default_rng(0).random((4, 50)) < np.array([[0.3], [0.5], [0.7], [0.9]])
    >>> sched = SuccessiveRejects(4, 50, budget=120, synchronized=True, seed=0)
    >>> while not sched.done:
    ...     batch = sched.ask()
    ...     sched.tell(S[np.asarray(batch.model_ids)[:, None], batch.query_ids])
    >>> sched.recommend(), sched.spent <= 120
    (3, True)
    """

    _min_budget_hint = (
        " Successive Rejects needs budget > n_models so that every model gets at least one query."
    )

    def _phases(self) -> tuple[tuple[int, int], ...]:
        counts = sr_schedule(self.n_models, self.budget)
        return tuple((c, self.n_models - 1 - k) for k, c in enumerate(counts))


class SynchronizedSuccessiveRejects(SuccessiveRejects):
    """SySRs: :class:`SuccessiveRejects` on shared queries (``synchronized=True``; the parameter is fixed).

    [reconstructed] Only the abstract of arXiv 2606.07726 is available: the same phase schedule as SR, one random
    permutation of the queries shared by all survivors, and elimination of the lowest mean on the shared queries
    (= the worst mean paired difference against the leader). Pairing helps because
    ``Var(S_i - S_j) = s_i^2 + s_j^2 - 2 Cov(S_i, S_j)`` is small when models fail on the same queries.

    Examples
    --------
    >>> import numpy as np
    >>> S = (np.random.default_rng(0).random((3, 40)) < [[0.2], [0.8], [0.5]]).astype(float)
    >>> sched = SynchronizedSuccessiveRejects(3, 40, budget=60, seed=0)
    >>> batch = sched.ask()
    >>> bool((batch.query_ids == batch.shared_query_ids).all())
    True
    """

    def __init__(self, n_models: int, n_queries: int, budget: int, **kwargs: Any) -> None:
        if "synchronized" in kwargs:
            raise TypeError(
                "`synchronized` is fixed to True for SynchronizedSuccessiveRejects; use SuccessiveRejects."
            )
        super().__init__(n_models, n_queries, budget, synchronized=True, **kwargs)


SySRs = SynchronizedSuccessiveRejects


class SequentialHalving(BestArmScheduler):
    """Sequential Halving (Karnin, Koren & Somekh, 2013) as an ask/tell scheduler (:func:`sh_schedule`).

    Same parameters as :class:`SuccessiveRejects`; ``synchronized=True`` shares the queries (a project
    addition). Rounds whose share rounds down to zero new queries eliminate on the data already seen.

    Examples
    --------
    >>> sched = SequentialHalving(8, 100, budget=400, seed=0)
    >>> sched.ask().query_ids.shape
    (8, 16)
    """

    _min_budget_hint = " Sequential Halving needs budget > n_models."

    def _phases(self) -> tuple[tuple[int, int], ...]:
        return sh_schedule(self.n_models, self.budget)


class UniformAllocation(BestArmScheduler):
    """Uniform allocation: every model gets ``budget // n_models`` queries, then the best mean wins.

    Same parameters as :class:`SuccessiveRejects` except that ``budget >= n_models`` suffices. This is
    lm-eval's ``--limit`` subsampling when ``synchronized=True`` (every model sees the same queries).

    Examples
    --------
    >>> sched = UniformAllocation(3, 10, budget=7, synchronized=True, seed=0)
    >>> sched.ask().query_ids.shape
    (3, 2)
    """

    _min_budget_hint = " Uniform allocation needs at least one query per model."

    @staticmethod
    def _min_budget(n_models: int) -> int:
        return n_models

    def _phases(self) -> tuple[tuple[int, int], ...]:
        return ((self.budget // self.n_models, 1),)


ALGORITHMS: dict[str, tuple[type[BestArmScheduler], bool]] = {
    "uniform": (UniformAllocation, False),
    "uniform_synced": (UniformAllocation, True),
    "sr": (SuccessiveRejects, False),
    "sysrs": (SuccessiveRejects, True),
    "sh": (SequentialHalving, False),
    "sh_synced": (SequentialHalving, True),
}


def make_scheduler(
    algorithm: str, n_models: int, n_queries: int, budget: int, **kwargs: Any
) -> BestArmScheduler:
    """Build the scheduler named ``algorithm`` (a key of :data:`ALGORITHMS`); ``kwargs`` go to its constructor."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"`algorithm` must be one of {list(ALGORITHMS)}, got {algorithm!r}.")
    cls, synced = ALGORITHMS[algorithm]
    return cls(n_models, n_queries, budget, synchronized=synced, **kwargs)


def identify_best_model(
    score_fn: Callable[[list[int], np.ndarray], Any],
    n_models: int,
    n_queries: int,
    budget: int,
    algorithm: str = "sysrs",
    seed: int | None = 0,
    **kwargs: Any,
) -> BestArmScheduler:
    """Drive a scheduler to the end with ``score_fn(model_ids, query_ids) -> scores (n_active, n_new)``.

    Returns the finished scheduler: ``.recommend()``, ``.spent`` and ``.history`` hold the outcome.

    >>> import numpy as np
    >>> S = np.array([[0, 1, 0, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=float)
    >>> s = identify_best_model(lambda m, q: S[np.asarray(m)[:, None], q], 2, 6, budget=10, seed=0)
    >>> s.recommend(), s.spent
    (1, 8)
    """
    sched = make_scheduler(algorithm, n_models, n_queries, budget, seed=seed, **kwargs)
    while not sched.done:
        batch = sched.ask()
        sched.tell(score_fn(batch.model_ids, batch.query_ids))
    return sched


def _check_score_range(score_range: Any) -> tuple[float, float] | None:
    if score_range is None:
        return None
    try:
        lo, hi = (float(v) for v in score_range)
    except (TypeError, ValueError):
        raise ValueError(
            f"`score_range` must be None or a pair (lo, hi) of floats, got {score_range!r}."
        ) from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"`score_range` must be a finite pair with lo < hi, got {score_range!r}.")
    return (lo, hi)


def _resolve_statistic(statistic: str | Statistic) -> Statistic:
    if statistic == "mean":
        return mean_statistic
    if callable(statistic):
        return statistic
    raise ValueError(f"`statistic` must be 'mean' or a callable obs -> (n_active,) array, got {statistic!r}.")
