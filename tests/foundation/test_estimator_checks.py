"""scikit-learn's own conformance checks on every estimator the registry ships.

The estimators are the registry's public classes that live in the `estimators` pillar
(``hf_ext.estimators.*``), built at their defaults; parameters without a default take the values in
``REQUIRED``. A public ``BaseEstimator`` with a ``fit`` outside the pillar must say in ``NOT_ESTIMATORS``
why it is not a fit/predict estimator; a check failed by design is listed, with its reason, in
``EXPECTED_FAILED``.
"""

from __future__ import annotations

import importlib
import inspect
import warnings
from typing import Any

import pytest

from hf_ext.testing import requires

pytestmark = requires("sklearn")

pytest.importorskip("sklearn")
from sklearn.base import BaseEstimator  # noqa: E402
from sklearn.ensemble import HistGradientBoostingClassifier  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from hf_ext import _availability  # noqa: E402
from hf_ext._registry import methods  # noqa: E402

REQUIRED: dict[str, dict[str, Any]] = {
    "SySRsSearchCV": {"estimator": LogisticRegression(), "param_grid": {"C": [0.1, 1.0]}},
}
NOT_ESTIMATORS = {
    "EncoderFeatures": "a frozen pretrained encoder (texts or images in, embeddings out); fit learns nothing",
}
# Estimators whose defaults are sized for real workloads run the checks at these small settings: MVProbe's
# encoder has 33M parameters at its paper defaults; the coverage auditor's default classifier is a 200-round
# gradient boosting fitted four times (3 calibration folds + refit), here one HGB of 10 rounds, which keeps
# the NaN support the checks exercise (the "hgb" default itself is fitted by tests/ert).
CHECK_PARAMS: dict[str, dict[str, Any]] = {
    name: {"n_probes": 4, "proj_dim": 4, "rep_dim": 8, "max_epochs": 15, "lr": 2e-2, "random_state": 0}
    for name in ("MVProbeClassifier", "ProbeXClassifier")
}
CHECK_PARAMS["CoverageAuditor"] = {
    "classifier": HistGradientBoostingClassifier(max_iter=10, max_leaf_nodes=15)
}
# Checks an estimator fails by design, with the reason (scikit-learn exempts its own cases by name).
EXPECTED_FAILED: dict[str, dict[str, str]] = {
    name: {
        "check_classifiers_classes": "-1 marks unlabelled rows, as in SelfTrainingClassifier "
        "(which scikit-learn exempts by name)"
    }
    for name in ("PriorALClassifier", "ActiveLearnerClassifier")
}


def _public_classes() -> list[tuple[str, type]]:
    found = []
    for info in methods().values():
        if any(_availability.missing(extra) for extra in info.extras):
            continue
        for name, module in info.public.items():
            obj = getattr(importlib.import_module(module), name)
            if inspect.isclass(obj) and issubclass(obj, BaseEstimator):
                found.append((module, obj))
    return found


def _required(cls: type) -> list[str]:
    params = inspect.signature(cls.__init__).parameters.values()  # type: ignore[misc]
    return [
        p.name
        for p in params
        if p.name != "self" and p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD
    ]


ESTIMATOR_CLASSES = [cls for module, cls in _public_classes() if module.startswith("hf_ext.estimators.")]


def test_every_fitting_estimator_lives_in_the_pillar_or_says_why_not():
    outside = {
        cls.__name__
        for module, cls in _public_classes()
        if hasattr(cls, "fit") and not module.startswith("hf_ext.estimators.")
    }
    assert outside == set(NOT_ESTIMATORS)


@pytest.mark.parametrize("cls", ESTIMATOR_CLASSES, ids=lambda c: c.__name__)
def test_required_parameters_have_example_values(cls):
    assert set(_required(cls)) == set(REQUIRED.get(cls.__name__, {}))


def _instance(cls: type) -> Any:
    return cls(**REQUIRED.get(cls.__name__, {}), **CHECK_PARAMS.get(cls.__name__, {}))


@parametrize_with_checks(
    [_instance(cls) for cls in ESTIMATOR_CLASSES],
    expected_failed_checks=lambda est: EXPECTED_FAILED.get(type(est).__name__, {}),
)
def test_check_estimator(estimator, check):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`y` labels")  # string labels map to 0/1, warned
        check(estimator)
