"""ViewMask-1-to-3 math, pure torch: lookup-free quantisation (LFQ), its losses, the training mask and loss.

Top to bottom:

1. LFQ [paper: the tokenizer is MAGVIT-v2's lookup-free quantiser; details reconstructed from MAGVIT-v2 and
   vector-quantize-pytorch's ``LFQ``]: ``q = sign(z)`` per latent channel (``z <= 0 -> -1``), the index is
   the most-significant-bit-first binary number of ``1[q > 0]``, straight-through gradient, entropy and
   commitment auxiliary losses.
2. Masking [paper: random masking; schedule reconstructed, MaskGIT-style]: a ratio ``cos(pi/2 r)`` with
   ``r ~ U(0, 1)``, ``max(1, ceil(ratio * N_tgt))`` positions drawn jointly over every target view; the
   conditioning views are never masked.
3. Loss: cross-entropy over the masked positions only.

The iterative unmasking itself is diffusers' ``AmusedScheduler`` (see ``ViewMaskPipeline``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

SCHEDULES = ("cosine", "linear")


def lfq_bit_weights(bits: int, device: torch.device | None = None) -> torch.Tensor:
    """``[bits]`` int64 weights ``2^(bits-1-i)``: bit 0 is the most significant."""
    return 2 ** torch.arange(bits - 1, -1, -1, device=device, dtype=torch.long)


def lfq_quantize(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sign-quantise latents ``z`` ``[..., d]`` to codes ``q`` in ``{-1, +1}^d`` and their indices ``[...]``.

    ``z > 0 -> +1``, ``z <= 0 -> -1``; index ``sum_i 1[q_i > 0] 2^(d-1-i)`` (the layout of
    vector-quantize-pytorch's ``LFQ``). No gradient flows through ``q``; see :func:`lfq_straight_through`.

    >>> q, idx = lfq_quantize(torch.tensor([0.3, -1.2, 0.0, 2.0]))
    >>> q.tolist(), idx.item()
    ([1.0, -1.0, -1.0, 1.0], 9)
    """
    positive = z > 0
    q = torch.where(positive, torch.ones_like(z), -torch.ones_like(z))
    indices = (positive.long() * lfq_bit_weights(z.shape[-1], z.device)).sum(-1)
    return q, indices


def lfq_indices_to_codes(indices: torch.Tensor, bits: int) -> torch.Tensor:
    """Codes ``[..., bits]`` in ``{-1, +1}`` (float) of integer indices ``[...]`` in ``[0, 2^bits)``."""
    set_bits = (indices.long()[..., None] & lfq_bit_weights(bits, indices.device)) != 0
    return set_bits.float() * 2 - 1


def lfq_straight_through(z: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """``z + sg(q - z)``: equals ``q`` forward, identity gradient to ``z`` backward."""
    return z + (q - z).detach()


def _entropy(p: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    return -(p * p.clamp(min=eps).log()).sum(-1)


def lfq_entropy_terms(
    z: torch.Tensor, *, inv_temperature: float = 100.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(per-sample entropy, codebook entropy)`` in nats, both scalars.

    ``p(c|z) = softmax_c(2 inv_temperature <z, c>)`` over all ``2^d`` codes; the per-sample entropy is
    ``mean_z H(p(.|z))``, the codebook entropy ``H(mean_z p(.|z))``. ``z``: ``[..., d]`` (every leading
    position is one sample). Logs are clamped at ``1e-5`` as in vector-quantize-pytorch.
    """
    bits = z.shape[-1]
    codes = lfq_indices_to_codes(torch.arange(2**bits, device=z.device), bits).to(z.dtype)
    probs = (2 * inv_temperature * z.reshape(-1, bits) @ codes.T).softmax(-1)
    return _entropy(probs).mean(), _entropy(probs.mean(0))


def lfq_aux_loss(
    z: torch.Tensor,
    q: torch.Tensor,
    *,
    entropy_weight: float = 0.1,
    commitment_weight: float = 0.25,
    diversity_gamma: float = 1.0,
    inv_temperature: float = 100.0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """LFQ auxiliary loss ``entropy_weight * L_ent + commitment_weight * L_commit`` (scalar) and its parts.

    ``L_ent = per-sample entropy - diversity_gamma * codebook entropy`` (:func:`lfq_entropy_terms`: confident
    codes, all codes used); ``L_commit = mean ||z - sg(q)||^2`` (per element). ``z``, ``q``: ``[..., d]``.
    The defaults are vector-quantize-pytorch's ``LFQ`` defaults [reconstructed for the paper].
    """
    per_sample, codebook = lfq_entropy_terms(z, inv_temperature=inv_temperature)
    entropy = per_sample - diversity_gamma * codebook
    commit = F.mse_loss(z, q.detach())
    loss = entropy_weight * entropy + commitment_weight * commit
    return loss, {
        "per_sample_entropy": per_sample.detach(),
        "codebook_entropy": codebook.detach(),
        "commitment": commit.detach(),
    }


def masking_ratio(r: torch.Tensor, schedule: str = "cosine") -> torch.Tensor:
    """Mask ratio for uniform draws ``r`` in ``[0, 1)``: ``cos(pi/2 r)`` (cosine) or ``1 - r`` (linear)."""
    if schedule == "cosine":
        return torch.cos(r * math.pi / 2)
    if schedule == "linear":
        return 1 - r
    raise ValueError(f"`schedule` must be one of {SCHEDULES}, got {schedule!r}.")


def viewmask_masking(
    view_tokens: torch.Tensor,
    *,
    mask_token_id: int,
    cond_views: Sequence[int] = (0,),
    schedule: str = "cosine",
    cond_drop_prob: float = 0.0,
    r: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random training mask over the target views of ``view_tokens`` ``[B, V, P]`` (codes in ``[0, K)``).

    [reconstructed, MaskGIT-style] Per sample: ``r ~ U(0, 1)`` (or the given ``r`` ``[B]``), ratio
    ``masking_ratio(r)``, and ``n = max(1, ceil(ratio * N_tgt))`` positions drawn uniformly **jointly** over
    all ``N_tgt = (V - len(cond_views)) * P`` target tokens. Conditioning views are never masked, except
    that with probability ``cond_drop_prob`` a sample also masks all of them (text-only conditioning).

    Returns:
        ``(ids, loss_mask)``: ``ids`` ``[B, V*P]`` long with ``mask_token_id`` at masked positions, and the
        bool ``loss_mask`` ``[B, V*P]`` of those positions.
    """
    if view_tokens.ndim != 3:
        raise ValueError(f"`view_tokens` must be [B, V, P], got shape {tuple(view_tokens.shape)}.")
    if view_tokens.numel() and (int(view_tokens.min()) < 0 or int(view_tokens.max()) >= mask_token_id):
        raise ValueError(
            f"`view_tokens` must hold codes in [0, {mask_token_id}), got values in "
            f"[{int(view_tokens.min())}, {int(view_tokens.max())}]."
        )
    batch, views, per_view = view_tokens.shape
    cond = torch.zeros(views, dtype=torch.bool, device=view_tokens.device)
    cond[list(cond_views)] = True
    if bool(cond.all()):
        raise ValueError(f"`cond_views` must leave a target view, got {tuple(cond_views)} of {views}.")
    is_cond = cond.repeat_interleave(per_view)  # [V*P]
    n_tgt = int((~is_cond).sum())
    dev = generator.device if generator is not None else view_tokens.device
    if r is None:
        r = torch.rand(batch, generator=generator, device=dev)
    n = torch.ceil(masking_ratio(r.to(view_tokens.device).float(), schedule) * n_tgt)
    n = n.clamp(min=1, max=n_tgt).long()  # [B]
    scores = torch.rand(batch, views * per_view, generator=generator, device=dev).to(view_tokens.device)
    scores = scores.masked_fill(is_cond, 2.0)  # conditioning positions rank last
    rank = scores.argsort(-1).argsort(-1)
    loss_mask = rank < n[:, None]
    if cond_drop_prob > 0:
        drop = torch.rand(batch, generator=generator, device=dev).to(view_tokens.device) < cond_drop_prob
        loss_mask = loss_mask | (drop[:, None] & is_cond)
    ids = view_tokens.reshape(batch, -1).masked_fill(loss_mask, mask_token_id)
    return ids, loss_mask


def viewmask_loss(logits: torch.Tensor, targets: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy (nats) over masked positions: ``logits`` ``[B, S, K]``, ``targets`` ``[B, S]``
    codes, ``loss_mask`` ``[B, S]`` bool. Unmasked positions do not enter the loss at all."""
    picked = logits[loss_mask]
    if picked.shape[0] == 0:
        raise ValueError("`loss_mask` must select at least one position, got none.")
    return F.cross_entropy(picked.float(), targets[loss_mask])
