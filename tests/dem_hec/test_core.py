"""Dem-HEC math: entropies, high-entropy generation, InfoNCE and KD against references."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from hf_ext.testing import requires

pytestmark = requires("timm", "metrics")


def test_prediction_entropy_bounds():
    from hf_ext.dem_hec.core import prediction_entropy

    assert prediction_entropy(torch.zeros(2, 7)).tolist() == pytest.approx([1.0, 1.0])
    assert float(prediction_entropy(torch.tensor([[100.0, 0.0, 0.0]]))) < 1e-6


def test_token_entropy_matches_numpy():
    from hf_ext.dem_hec.core import token_entropy

    f = torch.tensor([1.0, 2.0, 4.0, 0.5]).view(1, 4, 1, 1)
    v = f.flatten().numpy().astype(np.float64)
    z = (v - v.mean()) / v.std(ddof=1)
    p = np.exp(z) / np.exp(z).sum()
    expected = -(p * np.log(p)).sum() / math.log(4)
    assert float(token_entropy(f)) == pytest.approx(expected, rel=1e-5)
    out = token_entropy(torch.randn(3, 8, 5, 5))
    assert out.shape == (3,) and ((out >= 0) & (out <= 1)).all()


def _toy_model():
    from hf_ext.testing import tiny_timm_model

    return tiny_timm_model("test_efficientnet", seed=0, num_classes=4)


@pytest.mark.parametrize("norm,eps", [("linf", 8 / 255), ("l2", 0.5)])
def test_entropy_pgd_stays_in_ball_and_leaves_model_untouched(norm, eps):
    from hf_ext.dem_hec.core import entropy_pgd

    model = _toy_model().train()
    model.blocks[0].eval()  # a mixed mode must be restored exactly
    modes = [m.training for m in model.modules()]
    bn = next(m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d))
    stats = bn.running_mean.clone()
    x = torch.rand(4, 3, 32, 32)
    x_he = entropy_pgd(
        model, x, eps=eps, steps=2, step_size=eps / 2, norm=norm, generator=torch.Generator().manual_seed(0)
    )
    delta = (x_he - x).flatten(1)
    if norm == "linf":
        assert delta.abs().max() <= eps + 1e-6
    else:
        assert delta.norm(dim=1).max() <= eps + 1e-6
    assert x_he.min() >= 0 and x_he.max() <= 1 and not x_he.requires_grad
    assert all(p.grad is None for p in model.parameters())
    torch.testing.assert_close(bn.running_mean, stats)
    assert [m.training for m in model.modules()] == modes


def test_entropy_ascent_increases_objective():
    from hf_ext.dem_hec._modes import eval_mode
    from hf_ext.dem_hec.core import entropy_pgd, high_entropy_objective

    model = _toy_model()
    x = torch.rand(8, 3, 32, 32)
    eps = 16 / 255

    def objective(z):
        with eval_mode(model), torch.no_grad():
            return float(high_entropy_objective(model, z, feature_entropy="token", beta=1.0, stage=-2).mean())

    start = entropy_pgd(
        model, x, eps=eps, steps=0, step_size=eps / 2, generator=torch.Generator().manual_seed(3)
    )
    ascended = entropy_pgd(
        model, x, eps=eps, steps=5, step_size=eps / 4, generator=torch.Generator().manual_seed(3)
    )
    assert objective(ascended) > objective(start)


def test_info_nce_matches_numpy():
    from hf_ext.dem_hec.core import info_nce

    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(5, 6, generator=g), torch.randn(5, 6, generator=g)
    an = a.numpy() / np.linalg.norm(a.numpy(), axis=1, keepdims=True)
    bn = b.numpy() / np.linalg.norm(b.numpy(), axis=1, keepdims=True)
    logits = an @ bn.T / 0.2
    row = -np.mean(np.diag(logits) - np.log(np.exp(logits).sum(1)))
    col = -np.mean(np.diag(logits) - np.log(np.exp(logits).sum(0)))
    assert float(info_nce(a, b, 0.2)) == pytest.approx(row, rel=1e-5)
    assert float(info_nce(a, b, 0.2, symmetric=True)) == pytest.approx((row + col) / 2, rel=1e-5)


def test_kd_matches_timm_logit_distillation():
    from timm.task import LogitDistillationTask

    from hf_ext.dem_hec.core import distillation_kl

    student, teacher = _toy_model(), _toy_model()
    with torch.no_grad():
        for p in teacher.parameters():
            p.add_(0.05)
    task = LogitDistillationTask(student, teacher, temperature=2.0, verbose=False)
    task.eval()
    x, y = torch.rand(4, 3, 32, 32), torch.tensor([0, 1, 2, 3])
    out = task(x, y)
    with torch.no_grad():
        expected = distillation_kl(student(x), teacher(x), 2.0)
    assert float(out["kd_loss"]) == pytest.approx(float(expected), rel=1e-5)
