"""Spearman correlations with bootstrap intervals, the learning gate, and LearnabilityPredictor."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("sklearn")

from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from hf_ext.ca_learnability.analysis import (  # noqa: E402
    bootstrap_spearman,
    learnability_correlations,
    spearman,
)
from hf_ext.estimators.ca_learnability import LearnabilityPredictor  # noqa: E402


def test_spearman_hand_value() -> None:
    # ranks x = 1..5, y = (2, 1, 4, 3, 5): d = (1, 1, 1, 1, 0), rho = 1 - 6 * 4 / (5 * 24) = 0.8
    rho, p = spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5])
    assert rho == pytest.approx(0.8) and 0 < p < 0.2
    assert spearman([1, 2, 3], [3, 2, 1])[0] == pytest.approx(-1.0)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3])[0])
    with pytest.raises(ValueError, match="`x` and `y`"):
        spearman([1, 2], [1, 2, 3])


def test_bootstrap_interval_contains_rho() -> None:
    rng = np.random.default_rng(0)
    x = rng.random(40)
    y = x + 0.3 * rng.random(40)
    low, high = bootstrap_spearman(x, y, n_resamples=500, seed=0)
    rho = spearman(x, y)[0]
    assert low <= rho <= high and high <= 1.0 and low > 0.5
    assert bootstrap_spearman(x, y, n_resamples=500, seed=0) == (low, high)  # seeded


def _records() -> list[dict]:
    rows = []
    for i, (a, w) in enumerate([(1, 0.1), (2, 0.5), (3, 0.2), (4, 0.7), (5, 0.9)]):
        rows.append({"arch": "cnn", "as": a, "w_ge4": w, "error": 0.02 * i, "normalized_error": 0.1 * i})
        rows.append({"arch": "vit", "as": a, "w_ge4": w, "error": 0.3, "normalized_error": 1.0 + 0.01 * i})
    return rows


def test_correlations_and_gate() -> None:
    out = learnability_correlations(_records(), ["as", "w_ge4"], n_resamples=100)
    assert len(out) == 2 * 2 * 2
    cnn = {(r["target"], r["feature"]): r for r in out if r["arch"] == "cnn"}
    assert cnn["normalized_error", "as"]["rho"] == pytest.approx(1.0)
    assert cnn["normalized_error", "w_ge4"]["rho"] == pytest.approx(0.9)  # ranks 1, 3, 2, 4, 5
    assert cnn["error", "as"]["n_rules"] == 5 and cnn["error", "as"]["learned"]
    vit = [r for r in out if r["arch"] == "vit"]
    assert not any(r["learned"] for r in vit) and vit[0]["mean_normalized_error"] == pytest.approx(1.02)
    assert math.isnan(next(r for r in vit if r["target"] == "error")["rho"])  # constant error


def test_correlation_bad_inputs() -> None:
    with pytest.raises(ValueError, match=r"`records\[0\]` lacks \['junta_r0'\]"):
        learnability_correlations(_records(), ["junta_r0"])
    with pytest.raises(ValueError, match="`records`"):
        learnability_correlations([], ["as"])
    with pytest.raises(ValueError, match="`max_normalized_error`"):
        learnability_correlations(_records(), ["as"], max_normalized_error=0)


@parametrize_with_checks([LearnabilityPredictor(), LearnabilityPredictor(standardize=False)])
def test_sklearn_conformance(estimator, check) -> None:  # noqa: ANN001
    check(estimator)


def test_predictor_recovers_a_linear_law() -> None:
    rng = np.random.default_rng(0)
    X = rng.random((40, 3)) * [1, 10, 100]
    y = 0.5 * X[:, 0] - 0.02 * X[:, 2] + 0.01 * rng.standard_normal(40)
    from sklearn.linear_model import LinearRegression

    est = LearnabilityPredictor(regressor=LinearRegression()).fit(X, y)
    assert est.score(X, y) > 0.99 and est.n_features_in_ == 3
    assert est.predict(X[:2]).shape == (2,)
    with pytest.raises(ValueError, match="regressor"):
        LearnabilityPredictor(regressor="ridge").fit(X, y)
