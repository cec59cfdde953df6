"""SySRsSearchCV: fit-budget schedule, shared rows, a last phase equal to a grid search's, results, errors."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("sklearn")

from sklearn.base import BaseEstimator, ClassifierMixin, clone  # noqa: E402
from sklearn.datasets import make_classification  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import GridSearchCV, StratifiedKFold  # noqa: E402

from hf_ext.estimators.sysrs import SySRsSearchCV, fit_schedule, survivor_counts  # noqa: E402

GRID = {"C": [1e-4, 3e-4, 1e-3, 0.01, 0.1, 1.0]}


def _data(n: int = 400) -> tuple[np.ndarray, np.ndarray]:
    return make_classification(n, n_features=8, n_informative=4, flip_y=0.05, random_state=0)


def test_survivors_follow_rejects_or_halving_and_end_with_two_finalists() -> None:
    assert survivor_counts(1, "rejects", 0.3) == [1] and survivor_counts(2, "halving", 0.3) == [2]
    assert survivor_counts(9, "halving", 0.3) == [9, 5, 3, 2]
    assert survivor_counts(25, "rejects", 1 / 3) == [25, 11, 5, 2]
    assert len(survivor_counts(40, "rejects", 1.0)) == 20  # floor(budget * K / 2) phases
    assert survivor_counts(40, "rejects", 1.0)[-4:] == [5, 4, 3, 2]
    for k in range(3, 60):
        for budget in (0.05, 0.2, 1 / 3, 0.6, 1.0):
            counts = survivor_counts(k, "rejects", budget)
            assert counts[0] == k and counts[-1] == 2 and all(a > b for a, b in zip(counts, counts[1:]))


def test_rows_grow_end_on_all_rows_and_phases_cost_alike() -> None:
    counts = [25, 11, 5, 2]
    rows = fit_schedule(counts, 3000, 1 / 3, 40)
    assert rows[-1] == 3000 and rows == sorted(rows)
    costs = [c * r for c, r in zip(counts[:-1], rows[:-1])]
    assert max(costs) - min(costs) <= max(counts)  # equal up to rounding
    assert sum(c * r for c, r in zip(counts, rows)) <= 25 * 3000 / 3
    assert fit_schedule([10, 2], 100, 0.1, 30) == [30, 100]  # budget below the last phase: minimum rows


def test_two_candidates_are_exactly_a_grid_search() -> None:
    X, y = _data()
    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    grid = GridSearchCV(LogisticRegression(), {"C": [1e-3, 1.0]}, cv=cv).fit(X, y)
    search = SySRsSearchCV(LogisticRegression(), {"C": [1e-3, 1.0]}, cv=cv, random_state=0).fit(X, y)
    assert search.best_params_ == grid.best_params_ and search.best_score_ == grid.best_score_
    assert search.n_candidates_ == [2] and search.budget_used_ == 1.0
    np.testing.assert_array_equal(search.best_estimator_.coef_, grid.best_estimator_.coef_)


@pytest.mark.parametrize("algorithm", ["sysrs", "sh_synced", "sr", "sh"])
def test_last_phase_compares_the_finalists_as_the_grid_search(algorithm: str) -> None:
    X, y = _data()
    cv = StratifiedKFold(5, shuffle=True, random_state=1)
    grid = GridSearchCV(LogisticRegression(), GRID, cv=cv).fit(X, y)
    search = SySRsSearchCV(LogisticRegression(), GRID, budget=0.5, algorithm=algorithm, cv=cv, random_state=0)
    search.fit(X, y)
    res = search.cv_results_
    last = np.flatnonzero(res["iter"] == search.n_iterations_ - 1)
    assert len(last) == 2 and (res["n_resources"][last] == 400).all()
    for i in last:  # a finalist's full-data scores are the grid search's, fold by fold
        j = grid.cv_results_["params"].index(res["params"][i])
        for f in range(5):
            assert res[f"split{f}_test_score"][i] == grid.cv_results_[f"split{f}_test_score"][j]
    if grid.best_params_ in [res["params"][i] for i in last]:
        assert search.best_params_ == grid.best_params_ and search.best_score_ == grid.best_score_


def test_cv_results_history_and_budget_agree() -> None:
    X, y = _data()
    search = SySRsSearchCV(LogisticRegression(), GRID, budget=0.5, random_state=0).fit(X, y)
    res = search.cv_results_
    assert len(res["params"]) == sum(search.n_candidates_) == len(res["mean_test_score"])
    assert search.n_candidates_ == [len(h["survivors"]) for h in search.history_]
    assert search.n_resources_ == [h["n_resources"] for h in search.history_] == sorted(search.n_resources_)
    assert res["rank_test_score"][search.best_index_] == 1 and sorted(res["rank_test_score"]) == list(
        range(1, len(res["params"]) + 1)
    )
    assert res["params"][search.best_index_] == search.best_params_
    assert list(res["param_C"]) == [p["C"] for p in res["params"]]
    for h, nxt in zip(search.history_, search.history_[1:]):
        assert sorted(set(h["survivors"]) - set(h["eliminated"])) == nxt["survivors"]
    expected = sum(c * r for c, r in zip(search.n_candidates_, search.n_resources_)) / (6 * 400)
    assert search.budget_used_ == pytest.approx(expected, rel=0.02) and search.budget_used_ <= 0.5
    assert {"mean_fit_time", "std_fit_time", "mean_score_time", "std_test_score"} <= set(res)


class _RowRecorder(ClassifierMixin, BaseEstimator):
    """Records which rows (ids in column 0) it was fitted on, keyed by its parameter ``tag``."""

    fitted: list[tuple[float, tuple[int, ...]]] = []  # noqa: RUF012

    def __init__(self, tag: float = 0.0) -> None:
        self.tag = tag

    def fit(self, X: np.ndarray, y: np.ndarray) -> _RowRecorder:
        self.fitted.append((self.tag, tuple(sorted(X[:, 0].astype(int)))))
        self.classes_ = np.unique(y)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.full(len(X), self.classes_[0]) if self.tag < 0.5 else (X[:, 1] > 0).astype(int)


@pytest.mark.parametrize(("algorithm", "shared"), [("sysrs", True), ("sh_synced", True), ("sh", False)])
def test_survivors_of_a_phase_are_fitted_on_the_same_rows(algorithm: str, shared: bool) -> None:
    _, y = _data(300)
    X = np.column_stack([np.arange(300), y * 2.0 - 1.0])
    _RowRecorder.fitted = []
    tags = [0.1, 0.2, 0.3, 0.6, 0.7]
    SySRsSearchCV(_RowRecorder(), {"tag": tags}, budget=0.6, algorithm=algorithm, random_state=0).fit(X, y)
    first_phase = [rows for _, rows in _RowRecorder.fitted[: 5 * len(tags)]]  # 5 folds per candidate
    same = all(first_phase[f] == first_phase[c * 5 + f] for c in range(len(tags)) for f in range(5))
    assert same is shared
    assert len(first_phase[0]) < 240  # a subset of the 4 training folds' rows


def test_clone_get_params_and_refit() -> None:
    search = SySRsSearchCV(LogisticRegression(), GRID, budget=0.4, algorithm="sh_synced", random_state=3)
    copy = clone(search)
    assert type(copy.estimator) is LogisticRegression and copy.estimator is not search.estimator
    assert {k: v for k, v in copy.get_params(deep=False).items() if k != "estimator"} == {
        k: v for k, v in search.get_params(deep=False).items() if k != "estimator"
    }
    assert search.set_params(budget=0.5).budget == 0.5
    X, y = _data()
    no_refit = SySRsSearchCV(LogisticRegression(), GRID, refit=False, random_state=0).fit(X, y)
    with pytest.raises(AttributeError, match="has no attribute .predict."):
        no_refit.predict(X)
    refit = clone(no_refit).set_params(refit=True).fit(X, y)
    assert refit.best_params_ == no_refit.best_params_
    assert refit.score(X, y) == refit.best_estimator_.score(X, y)


def test_bad_inputs() -> None:
    X, y = _data(100)
    with pytest.raises(ValueError, match="The 'budget' parameter"):
        SySRsSearchCV(LogisticRegression(), GRID, budget=1.5).fit(X, y)
    with pytest.raises(ValueError, match="The 'budget' parameter"):
        SySRsSearchCV(LogisticRegression(), GRID, budget=0).fit(X, y)
    with pytest.raises(ValueError, match="The 'algorithm' parameter"):
        SySRsSearchCV(LogisticRegression(), GRID, algorithm="uniform").fit(X, y)
    with pytest.raises(ValueError, match="The 'min_resources' parameter"):
        SySRsSearchCV(LogisticRegression(), GRID, min_resources=0).fit(X, y)
    with pytest.raises(ValueError, match=r"`param_grid` must hold at least one candidate"):
        SySRsSearchCV(LogisticRegression(), [], budget=0.5).fit(X, y)
    with pytest.raises(TypeError, match="n_candidates"):
        survivor_counts(2.5, "rejects", 0.3)  # type: ignore[arg-type]
