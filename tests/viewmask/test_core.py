"""LFQ quantiser math, the training mask and the masked-only loss, on hand-computed cases."""

from __future__ import annotations

import math

import pytest
import torch

from hf_ext.viewmask.core import (
    lfq_aux_loss,
    lfq_entropy_terms,
    lfq_indices_to_codes,
    lfq_quantize,
    lfq_straight_through,
    masking_ratio,
    viewmask_loss,
    viewmask_masking,
)


def test_sign_quantisation_and_msb_first_index():
    q, idx = lfq_quantize(torch.tensor([0.3, -1.2, 0.0, 2.0]))
    assert q.tolist() == [1.0, -1.0, -1.0, 1.0]  # z = 0 -> -1
    assert idx.item() == 9  # bits 1001, bit 0 most significant


def test_index_code_bijection_over_every_code():
    bits = 8
    idx = torch.arange(2**bits)
    codes = lfq_indices_to_codes(idx, bits)
    assert codes.shape == (256, 8) and set(codes.unique().tolist()) == {-1.0, 1.0}
    q, back = lfq_quantize(codes)
    assert torch.equal(back, idx) and torch.equal(q, codes)
    assert lfq_indices_to_codes(torch.tensor(6), 4).tolist() == [-1.0, 1.0, 1.0, -1.0]


def test_straight_through_forward_is_q_and_gradient_is_identity():
    z = torch.tensor([[0.3, -1.2, 0.0, 2.0]], requires_grad=True)
    q, _ = lfq_quantize(z)
    out = lfq_straight_through(z, q)
    assert torch.equal(out, q)
    w = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    (out * w).sum().backward()
    assert torch.equal(z.grad, w)


def test_entropy_at_zero_latent_is_d_log2():
    per_sample, codebook = lfq_entropy_terms(torch.zeros(5, 4))
    assert per_sample.item() == pytest.approx(4 * math.log(2), rel=1e-6)
    assert codebook.item() == pytest.approx(4 * math.log(2), rel=1e-6)


def test_batch_using_every_code_equally_has_full_codebook_entropy():
    d = 3
    z = lfq_indices_to_codes(torch.arange(2**d), d)  # each code once, confidently
    per_sample, codebook = lfq_entropy_terms(z)
    assert codebook.item() == pytest.approx(d * math.log(2), rel=1e-5)
    assert per_sample.item() == pytest.approx(0.0, abs=1e-4)


def test_commitment_and_aux_loss_hand_values():
    z = torch.tensor([[0.5, -2.0]])
    q, _ = lfq_quantize(z)
    _, parts = lfq_aux_loss(z, q)
    assert parts["commitment"].item() == pytest.approx(((0.5 - 1) ** 2 + (-2 + 1) ** 2) / 2)
    # z = 0: both entropies are 2 log 2 (entropy term 0), commitment mean((0 - (-1))^2) = 1
    zero = torch.zeros(3, 2)
    loss, parts = lfq_aux_loss(zero, lfq_quantize(zero)[0])
    assert parts["per_sample_entropy"].item() == pytest.approx(2 * math.log(2), rel=1e-6)
    assert loss.item() == pytest.approx(0.25, abs=1e-6)
    weighted, _ = lfq_aux_loss(zero, -torch.ones(3, 2), entropy_weight=0.0, commitment_weight=2.0)
    assert weighted.item() == pytest.approx(2.0)


def test_peer_cross_check_with_vector_quantize_pytorch():
    vq = pytest.importorskip("vector_quantize_pytorch")
    lfq = vq.LFQ(
        dim=4,
        codebook_size=16,
        entropy_loss_weight=0.1,
        commitment_loss_weight=0.25,
        diversity_gamma=1.0,
    )
    z = torch.randn(2, 6, 4, generator=torch.Generator().manual_seed(0))
    _, indices, aux = lfq(z, inv_temperature=100.0)
    q, mine = lfq_quantize(z)
    assert torch.equal(indices, mine)
    ours, _ = lfq_aux_loss(z, q)
    assert ours.item() == pytest.approx(float(aux), rel=1e-4)


def test_masking_ratio_values():
    r = torch.tensor([0.0, 0.5, 1.0])
    assert masking_ratio(r).tolist() == pytest.approx([1.0, math.cos(math.pi / 4), 0.0], abs=1e-7)
    assert masking_ratio(r, "linear").tolist() == pytest.approx([1.0, 0.5, 0.0])
    with pytest.raises(ValueError, match="`schedule`.*'square'"):
        masking_ratio(r, "square")


@pytest.mark.parametrize(
    ("r", "schedule", "expected"),
    [
        (0.0, "cosine", 192),
        (0.5, "cosine", math.ceil(math.cos(math.pi / 4) * 192)),  # 136
        (0.999, "cosine", 1),  # ceil(0.30) = 1
        (0.25, "linear", 144),
        (1.0, "linear", 1),  # max(1, 0)
    ],
)
def test_masked_count_for_a_forced_draw(r, schedule, expected):
    tokens = torch.randint(0, 16, (3, 4, 64), generator=torch.Generator().manual_seed(1))
    ids, loss_mask = viewmask_masking(
        tokens, mask_token_id=16, schedule=schedule, r=torch.full((3,), r), generator=torch.Generator()
    )
    assert loss_mask.sum(-1).tolist() == [expected] * 3
    assert not loss_mask[:, :64].any()  # view 0 never masked
    assert torch.equal(ids == 16, loss_mask)
    assert torch.equal(ids[~loss_mask], tokens.flatten(1)[~loss_mask])


def test_view_zero_never_masked_and_masks_spread_evenly_over_targets():
    tokens = torch.randint(0, 16, (2000, 4, 16), generator=torch.Generator().manual_seed(2))
    _, loss_mask = viewmask_masking(tokens, mask_token_id=16, generator=torch.Generator().manual_seed(3))
    per_view = loss_mask.view(2000, 4, 16).sum((0, 2)).double()
    assert per_view[0] == 0
    counts = per_view[1:]
    chi2 = float(((counts - counts.mean()) ** 2 / counts.mean()).sum())
    assert chi2 < 13.82  # chi-square, 2 degrees of freedom, p = 0.001


def test_cond_drop_masks_the_whole_conditioning_view():
    tokens = torch.zeros(64, 2, 4, dtype=torch.long)
    _, loss_mask = viewmask_masking(
        tokens, mask_token_id=8, cond_drop_prob=0.5, generator=torch.Generator().manual_seed(0)
    )
    cond = loss_mask[:, :4]
    assert set(cond.all(-1).tolist()) == {True, False}
    assert torch.equal(cond.all(-1), cond.any(-1))


def test_masking_is_seeded():
    tokens = torch.randint(0, 16, (4, 4, 16), generator=torch.Generator().manual_seed(0))
    a = viewmask_masking(tokens, mask_token_id=16, generator=torch.Generator().manual_seed(5))
    b = viewmask_masking(tokens, mask_token_id=16, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_masking_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match=r"`view_tokens`.*\[0, 16\).*16"):
        viewmask_masking(torch.full((1, 2, 4), 16), mask_token_id=16)
    with pytest.raises(ValueError, match="`view_tokens` must be"):
        viewmask_masking(torch.zeros(2, 4, dtype=torch.long), mask_token_id=16)
    with pytest.raises(ValueError, match="`cond_views`"):
        viewmask_masking(torch.zeros(1, 2, 4, dtype=torch.long), mask_token_id=16, cond_views=(0, 1))


def test_loss_is_mean_cross_entropy_on_masked_positions_only():
    k = 8
    targets = torch.tensor([[1, 2, 3, 4]])
    loss_mask = torch.tensor([[False, True, False, True]])
    logits = torch.zeros(1, 4, k)
    assert viewmask_loss(logits, targets, loss_mask).item() == pytest.approx(math.log(k))
    changed = logits.clone()
    changed[0, 0] = torch.randn(k) * 10
    changed[0, 2] = torch.randn(k) * 10
    assert viewmask_loss(changed, targets, loss_mask).item() == pytest.approx(math.log(k))
    sharp = logits.clone()
    sharp[0, 1, 2] = 5.0  # the target of position 1
    expected = (-(5 - math.log(math.exp(5) + k - 1)) + math.log(k)) / 2
    assert viewmask_loss(sharp, targets, loss_mask).item() == pytest.approx(expected, rel=1e-6)
    with pytest.raises(ValueError, match="`loss_mask`"):
        viewmask_loss(logits, targets, torch.zeros(1, 4, dtype=torch.bool))
