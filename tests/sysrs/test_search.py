"""SySRsSearchCV: the selector's run on the out-of-fold score matrix, budgets, scores, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("sklearn")

from sklearn.datasets import make_classification, make_regression  # noqa: E402
from sklearn.linear_model import LogisticRegression, Ridge  # noqa: E402
from sklearn.model_selection import ShuffleSplit, StratifiedKFold, cross_val_predict  # noqa: E402

from hf_ext.estimators.sysrs import SySRsSearchCV  # noqa: E402
from hf_ext.sysrs.selector import BestModelIdentifier  # noqa: E402

GRID = {"C": [0.0005, 0.003, 0.02, 0.1, 1.0]}


def _data() -> tuple[np.ndarray, np.ndarray]:
    return make_classification(300, n_features=8, n_informative=4, flip_y=0.1, random_state=0)


@pytest.mark.parametrize(("algorithm", "budget", "seed"), [("sysrs", 400, 0), ("sr", 700, 3), ("sh", 500, 1)])
def test_same_run_as_the_selector_on_the_out_of_fold_matrix(algorithm: str, budget: int, seed: int) -> None:
    X, y = _data()
    search = SySRsSearchCV(LogisticRegression(), GRID, budget=budget, algorithm=algorithm, random_state=seed)
    search.fit(X, y)
    S = np.array(
        [cross_val_predict(LogisticRegression(C=c), X, y, cv=StratifiedKFold(5)) == y for c in GRID["C"]],
        dtype=float,
    )
    selector = BestModelIdentifier(algorithm, random_state=seed)
    assert search.best_index_ == selector.select(S, budget) and search.best_params_ == {
        "C": GRID["C"][search.best_index_]
    }
    assert search.budget_used_ == selector.budget_used_ == search.evaluations_.sum() <= budget
    assert search.history_ == selector.history_
    assert search.n_candidates_ == 5 and search.n_splits_ == 5


def test_full_budget_is_the_grid_search_argmax_and_refits() -> None:
    X, y = _data()
    search = SySRsSearchCV(LogisticRegression(), GRID, random_state=0).fit(X, y)
    oof = [np.mean(cross_val_predict(LogisticRegression(C=c), X, y, cv=5) == y) for c in GRID["C"]]
    assert search.budget_used_ == 5 * 300 and (search.evaluations_ == 300).all()
    np.testing.assert_allclose(search.mean_scores_, oof)
    assert search.best_index_ == int(np.argmax(oof))
    assert search.best_estimator_.C == GRID["C"][search.best_index_]
    assert search.score(X, y) == search.best_estimator_.score(X, y)
    np.testing.assert_array_equal(search.classes_, [0, 1])


def test_fractional_budget_is_a_share_of_every_evaluation_raised_to_the_minimum() -> None:
    X, y = _data()
    assert SySRsSearchCV(LogisticRegression(), GRID, budget=0.2).fit(X, y).budget_used_ <= 300
    tiny = SySRsSearchCV(LogisticRegression(), GRID, budget=1e-6, algorithm="sr", random_state=0).fit(X, y)
    assert 0 < tiny.budget_used_ <= 6  # raised to n_candidates + 1


def test_regressor_default_score_is_bounded_and_custom_scores_apply() -> None:
    X, y = make_regression(120, n_features=5, noise=5.0, random_state=0)
    search = SySRsSearchCV(Ridge(), {"alpha": [0.1, 1e4]}, random_state=0).fit(X, y)
    assert (
        search.best_params_ == {"alpha": 0.1}
        and ((0 <= search.mean_scores_) & (search.mean_scores_ <= 1)).all()
    )
    worst = SySRsSearchCV(
        Ridge(), {"alpha": [0.1, 1e4]}, query_score=lambda t, p: 1.0 - (np.abs(t - p) < 10), random_state=0
    ).fit(X, y)
    assert worst.best_params_ == {"alpha": 1e4}


def test_bad_inputs() -> None:
    X, y = _data()
    with pytest.raises(ValueError, match="requires y to be passed"):
        SySRsSearchCV(LogisticRegression(), GRID).fit(X, None)
    with pytest.raises(ValueError, match="The 'budget' parameter"):
        SySRsSearchCV(LogisticRegression(), GRID, budget=1.5).fit(X, y)
    with pytest.raises(ValueError, match="The 'algorithm' parameter"):
        SySRsSearchCV(LogisticRegression(), GRID, algorithm="ucb").fit(X, y)
    with pytest.raises(ValueError, match=r"`budget` must be an int >= 6, got 3"):
        SySRsSearchCV(LogisticRegression(), GRID, budget=3).fit(X, y)
    with pytest.raises(ValueError, match=r"`cv` must put every sample in a test fold"):
        SySRsSearchCV(LogisticRegression(), GRID, cv=ShuffleSplit(2, test_size=0.2, random_state=0)).fit(X, y)
    with pytest.raises(ValueError, match=r"`query_score` must return one score per sample"):
        SySRsSearchCV(LogisticRegression(), GRID, query_score=lambda t, p: 1.0).fit(X, y)
    with pytest.raises(ValueError, match=r"must lie in \[0, 1\]"):
        SySRsSearchCV(LogisticRegression(), GRID, query_score=lambda t, p: 2.0 * (t == p)).fit(X, y)
    with pytest.raises(AttributeError, match="has no attribute 'predict'"):
        SySRsSearchCV(LogisticRegression(), GRID, refit=False).fit(X, y).predict(X)
