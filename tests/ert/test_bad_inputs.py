"""Every bad input raises a clear error naming the argument and the value; soft problems warn."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("metrics", "sklearn")

X = np.random.default_rng(0).normal(size=(120, 2))
Z = (np.arange(120) % 5 != 0).astype(float)


def _ert(*args, **kwargs):
    from sklearn.linear_model import LogisticRegression

    from hf_ext.metrics.functional import excess_risk_target_coverage

    kwargs.setdefault("classifier", LogisticRegression())
    return excess_risk_target_coverage(*args, **kwargs)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"covered": np.where(Z > 0, 2.0, 0.0)}, ValueError, r"`covered` must hold only 0/1.*\[2\.0\]"),
        ({"covered": Z[:, None]}, ValueError, r"`covered` must be 1-D"),
        ({"features": X[:, 0]}, ValueError, r"`features` must be 2-D"),
        ({"features": X[:100]}, ValueError, r"`features` has 100 rows but `covered` has 120"),
        ({"target_coverage": np.full(10, 0.9)}, ValueError, r"`target_coverage` has 10 entries"),
        ({"alpha": 0.0}, ValueError, r"`alpha` must be a finite float in \(0, 1\), got 0.0"),
        ({"alpha": 1.0}, ValueError, r"`alpha` must be a finite float in \(0, 1\), got 1.0"),
        ({"alpha": "0.1"}, TypeError, r"`alpha` must be a finite float in \(0, 1\), got '0.1'"),
        ({"target_coverage": 1.0}, ValueError, r"`target_coverage` must be a finite float in \(0, 1\)"),
        (
            {"target_coverage": np.r_[np.full(119, 0.9), 1.2]},
            ValueError,
            r"`target_coverage` must lie strictly",
        ),
        ({"n_splits": 1}, ValueError, r"`n_splits` must be an int >= 2, got 1"),
        ({"n_splits": 500}, ValueError, r"`n_splits` must be an int in \[2, 120\], got 500"),
        ({"n_splits": 2.5}, TypeError, r"`n_splits` must be an int >= 2, got 2.5"),
        ({"loss": "hinge"}, ValueError, r"`loss` must be one of 'l1', 'l2', 'kl', got 'hinge'"),
        ({"side": "left"}, ValueError, r"`side` must be one of 'both', 'over', 'under', got 'left'"),
        ({"classifier": "lgbm"}, ValueError, r"`classifier` must be one of 'hgb', 'covmetrics', got 'lgbm'"),
        (
            {"classifier": object()},
            TypeError,
            r"`classifier` must be a name or an object with fit and predict_proba",
        ),
        ({"features": np.c_[X[:, 0], np.full(120, np.inf)]}, ValueError, r"`features` contains infinite"),
    ],
)
def test_ert_bad_inputs(kwargs, exc, match):
    args = {"features": X, "covered": Z, **kwargs}
    with pytest.raises(exc, match=match):
        _ert(**args)


def test_wsc_bad_inputs():
    from hf_ext.metrics.functional import worst_slab_coverage

    with pytest.raises(ValueError, match=r"`delta` must be a finite float in \(0, 1\), got 1.5"):
        worst_slab_coverage(X, Z, delta=1.5)
    with pytest.raises(ValueError, match=r"`features` contains NaN"):
        worst_slab_coverage(np.c_[X[:, 0], np.full(120, np.nan)], Z)
    with pytest.raises(ValueError, match=r"`features` contains infinite"):
        worst_slab_coverage(np.c_[X[:, 0], np.full(120, np.inf)], Z)


def test_group_and_size_bad_inputs():
    from hf_ext.metrics.functional import coverage_gap, size_stratified_coverage

    with pytest.raises(ValueError, match=r"`sizes` must be 1-D"):
        size_stratified_coverage(np.ones((120, 2)), Z)
    with pytest.raises(TypeError, match=r"`groups` must hold integer group ids"):
        coverage_gap(np.linspace(0, 1, 120), Z)
    with pytest.raises(ValueError, match=r"`reduction` must be one of 'gap', 'min', got 'max'"):
        size_stratified_coverage(np.ones(120), Z, reduction="max")


def test_prediction_input_errors():
    from hf_ext.ert.inputs import coverage_indicator, resolve_coverage

    with pytest.raises(ValueError, match="exactly one of `prediction_sets`"):
        coverage_indicator(np.zeros(3))
    with pytest.raises(ValueError, match="pick one with `alpha_index`"):
        coverage_indicator(np.zeros(2), intervals=np.zeros((2, 2, 3)))
    with pytest.raises(ValueError, match=r"`y` must hold class ids in \[0, 2\)"):
        coverage_indicator(np.array([0, 5]), prediction_sets=np.ones((2, 2), bool))
    with pytest.raises(ValueError, match="not both"):
        resolve_coverage(Z, y=np.zeros(120), intervals=np.zeros((120, 2)))


@pytest.mark.filterwarnings("ignore:The ``compute`` method")
def test_metric_errors():
    import torch

    from hf_ext.metrics import CoverageGap, ExcessRiskTargetCoverage

    with pytest.raises(RuntimeError, match=r"compute\(\) was called before any update\(\)"):
        ExcessRiskTargetCoverage().compute()
    with pytest.raises(ValueError, match=r"`alpha` must be a finite float in \(0, 1\), got 1.0"):
        ExcessRiskTargetCoverage(alpha=1.0)
    with pytest.raises(ValueError, match=r"`groups` must lie in \[0, 3\)"):
        CoverageGap(num_groups=3).update(torch.tensor([0, 3]), torch.tensor([1, 1]))
    m = ExcessRiskTargetCoverage()
    m.update(torch.zeros(4, 2), torch.ones(4))
    with pytest.raises(ValueError, match="`features` has 3 columns but earlier batches had 2"):
        m.update(torch.zeros(4, 3), torch.ones(4))


def test_estimator_errors():
    from hf_ext.estimators import CoverageAuditor

    with pytest.raises(ValueError, match="Only binary classification is supported"):
        CoverageAuditor().fit(X, np.arange(120) % 3)
    with pytest.raises(ValueError, match=r"'loss' parameter of CoverageAuditor must be a str among"):
        CoverageAuditor(loss="l3").fit(X, Z)
    with pytest.raises(
        ValueError, match=r"'alpha' parameter of CoverageAuditor must be a float in the range"
    ):
        CoverageAuditor(alpha=1.5).fit(X, Z)


def test_constant_coverage_warns_and_returns_zero():
    with pytest.warns(UserWarning, match="`covered` is constant"):
        assert float(_ert(X, np.ones(120))) == 0.0


def test_small_folds_warn():
    with pytest.warns(UserWarning, match="samples per held-out fold"):
        _ert(X, Z, n_splits=5)
