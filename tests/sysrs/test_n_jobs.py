"""SySRsSearchCV fits each phase's candidates x folds through joblib: two workers pick and score as one."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = [requires("sklearn"), pytest.mark.distributed]

from sklearn.datasets import make_classification  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from hf_ext.estimators.sysrs import SySRsSearchCV  # noqa: E402


def _fit(n_jobs: int | None) -> SySRsSearchCV:
    X, y = make_classification(300, n_features=8, n_informative=4, flip_y=0.1, random_state=0)
    grid = {"C": [0.0005, 0.003, 0.02, 0.1, 1.0]}
    return SySRsSearchCV(LogisticRegression(), grid, budget=0.5, random_state=0, n_jobs=n_jobs).fit(X, y)


@pytest.mark.slow  # starts a two-process joblib pool
def test_two_workers_equal_one() -> None:
    one, two = _fit(1), _fit(2)
    assert one.best_index_ == two.best_index_
    assert one.history_ == two.history_
    np.testing.assert_array_equal(one.cv_results_["mean_test_score"], two.cv_results_["mean_test_score"])
    np.testing.assert_array_equal(one.best_estimator_.coef_, two.best_estimator_.coef_)


def test_a_joblib_backend_context_applies() -> None:
    from joblib import parallel_config

    with parallel_config(backend="threading", n_jobs=2):
        threaded = _fit(None)
    assert threaded.best_index_ == _fit(1).best_index_


@pytest.mark.parametrize(("value", "error"), [(0, ValueError), (1.5, ValueError), ("2", ValueError)])
def test_bad_n_jobs_names_the_argument(value: object, error: type[Exception]) -> None:
    X, y = make_classification(60, random_state=0)
    with pytest.raises(error, match="n_jobs"):
        SySRsSearchCV(LogisticRegression(), {"C": [1.0]}, n_jobs=value).fit(X, y)  # type: ignore[arg-type]
