"""Numerical cross-check against the public ``covmetrics`` 0.1.2 package (skipped when it is not installed).

covmetrics quirks handled here: its torch branch of ``logloss`` returns +log-likelihood (KL-ERT with the wrong
sign), and it casts predicted probabilities to the feature dtype (integer features give h = 0). We therefore
feed it float64 numpy features only.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("metrics", "sklearn")
covmetrics = pytest.importorskip("covmetrics")

KEY_MAP = {
    "l1": "ERT_L1_miscoverage",
    "l2": "ERT_brier_score",
    "kl": "ERT_logloss",
    "l1_over": "ERT_L1_miscoverage_over",
    "l1_under": "ERT_L1_miscoverage_under",
    "l2_over": "ERT_brier_score_over",
    "l2_under": "ERT_brier_score_under",
    "kl_over": "ERT_logloss_over",
    "kl_under": "ERT_logloss_under",
}


def _data(n: int = 800, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rows already in hf-ext's seeded order (seed 42, the default ``random_state``), so that covmetrics
    (which draws its folds over the rows as given) and hf-ext (which draws them over that order) use the same
    folds."""
    from hf_ext.ert.inputs import shuffled_order

    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, 3))
    z = (rng.random(n) < np.where(x[:, 0] > 0.3, 0.75, 0.95)).astype(np.float64)
    order = shuffled_order(42, x, z, np.full(n, 0.9))
    return x[order], z[order]


@pytest.mark.filterwarnings("ignore")
def test_all_nine_ert_values_match_covmetrics():
    from sklearn.linear_model import LogisticRegression

    from hf_ext.ert.core import cross_fit_ert

    x, z = _data()
    ref = covmetrics.ERT(LogisticRegression).evaluate_multiple_losses(
        x, z, alpha=0.1, n_splits=5, random_state=42
    )
    ours = cross_fit_ert(x, z, np.full(z.size, 0.9), LogisticRegression(), 5, 42)
    for key, ref_key in KEY_MAP.items():
        assert ours[key] == pytest.approx(float(ref[ref_key]), abs=1e-10), key


@pytest.mark.filterwarnings("ignore")
def test_per_sample_alpha_matches_covmetrics():
    from sklearn.linear_model import LogisticRegression

    from hf_ext.metrics.functional.ert import excess_risk_target_coverage

    x, z = _data(seed=1)
    alpha = np.random.default_rng(1).uniform(0.05, 0.2, z.size)
    ref = covmetrics.ERT(LogisticRegression).evaluate(x, z, alpha=alpha, n_splits=5, random_state=42)
    ours = excess_risk_target_coverage(x, z, target_coverage=1 - alpha, classifier=LogisticRegression())
    assert float(ours) == pytest.approx(ref, abs=1e-10)


def test_covmetrics_torch_logloss_has_the_documented_sign_bug():
    """Documented pitfall: covmetrics' torch logloss is +log-likelihood, so its torch KL-ERT flips sign."""
    import torch

    from hf_ext.metrics.functional.ert import ert_from_predictions

    ert_module = importlib.import_module("covmetrics.ERT")  # the package attribute `ERT` is the class
    logloss = importlib.import_module("covmetrics.losses").logloss
    h, z = np.array([0.95, 0.5, 0.95, 0.8]), np.array([1.0, 0.0, 1.0, 1.0])
    numpy_kl = ert_module.evaluate_with_predictions(h, z, 0.1, loss=logloss)
    torch_kl = ert_module.evaluate_with_predictions(torch.tensor(h), torch.tensor(z), 0.1, loss=logloss)
    ours = float(ert_from_predictions(torch.tensor(h), torch.tensor(z), 0.9, loss="kl"))
    assert ours == pytest.approx(numpy_kl, abs=1e-6)
    assert float(torch_kl) == pytest.approx(-ours, abs=1e-4)


@pytest.mark.parametrize("weighted", [False, True])
def test_covgap_fsc_match(weighted):
    from hf_ext.metrics.functional.conditional_coverage import coverage_gap, feature_stratified_coverage

    rng = np.random.default_rng(2)
    groups, z = rng.integers(0, 7, 500), (rng.random(500) < 0.85).astype(float)
    ref = covmetrics.CovGap(alpha=0.1).evaluate(groups, z, weighted=weighted)
    assert float(coverage_gap(groups, z, alpha=0.1, weighted=weighted)) == pytest.approx(ref, abs=1e-12)
    assert float(feature_stratified_coverage(groups, z)) == pytest.approx(
        covmetrics.FSC().evaluate(groups, z), abs=1e-12
    )


def test_ssc_and_eoc_match_with_identical_groups():
    from hf_ext.metrics.functional.conditional_coverage import (
        equal_opportunity_coverage,
        size_stratified_coverage,
    )

    rng = np.random.default_rng(3)
    sizes, z = rng.integers(1, 6, 400).astype(float), (rng.random(400) < 0.85).astype(float)
    assert float(size_stratified_coverage(sizes, z, alpha=0.1)) == pytest.approx(
        covmetrics.SSC(alpha=0.1).evaluate(sizes, z), abs=1e-12
    )
    assert float(size_stratified_coverage(sizes, z, reduction="min")) == pytest.approx(
        covmetrics.SSC(alpha=0.1).evaluate_FSC(sizes, z), abs=1e-12
    )
    labels = rng.integers(0, 4, 400)
    assert float(equal_opportunity_coverage(labels, z, alpha=0.1, weighted=True)) == pytest.approx(
        covmetrics.EOC(alpha=0.1).evaluate(labels, z, weighted=True), abs=1e-12
    )


def test_wsc_matches_covmetrics_same_directions():
    from hf_ext.metrics.functional.conditional_coverage import worst_slab_coverage

    rng = np.random.default_rng(4)
    x, z = rng.normal(size=(250, 3)), (rng.random(250) < 0.85).astype(float)
    ref = covmetrics.WSC().evaluate(x, z, delta=0.1, M=50, seed=42)
    assert float(worst_slab_coverage(x, z, delta=0.1, num_directions=50, seed=42)) == pytest.approx(
        ref, abs=1e-12
    )


def test_pearson_and_hsic_match():
    from hf_ext.metrics.functional.conditional_coverage import size_coverage_correlation

    rng = np.random.default_rng(5)
    sizes = rng.integers(1, 6, 300).astype(float)
    z = (rng.random(300) < 0.7 + 0.04 * sizes).astype(float)
    assert float(size_coverage_correlation(sizes, z)) == pytest.approx(
        covmetrics.PearsonCorrelation().evaluate(sizes, z), abs=1e-12
    )
    assert float(size_coverage_correlation(sizes, z, method="hsic")) == pytest.approx(
        covmetrics.HSIC().evaluate(sizes, z), rel=1e-9
    )
