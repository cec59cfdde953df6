"""Rule features: the exact path, and Monte-Carlo estimates within 4 standard errors of the exact values."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.ca_learnability.automata import life_like_rule, random_rule, window_function
from hf_ext.ca_learnability.core import degree_weights, fourier_spectrum, junta_profile
from hf_ext.ca_learnability.features import mc_spectrum, rule_features

LIFE = life_like_rule([3], [2, 3])


def test_exact_features_of_life() -> None:
    feats = rule_features(LIFE, 1, method="exact", dtype=np.float64)
    assert feats["as"] == pytest.approx(812 / 256)
    assert feats["w0"] == pytest.approx((232 / 512) ** 2)
    assert {"w_le2", "w_ge4", "junta_r0", "as_norm"} <= set(feats)


@pytest.mark.parametrize("rule", [LIFE, random_rule("local", seed=5)], ids=["life", "local"])
def test_monte_carlo_within_4_se_of_exact(rule) -> None:  # noqa: ANN001
    spec = fourier_spectrum(rule.table)
    w = degree_weights(spec)
    exact = {
        "as": float(np.arange(10) @ w),
        "w0": w[0],
        "w1": w[1],
        "w2": w[2],
        "w_ge3": w[3:].sum(),
        "stab_0.5": float((0.5 ** np.arange(10)) @ w),
        "junta_weight_r0": w[0] + spec[16] ** 2,
        "junta_weight_r1": 1.0,
    }
    est = mc_spectrum(window_function(rule, 1), 9, n_samples=1500, n_batches=20, rhos=(0.5,), seed=1)
    for key, value in exact.items():
        mean, se = est[key]
        assert abs(mean - value) <= 4 * se + 1e-9, (key, mean, se, value)


def test_monte_carlo_features_and_auto_fallback() -> None:
    with pytest.warns(UserWarning, match="Monte-Carlo"):
        feats = rule_features(LIFE, 3, method="auto", n_samples=50, n_batches=2, rhos=())
    assert feats["n"] == 49 and feats["as_se"] >= 0 and {"junta_r0", "junta_r2"} <= set(feats)
    mc = rule_features(LIFE, 1, method="monte_carlo", n_samples=2000, n_batches=10, rhos=())
    exact = rule_features(LIFE, 1)
    assert abs(mc["as"] - exact["as"]) <= 4 * mc["as_se"]
    prof = junta_profile(fourier_spectrum(LIFE.table))
    assert mc["junta_r0"] == pytest.approx(prof[0], abs=0.05)


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="`method`"):
        rule_features(LIFE, 1, method="fast")
    with pytest.raises(ValueError, match=r"n=49.*monte_carlo"):
        rule_features(LIFE, 3, method="exact")
    with pytest.raises(ValueError, match="`n_samples`"):
        mc_spectrum(window_function(LIFE), 9, n_samples=1)
    with pytest.raises(ValueError, match="`steps`"):
        rule_features(LIFE, 0)
