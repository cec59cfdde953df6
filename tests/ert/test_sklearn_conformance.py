"""scikit-learn contract for every ERT estimator: ``check_estimator`` with no expected failure.

The registry's estimators are checked by ``tests/foundation/test_estimator_checks.py`` (this auditor there
with a 10-round HGB); this file checks the coverage auditor with a random forest (its NaN support comes from
the forest's tags) and with a logistic regression (no NaN support). Non-0/1 string labels are accepted with a
warning; the larger class ``classes_[1]`` means covered.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("metrics", "sklearn")

sklearn = pytest.importorskip("sklearn")
from sklearn.dummy import DummyClassifier  # noqa: E402
from sklearn.ensemble import RandomForestClassifier  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from hf_ext._registry import methods  # noqa: E402
from hf_ext.estimators.conditional_coverage import CovGapAuditor, WorstSlabAuditor  # noqa: E402
from hf_ext.estimators.ert import CoverageAuditor  # noqa: E402

# Every registered estimator is checked by tests/foundation/test_estimator_checks.py; these are the
# coverage auditor's other classifiers (NaN support from the forest's tags, none for the logistic regression).
ESTIMATORS = [
    CoverageAuditor(classifier=RandomForestClassifier(n_estimators=10)),
    CoverageAuditor(classifier=LogisticRegression()),
]


def test_every_registered_estimator_is_walked_by_the_registry_check():
    public = methods()["ert"].public
    registered = {name for name, module in public.items() if module.startswith("hf_ext.estimators.")}
    assert registered == {
        "CoverageAuditor",
        "CovGapAuditor",
        "WorstSlabAuditor",
        "SizeStratifiedAuditor",
        "EqualOpportunityAuditor",
    }


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`y` labels")
        check(estimator)


def test_nan_support_follows_the_classifier():
    from sklearn.utils import get_tags

    assert get_tags(CoverageAuditor()).input_tags.allow_nan
    assert get_tags(CoverageAuditor(classifier=RandomForestClassifier())).input_tags.allow_nan
    assert not get_tags(CoverageAuditor(classifier=LogisticRegression())).input_tags.allow_nan
    X = np.random.default_rng(0).normal(size=(40, 2))
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        CoverageAuditor(classifier=LogisticRegression()).fit(X, np.arange(40) % 2)
    CoverageAuditor(n_splits=2).fit(X, np.arange(40) % 2)


def test_unset_seeds_of_a_classifier_are_the_auditors():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 3)), rng.integers(0, 2, 200)
    first = CoverageAuditor(classifier=RandomForestClassifier(n_estimators=5), random_state=3).fit(X, y)
    again = CoverageAuditor(classifier=RandomForestClassifier(n_estimators=5), random_state=3).fit(X, y)
    assert first.classifier_.random_state == 3
    np.testing.assert_array_equal(first.predict_proba(X), again.predict_proba(X))


def test_string_labels_warn_and_map_the_larger_class_to_covered():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    y = np.where(rng.random(200) < 0.8, "yes", "no")
    with pytest.warns(UserWarning, match="treating 'yes' as 'covered'"):
        auditor = CoverageAuditor(classifier=LogisticRegression()).fit(X, y)
    assert list(auditor.classes_) == ["no", "yes"]
    assert auditor.predict_proba(X)[:, 1].mean() == pytest.approx(0.8, abs=0.05)


def test_score_p_value_and_summary_before_fit_raise_not_fitted():
    from sklearn.exceptions import NotFittedError

    for est in (CoverageAuditor(), CovGapAuditor(), WorstSlabAuditor()):
        with pytest.raises(NotFittedError):
            est.score(np.zeros((3, 2)), [0, 1, 1])
    for method in ("p_value", "summary"):
        with pytest.raises(NotFittedError):
            getattr(CoverageAuditor(), method)(np.zeros((3, 2)), [0, 1, 1])


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
    from hf_ext.estimators.conditional_coverage import SizeStratifiedAuditor

    rng = np.random.default_rng(2)
    X = rng.uniform(-1, 1, (2000, 2))
    z = (rng.random(2000) < np.where(X[:, 0] > 0.3, 0.7, 0.99)).astype(int)
    gap = CovGapAuditor(n_groups=8).fit(X[:1000], z[:1000])
    wsc = WorstSlabAuditor(num_directions=50).fit(X[:1000], z[:1000])
    assert gap.statistic(X[1000:], z[1000:]) > 0.05 and wsc.statistic(X[1000:], z[1000:]) < 0.8
    assert gap.score(X[1000:], z[1000:]) == gap.statistic(X[1000:], z[1000:])
    assert wsc.score(X[1000:], z[1000:]) == pytest.approx(0.9 - wsc.statistic(X[1000:], z[1000:]), abs=1e-15)
    sizes = np.c_[np.where(X[:, 0] > 0.3, 1, 2)]
    ssc = SizeStratifiedAuditor(reduction="min").fit(sizes[:1000], z[:1000])
    assert ssc.statistic(sizes[1000:], z[1000:]) < 0.8
    assert ssc.score(sizes[1000:], z[1000:]) == pytest.approx(0.9 - ssc.statistic(sizes[1000:], z[1000:]))


def _miscovered_slab(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Coverage 0.5 on the slab x0 > 0.8 (10% of the mass), 0.95 elsewhere."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 2))
    return X, (rng.random(n) < np.where(X[:, 0] > 0.8, 0.5, 0.95)).astype(int)


@pytest.mark.parametrize(
    "make, grid, best",
    [
        (lambda: WorstSlabAuditor(num_directions=50), {"delta": [0.1, 0.9]}, 0.1),
        (lambda: CovGapAuditor(reduction="min"), {"n_groups": [1, 16]}, 16),
        (lambda: CovGapAuditor(), {"n_groups": [1, 16]}, 16),
        (lambda: CoverageAuditor(), {"classifier": [DummyClassifier(), LogisticRegression()]}, "lr"),
    ],
)
def test_one_score_sign_grid_search_picks_the_more_powerful_setting(make, grid, best):
    """Every auditor's score is higher = stronger evidence, so GridSearchCV picks the setting that sees the
    miscovered slab: the thin slab (not one of 90% mass), 16 cells (not one), a real classifier."""
    from sklearn.model_selection import GridSearchCV

    X, z = _miscovered_slab(1500, 3)
    search = GridSearchCV(make(), grid, cv=3).fit(X, z)
    picked = next(iter(search.best_params_.values()))
    assert isinstance(picked, LogisticRegression) if best == "lr" else picked == best
    low, high = sorted(search.cv_results_["mean_test_score"])
    assert high > low + 0.02
