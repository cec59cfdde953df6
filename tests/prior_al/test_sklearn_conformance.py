"""scikit-learn's estimator checks on both pool learners (sklearn exempts SelfTrainingClassifier from
``check_classifiers_classes`` by name for the same reason: -1 marks unlabelled rows)."""

from __future__ import annotations

import pytest

pytest.importorskip("sklearn")
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from hf_ext.estimators.prior_al import ActiveLearnerClassifier, PriorALClassifier  # noqa: E402

EXPECTED = {"check_classifiers_classes": "-1 marks unlabelled rows, as in SelfTrainingClassifier"}


@parametrize_with_checks(
    [
        PriorALClassifier(estimator=LogisticRegression(max_iter=200)),
        ActiveLearnerClassifier(estimator=LogisticRegression(max_iter=200)),
    ],
    expected_failed_checks=lambda est: EXPECTED,
)
def test_sklearn_checks(estimator, check):
    check(estimator)
