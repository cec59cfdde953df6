"""Verdict-weighted SFT, the warm start before SCM-GRPO [reconstructed: not in the paper's abstract].

GRPO learns only from differences within a group, and SCM-GRPO's depth reward is gated by label
correctness: a policy whose verdicts sit at chance gets the depth signal on half its completions, at
random. Plain SFT on gold completions spends almost all of its loss on the graph (tens of tokens) and
little on the verdict (one or a few tokens), so a small model learns the format long before the label.
Weighting the loss on the tokens inside ``<answer>...</answer>`` higher fixes that balance:

    loss = sum_t w_t CE_t / sum_t w_t,  w_t = verdict_weight in the answer, 1 elsewhere, 0 on the prompt

:func:`verdict_token_weights` builds ``w`` from a fast tokenizer's offsets; :func:`verdict_weighted_loss`
is the loss, for a custom SFT loop or a ``compute_loss`` override.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hf_ext._validation import check_float

_OPEN, _CLOSE = "<answer>", "</answer>"


def verdict_token_weights(
    completion: str, offsets: Sequence[tuple[int, int]], *, verdict_weight: float
) -> list[float]:
    """Per-token loss weights of one completion: ``verdict_weight`` on the verdict, 1 elsewhere.

    Args:
        completion: The completion text in the output contract (``...<answer>LABEL</answer>``).
        offsets: ``(start, end)`` character span of each completion token, as returned by a fast tokenizer
            with ``return_offsets_mapping=True``; spans ``(0, 0)`` (special tokens) get weight 1.
        verdict_weight: Weight of the tokens that overlap the text inside the last ``<answer>`` tag (>= 0).

    Returns:
        One weight per token (``len(offsets)`` floats).

    Raises:
        ValueError: ``verdict_weight`` is negative, or ``completion`` has no ``<answer>...</answer>``.

    Example:
        >>> text = "<graph>...</graph><answer>SUPPORTED</answer>"
        >>> verdict_token_weights(text, [(0, 18), (18, 26), (26, 35), (35, 44)], verdict_weight=5.0)
        [1.0, 1.0, 5.0, 1.0]
    """
    verdict_weight = check_float("verdict_weight", verdict_weight, low=0)
    start = completion.rfind(_OPEN)
    end = completion.find(_CLOSE, start + len(_OPEN)) if start >= 0 else -1
    if start < 0 or end < 0:
        raise ValueError(
            f"`completion` must hold {_OPEN}...{_CLOSE} for its verdict to be weighted, got "
            f"{completion[-80:]!r}."
        )
    lo, hi = start + len(_OPEN), end
    return [verdict_weight if a < hi and b > lo and b > a else 1.0 for a, b in offsets]


def verdict_weighted_loss(logits: Any, labels: Any, weights: Any) -> Any:
    """Token cross-entropy averaged with per-token weights (the verdict-weighted SFT loss).

    Args:
        logits: ``(batch, seq, vocab)`` next-token logits, already aligned with ``labels`` (shifted).
        labels: ``(batch, seq)`` target token ids; ``-100`` marks positions without a target.
        weights: ``(batch, seq)`` non-negative weights (0 on the prompt and padding, 1 on the completion,
            ``verdict_weight`` on the verdict); positions labelled ``-100`` count as weight 0.

    Returns:
        A scalar tensor: ``sum(w * CE) / sum(w)`` in nats per weighted token (0 when every weight is 0).

    Example:
        >>> import torch
        >>> logits = torch.zeros(1, 2, 3)
        >>> round(float(verdict_weighted_loss(logits, torch.tensor([[0, 1]]), torch.tensor([[1.0, 4.0]]))), 4)
        1.0986
    """
    import torch.nn.functional as F

    if logits.shape[:2] != labels.shape or labels.shape != weights.shape:
        raise ValueError(
            "`logits` (batch, seq, vocab), `labels` and `weights` (batch, seq) must agree, got "
            f"{tuple(logits.shape)}, {tuple(labels.shape)} and {tuple(weights.shape)}."
        )
    ce = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100, reduction="none")
    w = weights.flatten().float() * (labels.flatten() != -100)
    return (w * ce).sum() / w.sum().clamp_min(1e-12)
