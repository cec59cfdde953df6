"""Med-SegLens math on hand-computed and reference cases."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hf_ext.seglens import core


def test_batch_topk_keeps_exactly_k_times_batch_with_ties_by_position():
    h = torch.ones(3, 5)  # all tied
    z = core.batch_topk(h, 2)
    assert int((z != 0).sum()) == 6
    assert z.reshape(-1)[:6].eq(1).all() and z.reshape(-1)[6:].eq(0).all()
    h = torch.rand(16, 40)
    z = core.batch_topk(h, 3)
    assert int((z != 0).sum()) == 48
    assert z[z != 0].min() >= h[z == 0].max()


def test_topk_keeps_exactly_k_per_row():
    h = torch.rand(10, 12) + 0.01
    z = core.topk(h, 4)
    assert ((z != 0).sum(1) == 4).all()
    assert torch.equal(z.sort(1).values[:, -4:], h.sort(1).values[:, -4:])
    assert core.topk(torch.tensor([[2.0, 2.0, 1.0]]), 1).tolist() == [[2.0, 0.0, 0.0]]


def test_hand_example_identity_dictionary_k1():
    W = torch.eye(2)
    h = core.pre_codes(torch.tensor([[3.0, 1.0], [-1.0, 2.0]]), W, torch.zeros(2), torch.zeros(2))
    assert h.tolist() == [[3.0, 1.0], [0.0, 2.0]]
    z = core.topk(h, 1)
    assert z.tolist() == [[3.0, 0.0], [0.0, 2.0]]
    assert (z @ W.T).tolist() == [[3.0, 0.0], [0.0, 2.0]]
    assert core.threshold_codes(h, 1.5).tolist() == [[3.0, 0.0], [0.0, 2.0]]


def test_l1_penalty_and_aux_loss_by_hand():
    z = torch.tensor([[1.0, 0.0, 2.0], [0.5, 0.5, 0.0]])
    assert core.l1_penalty(z).item() == pytest.approx((3.0 + 1.0) / 2)
    residual = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    W = torch.eye(2)[:, [0, 1, 0]]
    h = torch.tensor([[0.2, 0.0, 0.7], [0.1, 0.9, 0.3]])
    dead = torch.tensor([False, True, True])
    # k_aux = 1 over dead latents {1, 2}: row 0 keeps latent 2 (0.7), row 1 keeps latent 1 (0.9)
    recon = torch.tensor([[0.7, 0.0], [0.0, 0.9]])
    assert core.aux_loss(residual, h, W, dead, 1).item() == pytest.approx((residual - recon).pow(2).mean())
    assert core.aux_loss(residual, h, W, torch.zeros(3, dtype=torch.bool), 1).item() == 0.0


def test_parallel_gradient_removed_and_columns_unit():
    W = core.unit_columns(torch.randn(6, 10))
    assert torch.allclose(W.norm(dim=0), torch.ones(10))
    g = core.remove_parallel_grad(W, torch.randn(6, 10))
    assert (g * W).sum(0).abs().max() < 1e-6


def test_normalisation_stats_give_unit_mean_square():
    x = torch.randn(500, 7) * 3 + 5
    mean, scale = core.normalisation_stats(x)
    assert torch.allclose(mean, x.mean(0))
    assert ((x - mean) / scale).pow(2).sum(-1).mean().item() == pytest.approx(7, rel=1e-4)


def test_fvu_and_l0():
    a = torch.tensor([[1.0, 0.0], [3.0, 2.0]])
    assert core.fvu(a, a) == 0.0
    assert core.fvu(a, a.mean(0).expand_as(a)) == pytest.approx(1.0)
    assert core.mean_l0(torch.tensor([[1.0, 0.0, 2.0], [0.0, 0.0, 0.0]])) == 1.0


def test_edits_change_only_the_chosen_latents():
    z = torch.rand(5, 6)
    edits = core.check_edits({1: "ablate", 3: ("scale", 2.0), 4: ("add", 0.5), 5: ("clamp", 7.0)}, 6)
    z2 = core.apply_edits(z, edits)
    assert torch.equal(z2[:, [0, 2]], z[:, [0, 2]])
    assert z2[:, 1].eq(0).all() and torch.allclose(z2[:, 3], 2 * z[:, 3])
    assert torch.allclose(z2[:, 4], z[:, 4] + 0.5) and z2[:, 5].eq(7).all()
    where = torch.tensor([True, False, True, False, False])
    z3 = core.apply_edits(z, edits, where)
    assert torch.equal(z3[~where], z[~where]) and torch.equal(z3[where], z2[where])
    W = core.unit_columns(torch.randn(3, 6))
    delta = core.edit_delta(z, z, W, torch.tensor(2.0))
    assert delta.eq(0).all()


@pytest.mark.parametrize(
    ("edits", "match"),
    [({6: "ablate"}, "latent index"), ({-1: "ablate"}, "latent index"), ({0: ("boost", 1.0)}, "kind")],
)
def test_bad_edits_raise(edits, match):
    with pytest.raises(ValueError, match=match) as err:
        core.check_edits(edits, 6)
    assert "edits" in str(err.value)


def test_pearson_matrix_matches_numpy():
    x, y = torch.randn(50, 4, dtype=torch.float64), torch.randn(50, 3, dtype=torch.float64)
    ref = np.corrcoef(x.numpy().T, y.numpy().T)[:4, 4:]
    assert np.allclose(core.pearson_matrix(x, y).numpy(), ref)
    const = torch.cat([x[:, :1], torch.ones(50, 1, dtype=torch.float64)], 1)
    assert core.pearson_matrix(const, y)[1].eq(0).all()


def test_match_latents_recovers_a_permutation():
    pytest.importorskip("scipy")
    perm = np.random.default_rng(0).permutation(8)
    score = np.eye(8)[:, perm] + 0.01 * np.random.default_rng(1).random((8, 8))
    rows, cols = core.match_latents(score)
    assert (perm[cols] == rows).all()


def test_lesion_dice_hand_cases_and_conventions():
    t = torch.tensor([[[0, 1], [1, 2]]])
    p = torch.tensor([[[0, 1], [0, 0]]])
    assert core.lesion_dice(p, t).tolist() == [pytest.approx(2 * 1 / (1 + 3))]
    assert core.lesion_dice(p, t, labels=(1,)).tolist() == [pytest.approx(2 * 1 / (1 + 2))]
    empty = torch.zeros(1, 2, 2, dtype=torch.long)
    assert core.lesion_dice(empty, empty).tolist() == [1.0]
    assert core.lesion_dice(p, empty).tolist() == [0.0]
    with pytest.raises(ValueError, match="pred"):
        core.lesion_dice(p[0], t[0])


def test_lesion_dice_matches_torchmetrics_on_non_empty_masks():
    tm = pytest.importorskip("torchmetrics.functional.segmentation")
    gen = torch.Generator().manual_seed(0)
    t = (torch.rand(6, 16, 16, generator=gen) > 0.6).long()
    p = (torch.rand(6, 16, 16, generator=gen) > 0.5).long()
    ref = tm.dice_score(p, t, num_classes=2, include_background=False, average="micro", input_format="index")
    assert torch.allclose(core.lesion_dice(p, t, labels=(1,)), ref.float(), atol=1e-6)
