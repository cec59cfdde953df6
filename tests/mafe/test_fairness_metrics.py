"""Fairness metrics: hand-computed values, empty groups, references, Metric conformance, bad inputs."""

from __future__ import annotations

import io
import pickle
from contextlib import redirect_stdout

import numpy as np
import pytest
import torch

from hf_ext.testing import requires

pytestmark = requires("metrics", "pettingzoo")

from hf_ext.metrics.fairness import (  # noqa: E402
    DemographicParityDifference,
    EqualOpportunityDifference,
    GroupRate,
    MeanLevelGap,
)
from hf_ext.metrics.functional.fairness import (  # noqa: E402
    demographic_parity_difference,
    equal_opportunity_difference,
    group_rates,
    mean_level_gap,
)

DEC = [1, 1, 0, 1, 0, 0]
GRP = [0, 0, 0, 1, 1, 1]


def test_hand_computed_six_applicants():
    torch.testing.assert_close(group_rates(DEC, GRP), torch.tensor([2 / 3, 1 / 3], dtype=torch.float64))
    assert float(demographic_parity_difference(DEC, GRP)) == pytest.approx(1 / 3)
    # qualified subset: A {0, 2} -> 1 of 2 approved, B {3, 4} -> 1 of 2 approved; then B {3} only -> 1/1.
    assert float(equal_opportunity_difference(DEC, GRP, [1, 0, 1, 1, 1, 0])) == pytest.approx(0.0)
    assert float(equal_opportunity_difference(DEC, GRP, [1, 0, 1, 1, 0, 0])) == pytest.approx(0.5)
    assert float(mean_level_gap([6, 3, 0, 1, 1, 1], GRP)) == pytest.approx(2.0)


def test_empty_group_is_zero_and_left_out():
    rates = group_rates([1, 0, 1], [0, 0, 2], num_groups=3)
    torch.testing.assert_close(rates, torch.tensor([0.5, 0.0, 1.0], dtype=torch.float64))
    assert float(demographic_parity_difference([1, 0, 1], [0, 0, 2], num_groups=3)) == pytest.approx(0.5)
    assert float(demographic_parity_difference([1, 0], [0, 0], num_groups=2)) == 0.0


def test_group_without_qualified_members_is_zero_and_left_out():
    # group 1 has members but none qualified: its tpr is 0.0 and it is left out of eo_gap
    dec, grp, qual = [1, 0, 1, 1], [0, 0, 1, 1], [1, 1, 0, 0]
    rates = group_rates(dec, grp, qualified=qual)
    torch.testing.assert_close(rates, torch.tensor([0.5, 0.0], dtype=torch.float64))
    assert float(equal_opportunity_difference(dec, grp, qual)) == 0.0
    with_third = equal_opportunity_difference([1, 0, 1, 1, 0], [0, 0, 1, 1, 2], [1, 1, 0, 0, 1], num_groups=3)
    assert float(with_third) == pytest.approx(0.5)  # groups 0 (0.5) and 2 (0.0); group 1 left out
    metric = EqualOpportunityDifference(num_groups=2)
    metric.update(torch.tensor(dec), torch.tensor(grp), torch.tensor(qual, dtype=torch.bool))
    assert float(metric.compute()) == 0.0


@pytest.mark.filterwarnings("ignore:The ``compute`` method")
def test_no_members_at_all_is_zero():
    assert float(demographic_parity_difference([], torch.tensor([], dtype=torch.long), num_groups=2)) == 0.0
    torch.testing.assert_close(GroupRate(num_groups=2).compute(), torch.zeros(2, dtype=torch.float64))


def test_numpy_and_torch_paths_agree():
    from hf_ext.metrics.functional.fairness import _group_gap_compute, _group_stats_update

    rng = np.random.default_rng(0)
    d, g = rng.random(50), rng.integers(0, 3, 50)
    np_gap = _group_gap_compute(*_group_stats_update(d, g, 3))
    t_gap = _group_gap_compute(*_group_stats_update(torch.tensor(d), torch.tensor(g), 3))
    assert float(np_gap) == float(t_gap)


def test_against_fairlearn():
    fairlearn = pytest.importorskip("fairlearn.metrics")
    rng = np.random.default_rng(1)
    y, d, g = rng.integers(0, 2, 80), rng.integers(0, 2, 80), rng.integers(0, 2, 80)
    ref = fairlearn.demographic_parity_difference(y, d, sensitive_features=g)
    assert float(demographic_parity_difference(d, g)) == pytest.approx(ref)


def _reference(dec, grp, mask, g):
    dec, grp = np.asarray(dec, float), np.asarray(grp)
    if mask is not None:
        dec, grp = dec[np.asarray(mask, bool)], grp[np.asarray(mask, bool)]
    rates = np.array([dec[grp == i].mean() if (grp == i).any() else 0.0 for i in range(g)])
    kept = [rates[i] for i in range(g) if (grp == i).any()]
    return rates, (max(kept) - min(kept) if len(kept) >= 2 else 0.0)


CASES = [
    (GroupRate, False, lambda r, gap: r),
    (DemographicParityDifference, False, lambda r, gap: gap),
    (EqualOpportunityDifference, True, lambda r, gap: gap),
    (MeanLevelGap, False, lambda r, gap: gap),
]


@pytest.mark.filterwarnings("ignore:The ``compute`` method")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("cls", "masked", "pick"), CASES)
def test_metric_conformance(cls, masked, pick, dtype):
    rng = np.random.default_rng(2)
    n, g = 60, 3
    levels = cls is MeanLevelGap
    dec = rng.integers(0, 5, n) if levels else rng.integers(0, 2, n)
    grp, mask = rng.integers(0, g, n), rng.integers(0, 2, n).astype(bool)
    args = [torch.tensor(dec, dtype=dtype), torch.tensor(grp)] + ([torch.tensor(mask)] if masked else [])
    want = torch.as_tensor(pick(*_reference(dec, grp, mask if masked else None, g)), dtype=torch.float64)
    one = cls(num_groups=g)
    one.update(*args)
    torch.testing.assert_close(one.compute(), want)
    batched, a, b = cls(num_groups=g), cls(num_groups=g), cls(num_groups=g)
    for i in range(0, n, 20):
        batched.update(*[x[i : i + 20] for x in args])
        (a if i < 30 else b).update(*[x[i : i + 20] for x in args])
    torch.testing.assert_close(batched.compute(), want)
    a.merge_state(b)
    torch.testing.assert_close(a.compute(), want)
    clone = pickle.loads(pickle.dumps(one))
    torch.testing.assert_close(clone.compute(), want)
    fresh = cls(num_groups=g)
    fresh.persistent(True)
    one.persistent(True)
    fresh.load_state_dict(one.state_dict())
    torch.testing.assert_close(fresh.compute(), want)
    one.reset()
    assert float(one.counts.sum()) == 0.0


def test_full_state_property_agrees():
    from torchmetrics.utilities.checks import check_forward_full_state_property

    buf = io.StringIO()
    with redirect_stdout(buf):
        check_forward_full_state_property(
            DemographicParityDifference,
            init_args={"num_groups": 2},
            input_args={"decisions": torch.tensor([1, 0, 1, 1]), "groups": torch.tensor([0, 0, 1, 1])},
            num_update_to_compare=[10, 20],
            reps=2,
        )
    # timing lines are printed only when full- and partial-state forward agree
    assert "Full state for" in buf.getvalue()


def test_bad_inputs():
    with pytest.raises(ValueError, match="at least 2 groups"):
        DemographicParityDifference(num_groups=1)
    with pytest.raises(ValueError, match="at least 2 groups"):
        demographic_parity_difference([1, 0], [0, 0], num_groups=1)
    with pytest.raises(ValueError, match=r"`decisions` must lie in \[0, 1\]"):
        demographic_parity_difference([2, 0], [0, 1])
    with pytest.raises(ValueError, match="same length"):
        demographic_parity_difference([1, 0, 1], [0, 1])
    with pytest.raises(ValueError, match="integer group ids"):
        demographic_parity_difference([1, 0], [0.0, 1.0])
    with pytest.raises(ValueError, match="< num_groups=2"):
        demographic_parity_difference([1, 0], [0, 2], num_groups=2)
    with pytest.raises(ValueError, match="`qualified` must have shape"):
        equal_opportunity_difference([1, 0], [0, 1], [1])
