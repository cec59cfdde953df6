"""ERT and legacy-metric math on hand-computed, population and reference cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("metrics", "sklearn")

TAU = 0.9
H = np.array([0.95, 0.5, 0.95, 0.8])
Z = np.array([1.0, 0.0, 1.0, 1.0])
HAND = {  # loss: (total, over, under), tau = 0.9, natural log
    "l1": (0.25, 0.05, 0.20),
    "l2": (0.13625, 0.00375, 0.1325),
    "kl": (0.399947, 0.027034, 0.372914),
}


@pytest.mark.parametrize("loss", ["l1", "l2", "kl"])
def test_hand_computed_values(loss):
    from hf_ext.ert.core import per_sample_excess_risk

    for side, expected in zip(("both", "over", "under"), HAND[loss]):
        assert per_sample_excess_risk(H, Z, TAU, loss, side).mean() == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("loss", ["l1", "l2", "kl"])
def test_constant_prediction_gives_exactly_zero(loss):
    from hf_ext.ert.core import per_sample_excess_risk

    for side in ("both", "over", "under"):
        assert np.all(per_sample_excess_risk(np.full(4, TAU), Z, TAU, loss, side) == 0.0)


@pytest.mark.parametrize("loss", ["l1", "l2", "kl"])
def test_over_plus_under_equals_total_per_sample(loss):
    from hf_ext.ert.core import per_sample_excess_risk

    rng = np.random.default_rng(0)
    h, z, tau = rng.random(500), (rng.random(500) < 0.8).astype(float), rng.uniform(0.05, 0.95, 500)
    total = per_sample_excess_risk(h, z, tau, loss)
    parts = per_sample_excess_risk(h, z, tau, loss, "over") + per_sample_excess_risk(h, z, tau, loss, "under")
    np.testing.assert_array_equal(parts, total)


def _true_divergences(p: np.ndarray, tau: float) -> dict[str, float]:
    kl = p * np.log(p / tau) + (1 - p) * np.log((1 - p) / (1 - tau))
    return {"l1": np.mean(np.abs(p - tau)), "l2": np.mean((p - tau) ** 2), "kl": np.mean(kl)}


@pytest.mark.parametrize("loss", ["l1", "l2", "kl"])
def test_oracle_classifier_recovers_the_population_divergence(loss):
    from hf_ext.ert.core import per_sample_excess_risk

    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, 1_000_000)
    p = 0.9 + 0.08 * np.tanh(3 * x)
    z = (rng.random(x.size) < p).astype(float)
    value = per_sample_excess_risk(p, z, TAU, loss).mean()
    assert value == pytest.approx(_true_divergences(p, TAU)[loss], abs=2e-3)


def test_heteroscedastic_interval_coverage_matches_normal_formula():
    """Fixed-width interval +-w with noise sigma(x): p(x) = 2 Phi(w / sigma(x)) - 1 exactly."""
    from scipy.stats import norm

    from hf_ext.ert.core import per_sample_excess_risk
    from hf_ext.ert.inputs import coverage_indicator

    rng = np.random.default_rng(2)
    n, w = 1_000_000, 1.645
    x = rng.uniform(0, 1, n)
    sigma = 0.5 + x
    y = rng.normal(0, sigma)
    cov = coverage_indicator(y, intervals=np.stack([np.full(n, -w), np.full(n, w)], axis=1)).covered
    p = 2 * norm.cdf(w / sigma) - 1
    assert cov[x < 0.1].mean() == pytest.approx(p[x < 0.1].mean(), abs=5e-3)
    assert per_sample_excess_risk(p, cov, 0.9, "l1").mean() == pytest.approx(
        np.mean(np.abs(p - 0.9)), abs=2e-3
    )


def test_per_sample_target_vector_equal_to_constant_reproduces_scalar():
    from sklearn.linear_model import LogisticRegression

    from hf_ext.metrics.functional.ert import excess_risk_target_coverage

    x, z = _step_data(600, seed=3)
    scalar = excess_risk_target_coverage(x, z, alpha=0.1, classifier=LogisticRegression(), loss="kl")
    vector = excess_risk_target_coverage(
        x, z, target_coverage=np.full(600, 0.9), classifier=LogisticRegression(), loss="kl"
    )
    assert float(scalar) == float(vector)


def _step_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, 3))
    return x, (rng.random(n) < np.where(x[:, 0] > 0.3, 0.75, 0.98)).astype(float)


def test_numpy_torch_pandas_inputs_agree():
    import pandas as pd
    import torch
    from sklearn.linear_model import LogisticRegression

    from hf_ext.metrics.functional.ert import excess_risk_target_coverage

    x, z = _step_data(500, seed=4)
    kw = {"classifier": LogisticRegression(), "loss": "l2"}
    ref = float(excess_risk_target_coverage(x, z, **kw))
    assert float(excess_risk_target_coverage(torch.tensor(x), torch.tensor(z), **kw)) == ref
    assert float(excess_risk_target_coverage(pd.DataFrame(x), pd.Series(z), **kw)) == ref
    x32 = float(
        excess_risk_target_coverage(torch.tensor(x, dtype=torch.float32), torch.tensor(z).bool(), **kw)
    )
    assert x32 == pytest.approx(ref, abs=1e-6)


def test_cross_fitted_ert_is_conservative_on_a_step():
    """ERT-L1 with a calibrated learner is a lower bound: below the truth, above 0 on clear miscoverage."""
    from sklearn.linear_model import LogisticRegression

    from hf_ext.ert.core import cross_fit_ert

    x, z = _step_data(3000, seed=5)
    out = cross_fit_ert(x, z, np.full(3000, 0.9), LogisticRegression(), 5, 42)
    true_l1 = 0.35 * 0.15 + 0.65 * 0.08
    assert 0.02 < out["l1"] < true_l1 + 0.01
    assert out["fold_values"].shape == (5, 9)
    assert out["l1_over"] + out["l1_under"] == pytest.approx(out["l1"], abs=1e-12)


def _brute_force_wsc(x: np.ndarray, z: np.ndarray, delta: float, directions: np.ndarray) -> float:
    n = z.size
    m = math.ceil(delta * n)
    best = 1.0
    for v in directions:
        zs = z[np.argsort(x @ v, kind="stable")]
        for i in range(n):
            for j in range(i + m, n + 1):
                best = min(best, zs[i:j].mean())
    return best


@pytest.mark.parametrize("n, delta", [(40, 0.1), (57, 0.25), (90, 0.05)])
def test_fast_wsc_equals_brute_force(n, delta):
    from hf_ext.ert.slab import sample_directions, worst_slab

    rng = np.random.default_rng(n)
    x = rng.normal(size=(n, 3))
    z = (rng.random(n) < 0.7).astype(float)
    dirs = sample_directions(7, 3, seed=n)
    assert worst_slab(x, z, delta, dirs).coverage == pytest.approx(
        _brute_force_wsc(x, z, delta, dirs), abs=1e-12
    )


def test_holdout_wsc_is_not_biased_low_under_the_null():
    from hf_ext.ert.slab import worst_slab_coverage

    rng = np.random.default_rng(6)
    x = rng.normal(size=(2000, 4))
    z = (rng.random(2000) < 0.9).astype(float)
    in_sample = worst_slab_coverage(x, z, 0.1, 100, 0)
    held_out = worst_slab_coverage(x, z, 0.1, 100, 0, holdout=0.5)
    assert in_sample < 0.85 < held_out


def test_hsic_matches_dense_trace_formula():
    from hf_ext.ert.group_metrics import hsic

    rng = np.random.default_rng(7)
    s, c = rng.integers(1, 5, 300).astype(float), (rng.random(300) < 0.8).astype(float)
    m = s.size
    k = np.exp(-((s[:, None] - s[None, :]) ** 2))
    ll = np.exp(-((c[:, None] - c[None, :]) ** 2))
    hh = np.eye(m) - np.ones((m, m)) / m
    dense = np.trace(ll @ hh @ k @ hh) / (m - 1) ** 2
    assert hsic(s, c, chunk=64) == pytest.approx(dense, rel=1e-10)


def test_coverage_indicator_sets_and_mapie_shapes():
    from hf_ext.ert.inputs import coverage_indicator

    sets = np.array([[True, False, True], [False, True, False], [True, True, True]])
    cov = coverage_indicator(np.array([2, 0, 1]), prediction_sets=sets)
    np.testing.assert_array_equal(cov.covered, [1, 0, 1])
    np.testing.assert_array_equal(cov.size, [2, 1, 3])
    y_pss = np.stack([sets, np.ones_like(sets)], axis=2)  # MAPIE (n, n_classes, n_alpha)
    np.testing.assert_array_equal(
        coverage_indicator(np.array([2, 0, 1]), y_pss, alpha_index=1).covered, [1, 1, 1]
    )
    y_pis = np.array([[[0.0], [1.0]], [[0.0], [0.5]]])  # MAPIE (n, 2, n_alpha), closed intervals
    cov = coverage_indicator(np.array([1.0, 0.7]), intervals=y_pis)
    np.testing.assert_array_equal(cov.covered, [1, 0])
    np.testing.assert_allclose(cov.size, [1.0, 0.5])


def test_ert_from_predictions_is_differentiable_for_l2_and_kl():
    import torch

    from hf_ext.metrics.functional.ert import ert_from_predictions

    for loss, zero_grad in (("l2", False), ("kl", False), ("l1", True)):
        pred = torch.tensor(H, requires_grad=True)
        value = ert_from_predictions(pred, Z, TAU, loss=loss)
        value.backward()
        assert value.item() == pytest.approx(HAND[loss][0], abs=1e-6)
        assert bool((pred.grad == 0).all()) is zero_grad
