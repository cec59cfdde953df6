"""scikit-learn's own conformance checks on every estimator the registry ships.

The estimators are the registry's public classes that live in the `estimators` pillar
(``hf_ext.estimators.*``), built at their defaults; parameters without a default take the values in
``REQUIRED``. A public ``BaseEstimator`` with a ``fit`` outside the pillar must say in ``NOT_ESTIMATORS``
why it is not a fit/predict estimator.
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
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from hf_ext import _availability  # noqa: E402
from hf_ext._registry import methods  # noqa: E402

REQUIRED: dict[str, dict[str, Any]] = {
    "SySRsSearchCV": {"estimator": LogisticRegression(), "param_grid": {"C": [0.1, 1.0]}},
}
NOT_ESTIMATORS = {
    "BestModelIdentifier": "a selector over a score matrix, select(scores, budget); its fit is deprecated",
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


@parametrize_with_checks([cls(**REQUIRED.get(cls.__name__, {})) for cls in ESTIMATOR_CLASSES])
def test_check_estimator(estimator, check):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`y` labels")  # string labels map to 0/1, warned
        check(estimator)
