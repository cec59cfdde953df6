"""check_estimator passes for SySRsSearchCV on classifier and regressor grids."""

from __future__ import annotations

import pytest

from hf_ext.testing import requires

pytestmark = requires("sklearn")

from sklearn.linear_model import LogisticRegression, Ridge  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from hf_ext.estimators.sysrs import SySRsSearchCV  # noqa: E402


@parametrize_with_checks(
    [
        SySRsSearchCV(LogisticRegression(), {"C": [0.1, 1.0]}, cv=2, random_state=0),
        SySRsSearchCV(LogisticRegression(), {"C": [0.01, 1.0, 10.0]}, budget=0.5, algorithm="sr", cv=2),
        SySRsSearchCV(Ridge(), {"alpha": [0.1, 1.0]}, budget=0.6, cv=2, random_state=0),
    ]
)
def test_check_estimator(estimator, check) -> None:  # noqa: ANN001
    check(estimator)


@pytest.mark.parametrize("refit", [True, False])
def test_refit_controls_prediction(refit: bool) -> None:
    from sklearn.datasets import make_classification

    X, y = make_classification(200, random_state=0)
    search = SySRsSearchCV(LogisticRegression(), {"C": [0.01, 1.0]}, refit=refit, random_state=0).fit(X, y)
    assert hasattr(search, "predict") is refit
    assert search.best_params_ == search.cv_results_["params"][search.best_index_]
