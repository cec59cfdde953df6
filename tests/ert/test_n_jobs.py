"""ERT's cross-fitting runs its folds through joblib: two workers give exactly the one-worker value."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = [requires("metrics", "sklearn"), pytest.mark.distributed]


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(1500, 2))
    covered = (rng.random(1500) < np.where(x[:, 0] > 0.3, 0.75, 0.98)).astype(int)
    return x, covered


@pytest.mark.slow
def test_estimator_functional_and_metric_two_workers_equal_one() -> None:
    import torch

    from hf_ext.estimators.ert import CoverageAuditor
    from hf_ext.metrics.ert import ExcessRiskTargetCoverage
    from hf_ext.metrics.functional.ert import excess_risk_target_coverage

    x, covered = _data()
    one = CoverageAuditor(n_jobs=1).cross_fit_ert(x, covered)
    two = CoverageAuditor(n_jobs=2).cross_fit_ert(x, covered)
    np.testing.assert_array_equal(one["fold_values"], two["fold_values"])
    assert one["l1"] == two["l1"] > 0.05

    assert excess_risk_target_coverage(x, covered, n_jobs=2).item() == one["l1"]
    metric = ExcessRiskTargetCoverage(n_jobs=2)
    metric.update(torch.as_tensor(x), torch.as_tensor(covered))
    assert metric.compute()["l1"].item() == one["l1"]


@pytest.mark.parametrize(("value", "error"), [(0, ValueError), (True, TypeError), (1.5, TypeError)])
def test_bad_n_jobs_names_the_argument(value: object, error: type[Exception]) -> None:
    from hf_ext.metrics.ert import ExcessRiskTargetCoverage
    from hf_ext.metrics.functional.ert import excess_risk_target_coverage

    x, covered = _data()
    with pytest.raises(error, match="`n_jobs` must be None or a nonzero int"):
        excess_risk_target_coverage(x, covered, n_jobs=value)  # type: ignore[arg-type]
    with pytest.raises(error, match="`n_jobs` must be None or a nonzero int"):
        ExcessRiskTargetCoverage(n_jobs=value)  # type: ignore[arg-type]
