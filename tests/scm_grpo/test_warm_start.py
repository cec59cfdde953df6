"""The verdict-weighted SFT loss and its token weights."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hf_ext.scm_grpo.warm_start import verdict_token_weights, verdict_weighted_loss


def test_unit_weights_equal_the_plain_token_cross_entropy() -> None:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 7, generator=gen)
    labels = torch.randint(7, (3, 5), generator=gen)
    labels[0, :2] = -100
    plain = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
    torch.testing.assert_close(verdict_weighted_loss(logits, labels, torch.ones(3, 5)), plain)


def test_weights_average_the_token_losses() -> None:
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 4, 6, generator=gen)
    labels = torch.randint(6, (2, 4), generator=gen)
    weights = torch.tensor([[0.0, 1.0, 1.0, 8.0], [0.0, 0.0, 1.0, 8.0]])
    ce = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="none").view(2, 4)
    expected = (weights * ce).sum() / weights.sum()
    torch.testing.assert_close(verdict_weighted_loss(logits, labels, weights), expected)
    logits.requires_grad_(True)
    verdict_weighted_loss(logits, labels, weights).backward()
    assert logits.grad is not None and logits.grad[:, 0].abs().sum() == 0  # weight 0: no gradient
    assert logits.grad[0, 3].abs().sum() > logits.grad[0, 1].abs().sum()


def test_all_zero_weights_give_zero_and_bad_shapes_name_the_arguments() -> None:
    logits, labels = torch.zeros(1, 3, 4), torch.zeros(1, 3, dtype=torch.long)
    assert float(verdict_weighted_loss(logits, labels, torch.zeros(1, 3))) == 0.0
    with pytest.raises(ValueError, match="`logits`.*`labels`.*`weights`.*\\(1, 2\\)"):
        verdict_weighted_loss(logits, labels, torch.zeros(1, 2))


def test_token_weights_mark_the_answer_span_only() -> None:
    text = "<think>SUPPORTED?</think><graph>\nE1: a\nC: b\nE1 -> C\n</graph><answer>NOT_SUPPORTED</answer>"
    start = text.rindex("NOT_SUPPORTED")
    offsets = [(0, 0), (0, 7), (7, 16), (start - 8, start), (start, start + 4), (start + 4, start + 13)]
    offsets.append((start + 13, len(text)))
    weights = verdict_token_weights(text, offsets, verdict_weight=3.0)
    assert weights == [1.0, 1.0, 1.0, 1.0, 3.0, 3.0, 1.0]  # the <think> verdict-like word is not weighted


def test_token_weights_reject_bad_inputs() -> None:
    with pytest.raises(ValueError, match="`verdict_weight`.*-1"):
        verdict_token_weights("<answer>SUPPORTED</answer>", [(0, 8)], verdict_weight=-1.0)
    with pytest.raises(ValueError, match="`completion` must hold <answer>"):
        verdict_token_weights("<graph></graph> SUPPORTED", [(0, 8)], verdict_weight=2.0)
