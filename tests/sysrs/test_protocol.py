"""The ask/tell protocol: synchronised queries, no repeats, eliminations, resumable state, misuse errors."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from hf_ext.sysrs.baselines import SequentialHalving, UniformAllocation
from hf_ext.sysrs.core import (
    ALGORITHMS,
    SuccessiveRejects,
    SynchronizedSuccessiveRejects,
    identify_best_model,
    make_scheduler,
)
from hf_ext.sysrs.simulation import run_scheduler


def _matrix(k: int = 6, n: int = 200, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.random((k, n)) < np.linspace(0.4, 0.8, k)[:, None]).astype(float)


def _drive(sched, S):  # noqa: ANN001, ANN202 - test helper yielding every batch
    batches = []
    while not sched.done:
        b = sched.ask()
        batches.append(b)
        sched.tell(S[np.asarray(b.model_ids)[:, None], b.query_ids])
    return batches


@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_queries_never_repeat_and_eliminated_models_never_return(algorithm: str) -> None:
    S = _matrix()
    sched = make_scheduler(algorithm, 6, 200, budget=500, seed=1)
    batches = _drive(sched, S)
    seen: dict[int, list[int]] = {}
    gone: set[int] = set()
    for b, rec in zip(batches, [h for h in sched.history if h["n_new"] > 0]):
        assert not gone & set(b.model_ids)
        assert b.query_ids.shape[0] == len(b.model_ids)
        for m, row in zip(b.model_ids, b.query_ids):
            seen.setdefault(m, []).extend(row.tolist())
        gone |= set(rec["eliminated"])
    for queries in seen.values():
        assert len(queries) == len(set(queries))
    assert sched.spent <= 500
    assert sched.spent == sum(b.query_ids.size for b in batches)


@pytest.mark.parametrize("cls", [SequentialHalving, SuccessiveRejects, UniformAllocation])
def test_synchronized_rows_identical_within_and_across_phases(cls: type) -> None:
    S = _matrix()
    sched = cls(6, 200, budget=600, synchronized=True, seed=3)
    batches = _drive(sched, S)
    order = np.concatenate([b.shared_query_ids for b in batches])
    assert len(set(order.tolist())) == len(order)
    for b in batches:
        assert (b.query_ids == b.shared_query_ids[None, :]).all()
    assert sched.history[-1]["n_seen"] == len(order)


def test_synchronized_class_is_sr_with_shared_queries() -> None:
    S = _matrix()
    a = SynchronizedSuccessiveRejects(6, 200, budget=400, seed=5)
    b = SuccessiveRejects(6, 200, budget=400, synchronized=True, seed=5)
    assert run_scheduler(S, a) == run_scheduler(S, b)
    assert a.history == b.history
    with pytest.raises(TypeError, match="`synchronized` is fixed"):
        SynchronizedSuccessiveRejects(6, 200, budget=400, synchronized=False)


def test_ask_twice_returns_the_same_batch() -> None:
    sched = SuccessiveRejects(4, 50, budget=100, seed=0)
    a, b = sched.ask(), sched.ask()
    assert a.model_ids == b.model_ids and (a.query_ids == b.query_ids).all() and a.phase == b.phase


def test_state_dict_round_trip_mid_run() -> None:
    S = _matrix(8, 300)
    full = SynchronizedSuccessiveRejects(8, 300, budget=900, seed=11)
    expected = run_scheduler(S, full)
    sched = SynchronizedSuccessiveRejects(8, 300, budget=900, seed=11)
    for _ in range(3):
        b = sched.ask()
        sched.tell(S[np.asarray(b.model_ids)[:, None], b.query_ids])
    sched.ask()  # a pending ask survives the round trip
    state = pickle.loads(pickle.dumps(sched.state_dict()))
    resumed = SynchronizedSuccessiveRejects(8, 300, budget=900, seed=999)
    resumed.load_state_dict(state)
    assert run_scheduler(S, resumed) == expected
    assert resumed.spent == full.spent and resumed.history == full.history
    with pytest.raises(ValueError, match="`state` was saved with config"):
        SuccessiveRejects(8, 300, budget=901).load_state_dict(state)


def test_zero_size_phases_add_no_queries() -> None:
    sched = SuccessiveRejects(50, 400, budget=1275, synchronized=True, seed=0)
    S = _matrix(50, 400)
    batches = _drive(sched, S)
    assert sched.history[1]["n_new"] == 0 and sched.history[1]["eliminated"]
    assert len(batches) < 49 and len(sched.history) == 49
    assert sched.spent <= 1275


def test_single_model_is_done_at_zero_cost() -> None:
    sched = SuccessiveRejects(1, 10, budget=0)
    assert sched.done and sched.recommend() == 0 and sched.spent == 0


def test_full_budget_evaluates_everything_once() -> None:
    S = _matrix(5, 40)
    for algorithm in ALGORITHMS:
        sched = make_scheduler(algorithm, 5, 40, budget=10**6, seed=0)
        assert run_scheduler(S, sched) in np.flatnonzero(S.mean(1) == S.mean(1).max())
        assert sched.spent == S.size


def test_nan_policies() -> None:
    S = np.array([[1.0, 1.0, np.nan, 0.0], [np.nan, 1.0, 1.0, 1.0]])
    zero = identify_best_model(lambda m, q: S[np.asarray(m)[:, None], q], 2, 4, budget=8, seed=0)
    drop = identify_best_model(
        lambda m, q: S[np.asarray(m)[:, None], q], 2, 4, budget=8, seed=0, nan_policy="drop_query"
    )
    assert zero.recommend() == 1  # 0.5 vs 0.75
    # drop_query keeps only the shared valid queries 1 and 3: means 0.5 vs 1.0
    assert drop.recommend() == 1 and drop.spent == 8
    assert np.isnan(drop._obs).sum() == 4  # the two NaN columns are dropped for both models


def test_score_range_and_custom_statistic() -> None:
    S = np.array([[0.0, 50.0, 100.0, 50.0], [100.0, 100.0, 0.0, 100.0]])
    sched = identify_best_model(
        lambda m, q: S[np.asarray(m)[:, None], q], 2, 4, budget=8, seed=0, score_range=(0, 100)
    )
    assert sched.recommend() == 1
    worst = identify_best_model(
        lambda m, q: S[np.asarray(m)[:, None], q] / 100,
        2,
        4,
        budget=8,
        seed=0,
        statistic=lambda obs: -obs.mean(axis=1),
    )
    assert worst.recommend() == 0


def test_recommend_allow_partial_does_not_change_the_run() -> None:
    S = _matrix()
    sched = SynchronizedSuccessiveRejects(6, 200, budget=600, seed=2)
    ref = SynchronizedSuccessiveRejects(6, 200, budget=600, seed=2)
    b = sched.ask()
    sched.tell(S[np.asarray(b.model_ids)[:, None], b.query_ids])
    assert sched.recommend(allow_partial=True) in sched.active
    assert run_scheduler(S, sched) == run_scheduler(S, ref)


# -- bad inputs --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_models": 0}, ValueError, "`n_models` must be an int >= 1, got 0"),
        ({"n_queries": 0}, ValueError, "`n_queries` must be an int >= 1, got 0"),
        (
            {"budget": 5},
            ValueError,
            "`budget` must be an int >= 6, got 5. SuccessiveRejects with n_models=5 needs budget > n_models",
        ),
        ({"budget": -1}, ValueError, "`budget` must be an int >= 0, got -1"),
        ({"n_models": 5.0}, TypeError, "`n_models` must be an int >= 1, got 5.0"),
        ({"n_queries": "10"}, TypeError, "`n_queries` must be an int >= 1, got '10'"),
        ({"budget": True}, TypeError, "`budget` must be an int >= 0, got True"),
        ({"nan_policy": "skip"}, ValueError, "`nan_policy` must be one of .* got 'skip'"),
        ({"score_range": (1, 0)}, ValueError, "`score_range` must be a pair \\(lo, hi\\) with lo < hi"),
        ({"score_range": "wide"}, TypeError, "`score_range` must be a list, got 'wide'"),
        ({"score_range": (0, float("inf"))}, ValueError, "`score_range\\[1\\]` must be a finite float"),
        ({"statistic": "median"}, ValueError, "`statistic` must be one of 'mean', got 'median'. Or pass"),
        ({"synchronized": 1}, TypeError, "`synchronized` must be a bool, got 1"),
        (
            {"schedule": "sh"},
            ValueError,
            "`schedule` must be one of 'auto', 'steep', 'sr', 'halving', got 'sh'",
        ),
    ],
)
def test_constructor_errors(kwargs: dict, error: type, match: str) -> None:
    args = {"n_models": 5, "n_queries": 10, "budget": 20} | kwargs
    with pytest.raises(error, match=match):
        SuccessiveRejects(**args)


def test_budget_minimum_per_algorithm() -> None:
    UniformAllocation(5, 10, budget=5)
    with pytest.raises(
        ValueError, match="`budget` must be an int >= 5, got 4. UniformAllocation with n_models=5 needs"
    ):
        UniformAllocation(5, 10, budget=4)
    with pytest.raises(ValueError, match="`budget` must be an int >= 6, got 5. SequentialHalving with"):
        SequentialHalving(5, 10, budget=5)
    with pytest.raises(ValueError, match="`algorithm` must be one of .* got 'ucb'"):
        make_scheduler("ucb", 5, 10, 20)


def test_protocol_misuse_errors() -> None:
    sched = SuccessiveRejects(3, 10, budget=12, seed=0)
    with pytest.raises(RuntimeError, match=r"tell\(\) was called before ask\(\)"):
        sched.tell(np.zeros((3, 1)))
    with pytest.raises(RuntimeError, match="not done"):
        sched.recommend()
    b = sched.ask()
    with pytest.raises(ValueError, match=r"`scores` must have shape \(3, 3\)"):
        sched.tell(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="`scores` must lie in \\[0, 1\\].*got 2.0"):
        sched.tell(np.full(b.query_ids.shape, 2.0))
    while not sched.done:
        sched.tell(np.zeros(sched.ask().query_ids.shape))
    with pytest.raises(RuntimeError, match="done"):
        sched.tell(np.zeros((1, 1)))
    with pytest.raises(RuntimeError, match="done"):
        sched.ask()
    with pytest.raises(ValueError, match="`statistic` must return shape"):
        s = SuccessiveRejects(3, 10, budget=12, statistic=lambda obs: obs.mean())
        s.tell(np.zeros(s.ask().query_ids.shape))
