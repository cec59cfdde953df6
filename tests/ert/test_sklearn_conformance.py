"""scikit-learn contract for CoverageAuditor and the legacy partition auditors.

All five pass every check with no expected failure (non-0/1 string labels are accepted with a warning; the
larger
class ``classes_[1]`` means covered).
"""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("metrics", "sklearn")

sklearn = pytest.importorskip("sklearn")
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from hf_ext.estimators.conditional_coverage import (  # noqa: E402
    CovGapAuditor,
    EqualOpportunityAuditor,
    SizeStratifiedAuditor,
    WorstSlabAuditor,
)
from hf_ext.estimators.ert import CoverageAuditor  # noqa: E402


@parametrize_with_checks(
    [
        CoverageAuditor(classifier=LogisticRegression()),
        CovGapAuditor(n_groups=4),
        SizeStratifiedAuditor(num_groups=4),
        EqualOpportunityAuditor(num_groups=4),
        WorstSlabAuditor(num_directions=10),
    ]
)
def test_sklearn_compatible(estimator, check):
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`y` labels")
        check(estimator)


def test_string_labels_warn_and_map_the_larger_class_to_covered():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    y = np.where(rng.random(200) < 0.8, "yes", "no")
    with pytest.warns(UserWarning, match="treating 'yes' as 'covered'"):
        auditor = CoverageAuditor(classifier=LogisticRegression()).fit(X, y)
    assert list(auditor.classes_) == ["no", "yes"]
    assert auditor.predict_proba(X)[:, 1].mean() == pytest.approx(0.8, abs=0.05)


def test_score_before_fit_raises_not_fitted():
    from sklearn.exceptions import NotFittedError

    for est in (CoverageAuditor(), CovGapAuditor(), WorstSlabAuditor()):
        with pytest.raises(NotFittedError):
            est.score(np.zeros((3, 2)), [0, 1, 1])


def test_auditor_grid_search_prefers_the_more_powerful_classifier():
    from sklearn.dummy import DummyClassifier
    from sklearn.model_selection import GridSearchCV

    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, (1500, 2))
    z = (rng.random(1500) < np.where(X[:, 0] > 0.3, 0.7, 0.99)).astype(int)
    grid = GridSearchCV(
        CoverageAuditor(), {"classifier": [DummyClassifier(), LogisticRegression()]}, cv=3
    ).fit(X, z)
    assert isinstance(grid.best_params_["classifier"], LogisticRegression)


def test_partition_auditors_score_held_out_metrics():
    rng = np.random.default_rng(2)
    X = rng.uniform(-1, 1, (2000, 2))
    z = (rng.random(2000) < np.where(X[:, 0] > 0.3, 0.7, 0.99)).astype(int)
    gap = CovGapAuditor(n_groups=8).fit(X[:1000], z[:1000]).score(X[1000:], z[1000:])
    wsc = WorstSlabAuditor(num_directions=50).fit(X[:1000], z[:1000]).score(X[1000:], z[1000:])
    assert gap > 0.05 and wsc < 0.8
    sizes = np.c_[np.where(X[:, 0] > 0.3, 1, 2)]
    assert (
        SizeStratifiedAuditor(reduction="min").fit(sizes[:1000], z[:1000]).score(sizes[1000:], z[1000:]) < 0.8
    )
