"""The value does not depend on the row order (default), and ``fold_order="as_given"`` reproduces
``covmetrics.ERT.evaluate`` on the caller's own order: against a reference written from covmetrics' documented
algorithm (always), and against the package itself when it is installed."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("metrics", "sklearn")

from sklearn.ensemble import HistGradientBoostingClassifier  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from hf_ext.ert.core import KEYS, cross_fit_ert, per_sample_excess_risk  # noqa: E402


def _data(n: int = 600, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, 3))
    z = (rng.random(n) < np.where(x[:, 0] > 0.3, 0.75, 0.95)).astype(np.float64)
    return x, z, rng.uniform(0.85, 0.95, n)


def _reference(x: np.ndarray, z: np.ndarray, tau: np.ndarray) -> dict[str, float]:
    """covmetrics' documented cross-fit: KFold(5, shuffle=True, random_state=42) over the rows as given, a
    fresh LogisticRegression per fold, fold value = mean per-sample excess risk, result = mean of folds."""
    from sklearn.model_selection import KFold

    folds = []
    for tr, te in KFold(5, shuffle=True, random_state=42).split(x):
        h = LogisticRegression().fit(x[tr], z[tr]).predict_proba(x[te])[:, 1]
        folds.append(
            {
                key: per_sample_excess_risk(h, z[te], tau[te], *(key.split("_") + ["both"])[:2]).mean()
                for key in KEYS
            }
        )
    return {key: float(np.mean([f[key] for f in folds])) for key in KEYS}


@pytest.mark.parametrize(
    "classifier",
    [LogisticRegression(), HistGradientBoostingClassifier(max_iter=20, max_leaf_nodes=8)],
    ids=["logreg", "hgb"],
)
def test_value_does_not_depend_on_row_order(classifier):
    x, z, tau = _data()
    ours = cross_fit_ert(x, z, tau, classifier)
    for seed in (1, 2):
        perm = np.random.default_rng(seed).permutation(z.size)
        again = cross_fit_ert(x[perm], z[perm], tau[perm], classifier)
        for key in KEYS:
            assert again[key] == ours[key], key
        np.testing.assert_array_equal(again["fold_values"], ours["fold_values"])


def test_as_given_equals_the_documented_covmetrics_algorithm_on_the_users_order():
    x, z, tau = _data(seed=1)
    perm = np.random.default_rng(7).permutation(z.size)
    for order in (np.arange(z.size), perm):
        ref = _reference(x[order], z[order], tau[order])
        ours = cross_fit_ert(x[order], z[order], tau[order], LogisticRegression(), fold_order="as_given")
        for key in KEYS:
            assert ours[key] == pytest.approx(ref[key], abs=1e-12), key
    given = cross_fit_ert(x, z, tau, LogisticRegression(), fold_order="as_given")["l1"]
    permuted = cross_fit_ert(x[perm], z[perm], tau[perm], LogisticRegression(), fold_order="as_given")["l1"]
    assert given != permuted  # as covmetrics: the folds follow the rows


def test_every_form_passes_fold_order_through():
    import torch

    from hf_ext.estimators import CoverageAuditor
    from hf_ext.metrics import ExcessRiskTargetCoverage
    from hf_ext.metrics.functional import excess_risk_target_coverage

    x, z, _ = _data(seed=2)
    ref = cross_fit_ert(x, z, np.full(z.size, 0.9), LogisticRegression(), fold_order="as_given")
    functional = excess_risk_target_coverage(x, z, classifier=LogisticRegression(), fold_order="as_given")
    metric = ExcessRiskTargetCoverage(classifier=LogisticRegression(), fold_order="as_given")
    metric.update(torch.as_tensor(x[:300]), torch.as_tensor(z[:300]))
    metric.update(torch.as_tensor(x[300:]), torch.as_tensor(z[300:]))
    auditor = CoverageAuditor(classifier=LogisticRegression(), fold_order="as_given")
    assert float(functional) == ref["l1"]
    assert float(metric.compute()["l1"]) == ref["l1"]
    assert auditor.cross_fit_ert(x, z)["l1"] == ref["l1"]


def test_unknown_fold_order_is_rejected():
    from hf_ext.metrics import ExcessRiskTargetCoverage
    from hf_ext.metrics.functional import excess_risk_target_coverage

    x, z, tau = _data(n=100)
    with pytest.raises(ValueError, match="fold_order"):
        cross_fit_ert(x, z, tau, LogisticRegression(), fold_order="given")
    with pytest.raises(ValueError, match="fold_order"):
        excess_risk_target_coverage(x, z, fold_order="sorted")
    with pytest.raises(ValueError, match="fold_order"):
        ExcessRiskTargetCoverage(fold_order="sorted")


def test_as_given_reproduces_covmetrics_on_the_users_order():
    covmetrics = pytest.importorskip("covmetrics")
    names = {"l1": "L1_miscoverage", "l2": "brier_score", "kl": "logloss"}
    key_map = {key: "ERT_" + "_".join([names[key[:2]], *key.split("_")[1:]]) for key in KEYS}

    x, z, _ = _data(n=800, seed=3)  # the user's order: not sorted, not hf-ext's canonical order
    alpha = np.random.default_rng(3).uniform(0.05, 0.2, z.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = covmetrics.ERT(LogisticRegression).evaluate_multiple_losses(
            x, z, alpha=alpha, n_splits=5, random_state=42
        )
    ours = cross_fit_ert(x, z, 1 - alpha, LogisticRegression(), fold_order="as_given")
    for key, ref_key in key_map.items():
        assert ours[key] == pytest.approx(float(ref[ref_key]), abs=1e-12), key
