"""The ERT p-values (exact held-out tests of "coverage does not depend on x" and of "coverage equals tau"),
``ert_test`` and ``CoverageAuditor.p_value`` / ``summary``."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("metrics", "sklearn")


def test_hand_computed_p_value_all_rows_above_tau():
    from hf_ext.ert.core import held_out_test

    # every h above tau = 0.9: p = P(Bin(20, 0.9) >= 19) = 0.9^20 + 20 * 0.9^19 * 0.1
    res = held_out_test(np.full(20, 0.95), np.r_[np.ones(19), 0.0], np.full(20, 0.9))
    assert res.p_value == pytest.approx(0.9**20 + 20 * 0.9**19 * 0.1, abs=1e-12)
    assert res.statistic == pytest.approx(0.05)
    assert (res.n, res.n_above, res.n_below) == (20, 20, 0)


def test_hand_computed_p_value_both_sides_and_a_tie():
    from hf_ext.ert.core import held_out_test

    # s = (+1, +1, -1, 0), z = (1, 1, 0, 1), tau = 0.5: W = 2; P(A - B >= 2) = P(A = 2) P(B = 0) = 1/8
    res = held_out_test(np.array([0.7, 0.6, 0.2, 0.5]), np.array([1.0, 1.0, 0.0, 1.0]), np.full(4, 0.5))
    assert res.p_value == pytest.approx(0.125, abs=1e-12)
    assert res.statistic == pytest.approx(1.5 / 4)
    assert (res.n_above, res.n_below) == (2, 1)


def test_per_sample_targets_use_the_poisson_binomial():
    from hf_ext.ert.core import held_out_test

    # two rows above tau = (0.8, 0.6), both covered: p = 0.8 * 0.6
    res = held_out_test(np.array([0.9, 0.9]), np.array([1.0, 1.0]), np.array([0.8, 0.6]))
    assert res.p_value == pytest.approx(0.48, abs=1e-12)


def test_p_value_is_valid_under_the_null():
    """h independent of the held-out rows and z ~ Bernoulli(tau): P(p <= a) <= a (up to Monte-Carlo noise)."""
    from hf_ext.ert.core import held_out_test

    rng = np.random.default_rng(0)
    pvals = []
    for _ in range(2000):
        tau = np.where(rng.random(150) < 0.5, 0.9, 0.8)
        pvals.append(
            held_out_test(rng.uniform(0.7, 1.0, 150), (rng.random(150) < tau).astype(float), tau).p_value
        )
    pvals = np.array(pvals)
    for a in (0.01, 0.05, 0.2, 0.5):
        assert np.mean(pvals <= a) <= a + 3 * np.sqrt(a * (1 - a) / pvals.size)
    assert np.mean(pvals <= 0.05) >= 0.02  # discreteness makes it conservative, not useless


def test_hand_computed_uniformity_test():
    from hf_ext.ert.core import uniformity_test

    # c = mean(z) = 0.75; s = (+, +, -, -); 3 covered, 2 of them above: P(A >= 2) = C(3,2) C(1,0) / C(4,2)
    res = uniformity_test(np.array([0.9, 0.9, 0.6, 0.6]), np.array([1.0, 1.0, 0.0, 1.0]))
    assert res.p_value == pytest.approx(0.5, abs=1e-12)
    assert res.statistic == pytest.approx((0.25 + 0.25 + 0.75 - 0.25) / 4)
    assert (res.n, res.n_above, res.n_below) == (4, 2, 2)
    # no row on one side of c, or constant z: no evidence
    assert uniformity_test(np.full(5, 0.99), np.array([1.0, 1.0, 0.0, 1.0, 1.0])).p_value == 1.0
    assert uniformity_test(np.linspace(0, 1, 5), np.ones(5)).p_value == 1.0


def test_uniformity_test_is_valid_whatever_the_marginal_and_the_target_test_is_not():
    """Coverage constant in x at a level that differs from tau from run to run (as split conformal's finite
    calibration set makes it), h an estimate of that level from other data: the uniformity test keeps its
    level, the test of p = tau does not."""
    from hf_ext.ert.core import held_out_test, uniformity_test

    rng = np.random.default_rng(5)
    uniform, target = [], []
    for _ in range(1000):
        c = rng.uniform(0.87, 0.93)
        h, z = np.clip(c + rng.normal(0, 0.02, 400), 0, 1), (rng.random(400) < c).astype(float)
        uniform.append(uniformity_test(h, z).p_value)
        target.append(held_out_test(h, z, np.full(400, 0.9)).p_value)
    uniform, target = np.array(uniform), np.array(target)
    for a in (0.01, 0.05, 0.2, 0.5):
        assert np.mean(uniform <= a) <= a + 3 * np.sqrt(a * (1 - a) / uniform.size)
    assert np.mean(uniform <= 0.05) >= 0.02
    assert np.mean(target <= 0.05) > 0.15


def test_ert_test_does_not_flag_well_specified_split_conformal():
    """40 split-conformal runs (linear model, homoscedastic noise, 300 calibration rows): the default test
    rejects at most at its level; the test of p = tau reacts to each run's marginal deviation."""
    from sklearn.linear_model import LogisticRegression

    from hf_ext.metrics.functional import ert_test

    rng = np.random.default_rng(6)
    rejected = {"uniform": 0, "target": 0}
    for _ in range(40):
        x = rng.uniform(-1, 1, (1300, 3))
        y = x @ np.array([1.0, 0.0, -1.0]) + rng.normal(size=1300)
        width = np.sort(np.abs(y[:300] - x[:300] @ np.array([1.0, 0.0, -1.0])))[270]  # ceil(301 * 0.9) = 271
        covered = np.abs(y[300:] - x[300:] @ np.array([1.0, 0.0, -1.0])) <= width
        for null in rejected:
            res = ert_test(x[300:], covered, alpha=0.1, classifier=LogisticRegression(), null=null)
            rejected[null] += res.p_value <= 0.05
    assert rejected["uniform"] <= 2  # 40 x 0.05; P(Bin(40, 0.05) >= 3) = 0.32, the seed is fixed
    assert rejected["target"] > rejected["uniform"]


def test_unknown_null_is_rejected():
    from sklearn.linear_model import LogisticRegression

    from hf_ext.estimators import CoverageAuditor
    from hf_ext.metrics.functional import ert_test

    rng = np.random.default_rng(7)
    X, z = rng.normal(size=(100, 2)), (rng.random(100) < 0.9).astype(int)
    with pytest.raises(ValueError, match="null"):
        ert_test(X, z, null="tau")
    auditor = CoverageAuditor(classifier=LogisticRegression()).fit(X, z)
    with pytest.raises(ValueError, match="null"):
        auditor.p_value(X, z, null="exact")
    with pytest.raises(ValueError, match="null"):
        auditor.summary(X, z, null="exact")


def test_ert_test_detects_a_step_and_not_a_null():
    from sklearn.linear_model import LogisticRegression

    from hf_ext.metrics.functional import ert_test

    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, (2000, 2))
    shifted = rng.random(2000) < np.where(X[:, 0] > 0.3, 0.75, 0.98)
    exact = rng.random(2000) < 0.9
    assert ert_test(X, shifted, alpha=0.1, classifier=LogisticRegression()).p_value < 1e-6
    assert ert_test(X, exact, alpha=0.1, classifier=LogisticRegression()).p_value > 0.05


def test_ert_test_does_not_depend_on_row_order():
    from sklearn.linear_model import LogisticRegression

    from hf_ext.metrics.functional import ert_test

    rng = np.random.default_rng(2)
    X = rng.uniform(-1, 1, (600, 2))
    z = rng.random(600) < np.where(X[:, 0] > 0.3, 0.8, 0.95)
    perm = rng.permutation(600)
    a = ert_test(X, z, classifier=LogisticRegression())
    b = ert_test(X[perm], z[perm], classifier=LogisticRegression())
    assert a == b


def test_auditor_p_value_and_summary_on_held_out_rows():
    from sklearn.linear_model import LogisticRegression

    from hf_ext.ert.core import KEYS
    from hf_ext.estimators import CoverageAuditor

    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, (3000, 2))
    z = (rng.random(3000) < np.where(X[:, 0] > 0.3, 0.75, 0.98)).astype(int)
    auditor = CoverageAuditor(classifier=LogisticRegression()).fit(X[:1500], z[:1500])
    summary = auditor.summary(X[1500:], z[1500:])
    assert summary.test.p_value == auditor.p_value(X[1500:], z[1500:]) < 1e-6
    assert summary.ert["l1"] == pytest.approx(auditor.score(X[1500:], z[1500:]))
    assert summary.null == "uniform" and "does not depend on x" in str(summary)
    target = auditor.summary(X[1500:], z[1500:], null="target")
    assert target.test.p_value == auditor.p_value(X[1500:], z[1500:], null="target") < 1e-6
    assert target.test.statistic == pytest.approx(summary.ert["l1"])
    assert "equals the target" in str(target)
    assert set(summary.ert) == set(KEYS)
    for loss in ("l1", "l2", "kl"):
        assert summary.ert[f"{loss}_over"] + summary.ert[f"{loss}_under"] == pytest.approx(summary.ert[loss])
    assert summary.n == 1500 and summary.coverage == pytest.approx(z[1500:].mean())
    text = str(summary)
    assert "p-value" in text and "conditional miscoverage detected" in text and "ERT-L1" in text


def test_summary_and_test_bad_inputs():
    from sklearn.linear_model import LogisticRegression

    from hf_ext.estimators import CoverageAuditor
    from hf_ext.metrics.functional import ert_test

    rng = np.random.default_rng(4)
    X, z = rng.normal(size=(100, 2)), (rng.random(100) < 0.9).astype(int)
    auditor = CoverageAuditor(classifier=LogisticRegression()).fit(X, z)
    with pytest.raises(ValueError, match=r"`level` must be a finite float in \(0, 1\), got 1.5"):
        auditor.summary(X, z, level=1.5)
    with pytest.raises(ValueError, match=r"`y` has shape \(99,\) but `X` has 100 rows"):
        auditor.p_value(X, z[:99])
    with pytest.raises(ValueError, match=r"`test_size` must be a finite float in \(0, 1\), got 0.0"):
        ert_test(X, z, test_size=0.0)
    with pytest.raises(ValueError, match=r"`test_size`=0.999 leaves no training or no test rows with n=100"):
        ert_test(X, z, test_size=0.999, classifier=LogisticRegression())


def test_default_classifier_is_not_fooled_by_the_seeded_row_order():
    """The rows are fitted in a seeded order of the set of rows; the calibrated default (internal 3-fold
    calibration) must see them shuffled, not sorted by the first feature, or it predicts below tau
    everywhere and the test loses its power."""
    from hf_ext.metrics.functional import ert_test

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (4000, 3))
    covered = rng.random(4000) < np.where(X[:, 0] > 0.3, 0.75, 0.98)
    res = ert_test(X, covered, alpha=0.1)
    assert res.n_above > 500 and res.n_below > 500
    assert res.statistic > 0.08 and res.p_value < 1e-20  # true L1 distance 0.105
