"""UncertaintyAUROC and PredictionRejectionRatio: references, hand cases, torchmetrics conformance."""

from __future__ import annotations

import contextlib
import io
import pickle

import pytest
import torch

from hf_ext.testing import requires

pytestmark = requires("metrics", "sklearn")


def _data(n=60, seed=0):
    g = torch.Generator().manual_seed(seed)
    conf = torch.rand(n, generator=g, dtype=torch.float64)
    correct = (torch.rand(n, generator=g, dtype=torch.float64) < conf).long()
    return conf, correct


def test_auroc_equals_sklearn_with_ties():
    from sklearn.metrics import roc_auc_score

    from hf_ext.metrics.functional.infoflow import uncertainty_auroc

    conf, correct = _data()
    conf = (conf * 5).round() / 5  # ties
    assert uncertainty_auroc(conf, correct).item() == pytest.approx(roc_auc_score(correct, conf))


def test_stratified_auroc_by_hand():
    from sklearn.metrics import roc_auc_score

    from hf_ext.metrics.functional.infoflow import stratified_auroc

    conf, correct = _data(80)
    groups = torch.arange(80) % 3
    groups[groups == 2] = 1
    expected = (
        sum(roc_auc_score(correct[groups == g], conf[groups == g]) * int((groups == g).sum()) for g in (0, 1))
        / 80
    )
    assert stratified_auroc(conf, correct, groups).item() == pytest.approx(expected)


def test_prr_hand_examples():
    from hf_ext.metrics.functional.infoflow import prediction_rejection_ratio as prr

    correct = torch.tensor([1, 1, 0, 1, 0, 0])
    assert prr(torch.tensor([6.0, 5, 4, 3, 2, 1]) * (correct * 10 + 1), correct).item() == pytest.approx(1.0)
    assert prr(-torch.arange(6.0) * 0 + correct.double(), correct).item() == pytest.approx(1.0)
    assert prr(1.0 - correct.double(), correct).item() == pytest.approx(-1.0)
    assert prr(torch.full((6,), 0.3), correct).item() == pytest.approx(0.0, abs=1e-12)
    # [1, 0, 1, 0] ordered: kept means 1/2, 2/3, 1/2, 1 -> 2/3; oracle 1/2, 2/3, 1, 1 -> 19/24; random 1/2
    c = torch.tensor([1, 0, 1, 0])
    assert prr(torch.tensor([4.0, 3, 2, 1]), c).item() == pytest.approx((2 / 3 - 0.5) / (19 / 24 - 0.5))


@pytest.mark.parametrize("name", ["uncertainty_auroc", "prediction_rejection_ratio"])
def test_single_class_warns_and_returns_zero(name):
    import hf_ext.metrics.functional.infoflow as F

    with pytest.warns(UserWarning, match="undefined"):
        assert getattr(F, name)(torch.tensor([0.1, 0.5]), torch.tensor([1, 1])).item() == 0.0


@pytest.mark.parametrize("cls_name", ["UncertaintyAUROC", "PredictionRejectionRatio"])
def test_metric_conformance(cls_name):
    from torchmetrics.utilities import check_forward_full_state_property

    import hf_ext.metrics.functional.infoflow as F
    import hf_ext.metrics.infoflow as M

    cls = getattr(M, cls_name)
    fn = F.uncertainty_auroc if cls_name == "UncertaintyAUROC" else F.prediction_rejection_ratio
    conf, correct = _data(90)
    whole = fn(conf, correct)
    m = cls()
    for part in range(3):
        m.update(conf[part * 30 : (part + 1) * 30], correct[part * 30 : (part + 1) * 30])
    assert m.compute().item() == pytest.approx(whole.item())
    assert m.compute().dtype == torch.float64
    clone = pickle.loads(pickle.dumps(m))
    assert clone.compute().item() == pytest.approx(whole.item())
    a, b = cls(), cls()
    a.update(conf[:50], correct[:50])
    b.update(conf[50:], correct[50:])
    a.merge_state(b)
    assert a.compute().item() == pytest.approx(whole.item())
    perm = torch.randperm(90, generator=torch.Generator().manual_seed(1))
    assert cls()(conf[perm], correct[perm]).item() == pytest.approx(whole.item())
    m.reset()
    with pytest.raises(RuntimeError, match="before any update"):
        m.compute()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        check_forward_full_state_property(
            cls,
            input_args={"confidence": conf[:10], "correct": correct[:10]},
            num_update_to_compare=[5],
            reps=1,
        )
    text = out.getvalue()
    assert "Recommended setting `full_state_update=True`" not in text or "Full state for" in text


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((torch.ones(2, 2), torch.ones(2, 2)), "`confidence` must be a non-empty 1-D"),
        ((torch.ones(3), torch.ones(2)), "`correct` must have the shape"),
        ((torch.tensor([0.1, float("nan")]), torch.tensor([1, 0])), "`confidence` must hold finite"),
        ((torch.tensor([0.1, 0.2]), torch.tensor([2, 0])), "`correct` must hold 0/1"),
    ],
)
def test_bad_inputs_name_the_argument(args, match):
    from hf_ext.metrics.infoflow import UncertaintyAUROC

    with pytest.raises(ValueError, match=match):
        UncertaintyAUROC().update(*args)


def test_stratified_groups_shape_is_checked():
    from hf_ext.metrics.functional.infoflow import stratified_auroc

    with pytest.raises(ValueError, match="`groups` must have the shape"):
        stratified_auroc(torch.rand(4), torch.tensor([0, 1, 0, 1]), torch.zeros(3))
