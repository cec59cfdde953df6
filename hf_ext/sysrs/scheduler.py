"""The ask/tell machinery shared by every best-model identification scheduler (pure numpy).

A scheduler runs a fixed plan of phases; in each phase every surviving model is scored on the same number of
new queries (:meth:`BestArmScheduler.ask` / :meth:`BestArmScheduler.tell`), then the worst survivors are
dropped by the elimination statistic. ``synchronized=True`` draws one random permutation of the benchmark that
every survivor consumes in order, so every elimination compares models on identical queries.

[reconstructed] Finite-benchmark rules: a model never sees a query twice (counts are capped at ``n_queries``);
``budget >= n_models * n_queries`` evaluates everything and returns the exact argmax; a phase that adds no
query eliminates on the data already seen; ties are broken uniformly at random with the seeded generator.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from hf_ext._registry import paper
from hf_ext._validation import check_bool, check_choice, check_int
from hf_ext.sysrs.scores import check_score_range, to_unit_interval

logger = logging.getLogger(__name__)

NAN_POLICIES = ("zero", "drop_query")
Statistic = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Batch:
    """One request of a scheduler: score ``model_ids[i]`` on ``query_ids[i, j]`` for every ``i, j``.

    Attributes:
        model_ids: Surviving model ids, ascending (length ``n_active``).
        query_ids: Int array of shape ``(n_active, n_new)``; no row repeats a query the model has already
            seen.
        phase: Index of the phase (0-based) this batch belongs to.
        shared_query_ids: Synchronised schedulers only: the 1-D array of ``n_new`` query ids every row of
            ``query_ids`` equals, so one batched pass over these prompts serves all models; else ``None``.
    """

    _paper: ClassVar[dict[str, object]] = paper("sysrs")

    model_ids: list[int]
    query_ids: np.ndarray
    phase: int
    shared_query_ids: np.ndarray | None = None


def mean_statistic(obs: np.ndarray) -> np.ndarray:
    """Per-model mean of ``obs`` (shape ``(n_active, n_seen)``), NaN (dropped query) ignored; 0 without data.

    On shared queries the lowest mean is also the worst mean paired difference against the leader
    (``mean_i - mean_leader = mean_q (S[i, q] - S[leader, q])``) [reconstructed: the paper's statistic is
    unknown].
    """
    valid = ~np.isnan(obs)
    count = valid.sum(axis=1)
    total = np.where(valid, obs, 0.0).sum(axis=1)
    out: np.ndarray = np.divide(total, count, out=np.zeros(len(obs)), where=count > 0)
    return out


class BestArmScheduler:
    """Shared ask/tell machinery: a fixed plan of phases, shared or independent query orders, eliminations.

    Subclasses define ``_phases()``, the plan as ``(cumulative per-model count, survivors kept)`` pairs, and
    optionally ``_min_budget``.

    Parameters
    ----------
    n_models : int
        Number of models ``K`` (>= 1; ``K = 1`` is done at once and recommends model 0 at zero cost).
    n_queries : int
        Number of queries ``N`` in the benchmark (>= 1).
    budget : int
        Total (model, query) evaluations allowed; at least the scheduler's minimum (``K + 1`` for SR and SH,
        ``K`` for uniform). ``budget >= K * N`` (always allowed) evaluates everything once and returns the
        exact best model [reconstructed rule].
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
        ``(n_active, n_seen)`` and NaN marks dropped queries (default: :func:`mean_statistic`).
    """

    _paper = paper("sysrs")
    _min_budget_hint = "needs budget > n_models"

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
        self.n_models = check_int("n_models", n_models, low=1)
        self.n_queries = check_int("n_queries", n_queries, low=1)
        self.budget = check_int("budget", budget, low=0)
        full = self.n_models * self.n_queries
        if self.n_models > 1 and self.budget < full:
            hint = f"{type(self).__name__} with n_models={self.n_models} {self._min_budget_hint}."
            check_int("budget", self.budget, low=self._min_budget(self.n_models), hint=hint)
        self.synchronized = check_bool("synchronized", synchronized)
        self.nan_policy = check_choice("nan_policy", nan_policy, NAN_POLICIES)
        self.score_range = check_score_range(score_range)
        if not callable(statistic):
            check_choice("statistic", statistic, ("mean",), hint="Or pass a callable obs -> (n_active,).")
        self._statistic = statistic if callable(statistic) else mean_statistic
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
        self._phase = self._seen = self.spent = 0
        self._asked = False
        self.history: list[dict[str, Any]] = []
        self._skip_empty_phases()

    @staticmethod
    def _min_budget(n_models: int) -> int:
        return n_models + 1

    def _phases(self) -> tuple[tuple[int, int], ...]:
        raise NotImplementedError

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
        """Report the scores of the last :meth:`ask` batch, shape ``(n_active, n_new)``, in [0, 1].

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
        if np.shape(scores) != shape:
            raise ValueError(f"`scores` must have shape {shape} (n_active, n_new), got {np.shape(scores)}.")
        scores = to_unit_interval(scores, self.score_range)
        if self.nan_policy == "zero":
            scores = np.nan_to_num(scores, nan=0.0)
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
                survivors, ties broken at random without touching the scheduler's generator) instead of
                raising.

        Raises:
            RuntimeError: the scheduler is not done and ``allow_partial`` is false.
        """
        if self.done:
            return int(self._active[0])
        if not allow_partial:
            raise RuntimeError(
                f"the scheduler is not done (phase {self._phase} of {len(self._plan)}); keep calling "
                "ask()/tell(), or pass allow_partial=True for the current leader."
            )
        return int(self._active[self._ranking(copy.deepcopy(self._rng))[0]])

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume (plain Python and numpy objects; picklable); not the statistic."""
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
            f"{type(self).__name__}(n_models={self.n_models}, n_queries={self.n_queries}, "
            f"budget={self.budget}, synchronized={self.synchronized}, "
            f"phase={self._phase}/{len(self._plan)}, spent={self.spent})"
        )

    def _config(self) -> dict[str, Any]:
        names = ("n_models", "n_queries", "budget", "synchronized", "nan_policy", "score_range")
        return {"class": type(self).__name__, **{k: getattr(self, k) for k in names}}

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
