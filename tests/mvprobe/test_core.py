"""The probe math against hand-computed cases and a numpy reference written from the paper's equations."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from hf_ext.mvprobe.core import (
    BRANCHES,
    MultiViewProbe,
    branch_outputs,
    per_label_accuracy,
    standardize_per_sample,
)

D_H, D_W, R, P = 5, 3, 2, 4


def _numpy_forward(x: np.ndarray, m: MultiViewProbe, standardize: bool) -> np.ndarray:
    """Reference logits for one batch ``x`` ``(B, d_H, d_W)`` from the module's parameters."""
    sd = {k: v.detach().double().numpy() for k, v in m.state_dict().items()}
    feats = []
    for b in m.branches:
        u = sd[f"probes.{b}.weight"]
        xt = np.swapaxes(x, 1, 2)
        left = x if b in ("xu", "xxtu") else xt  # the view whose points are kept
        s = left @ u if b in ("xu", "xtu") else left @ (np.swapaxes(left, 1, 2) @ u)
        if standardize:
            flat = s.reshape(len(s), -1)
            s = (s - flat.mean(1)[:, None, None]) / (flat.std(1, ddof=1)[:, None, None] + 1e-8)
        h = np.maximum(np.swapaxes(s, 1, 2) @ sd[f"projections.{b}.weight"].T, 0)
        feats.append(h.reshape(len(x), -1))
    rep = np.concatenate(feats, 1) @ sd["encoder.weight"].T + sd["encoder.bias"]
    return rep @ sd["head.weight"].T + sd["head.bias"]


def _module(branches=BRANCHES, standardize=True, seed=0, n_probes=R) -> MultiViewProbe:
    torch.manual_seed(seed)
    return MultiViewProbe(
        D_H, D_W, 3, n_probes=n_probes, proj_dim=P, rep_dim=6, branches=branches, standardize=standardize
    ).double()


def test_branch_shapes_and_gram_order():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, D_H, D_W, generator=g, dtype=torch.float64)
    u = {
        "xu": torch.randn(D_W, R, dtype=torch.float64),
        "xxtu": torch.randn(D_H, R, dtype=torch.float64),
        "xtu": torch.randn(D_H, R, dtype=torch.float64),
        "xtxu": torch.randn(D_W, R, dtype=torch.float64),
    }
    out = branch_outputs(x, u)
    assert [tuple(out[b].shape[1:]) for b in BRANCHES] == [(D_H, R), (D_H, R), (D_W, R), (D_W, R)]
    gram = x @ x.transpose(1, 2)
    torch.testing.assert_close(out["xxtu"], gram @ u["xxtu"], atol=1e-10, rtol=0)
    torch.testing.assert_close(out["xtxu"], x.transpose(1, 2) @ x @ u["xtxu"], atol=1e-10, rtol=0)


def test_branch_outputs_hand_computed():
    x = torch.tensor([[[1.0, 2.0], [0.0, 1.0]]])  # X, 2x2
    u = torch.tensor([[1.0], [1.0]])
    out = branch_outputs(x, {"xu": u, "xxtu": u, "xtu": u, "xtxu": u})
    assert out["xu"].flatten().tolist() == [3.0, 1.0]  # row sums
    assert out["xtu"].flatten().tolist() == [1.0, 3.0]  # column sums
    assert out["xxtu"].flatten().tolist() == [7.0, 3.0]  # X Xᵀ = [[5, 2], [2, 1]]
    assert out["xtxu"].flatten().tolist() == [3.0, 7.0]  # Xᵀ X = [[1, 2], [2, 5]]
    centred = branch_outputs(x, {"xu": u}, x_center=True)["xu"]  # rows minus the column means [0.5, 1.5]
    assert centred.flatten().tolist() == [1.0, -1.0]


@pytest.mark.parametrize("standardize", [True, False])
def test_module_matches_numpy_reference_for_every_branch_subset(standardize):
    x = np.random.RandomState(1).randn(4, D_H, D_W)
    for k in range(1, 5):
        for branches in itertools.combinations(BRANCHES, k):
            m = _module(branches, standardize)
            ours = m(torch.from_numpy(x)).detach().numpy()
            np.testing.assert_allclose(ours, _numpy_forward(x, m, standardize), atol=1e-6)


def test_standardized_branch_has_zero_mean_unit_bessel_std():
    s = torch.randn(3, 7, 2, dtype=torch.float64) * 5 + 2
    z = standardize_per_sample(s).flatten(1)
    torch.testing.assert_close(z.mean(1), torch.zeros(3, dtype=torch.float64), atol=1e-12, rtol=0)
    torch.testing.assert_close(z.std(1), torch.ones(3, dtype=torch.float64), atol=1e-7, rtol=0)


@pytest.mark.parametrize("c", [0.01, 7.0])
def test_scale_invariance_only_with_standardization(c):
    x = torch.randn(3, D_H, D_W, dtype=torch.float64)
    m = _module()
    # exact up to the 1e-8 eps in the denominator: relative error ~ eps / std(branch) (std ~ c^2 for Gram)
    torch.testing.assert_close(m.represent(c * x), m.represent(x), atol=1e-4, rtol=1e-3)
    probex = _module(("xu",), standardize=False)
    assert not torch.allclose(probex.represent(c * x), probex.represent(x), atol=1e-3)


def test_probex_equals_one_branch_mvprobe_and_zero_masked_four_branches():
    x = torch.randn(2, D_H, D_W, dtype=torch.float64)
    one = _module(("xu",), standardize=False)
    four = _module(BRANCHES, standardize=False, seed=1)
    # zero-masking the inactive branches: their encoder columns contribute nothing
    with torch.no_grad():
        four.probes["xu"].weight.copy_(one.probes["xu"].weight)
        four.projections["xu"].weight.copy_(one.projections["xu"].weight)
        four.encoder.weight.zero_()
        four.encoder.weight[:, : R * P] = one.encoder.weight
        four.encoder.bias.copy_(one.encoder.bias)
        four.head.load_state_dict(one.head.state_dict())
    torch.testing.assert_close(four(x), one(x))


def test_probe_side_equivariance_but_no_neuron_permutation_invariance():
    x = torch.randn(2, D_H, D_W, dtype=torch.float64)
    m = _module(("xu",), standardize=True)
    perm = torch.tensor([1, 0])
    ref = m.represent(x)
    with torch.no_grad():
        m.probes["xu"].weight.copy_(m.probes["xu"].weight[:, perm])
        enc = m.encoder.weight.view(-1, R, P)[:, perm].reshape(-1, R * P).clone()
        m.encoder.weight.copy_(enc)
    torch.testing.assert_close(m.represent(x), ref)
    hidden = torch.randperm(D_H, generator=torch.Generator().manual_seed(3))
    assert not torch.allclose(m.represent(x[:, hidden]), ref, atol=1e-4)


def test_gradcheck():
    m = MultiViewProbe(5, 3, 2, n_probes=2, proj_dim=2, rep_dim=4).double()
    x = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: m(t), (x,))


def test_per_label_accuracy():
    assert per_label_accuracy(np.array([[1, 0, 1], [0, 0, 1]]), np.array([[1, 1, 1], [0, 0, 0]])) == 4 / 6
    assert per_label_accuracy(np.array([0, 1]), np.array([0, 0])) == 0.5
    with pytest.raises(ValueError, match="y_pred"):
        per_label_accuracy(np.zeros((2, 3)), np.zeros((2, 2)))


def test_bad_branches_in_module():
    with pytest.raises(ValueError, match="branches"):
        MultiViewProbe(2, 2, 2, branches=("xu", "xu"))
    with pytest.raises(ValueError, match="probes"):
        branch_outputs(torch.zeros(1, 2, 2), {"xy": torch.zeros(2, 1)})
