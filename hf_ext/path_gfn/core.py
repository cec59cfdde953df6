"""The math of GFlowNet training on lifted states, on plain tensors (natural log throughout).

A batch of ``B`` trajectories is stored padded to ``T`` transitions; ``lengths [B]`` holds each one's
true length. Per transition ``t < lengths``: ``log_pf[b, t] = log p_F(s_{t+1} | s_t, W_t)`` and
``log_pb[b, t] = log p_B(s_t | s_{t+1})``; padded entries are 0 and never reach a loss.

Lifting [paper]: the memory ``W_t`` is a deterministic function of the prefix, so ``(s_t, W_t)`` is a
Markov chain on a finite acyclic lifted graph and TB, DB and SubTB apply unchanged; ``W`` adds no
probability term. Flows on lifted states ``log F(s_t, W_t)`` come from the policy's flow head, with
``log F_0 := log Z`` (the learned scalar) and ``log F_T := log R(x)`` [reconstructed].
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = [
    "masked_log_softmax",
    "exploration_probs",
    "check_log_reward",
    "step_mask",
    "trajectory_balance",
    "detailed_balance",
    "subtrajectory_balance",
    "SUBTB_WEIGHTINGS",
]

SUBTB_WEIGHTINGS = ("geometric", "TB", "DB")


def masked_log_softmax(logits: Tensor, mask: Tensor) -> Tensor:
    """``log_softmax`` over the valid actions; invalid ones get ``-inf`` (``masked_fill``, not a large
    negative number). ``logits``, ``mask``: ``[..., A]``. Rows with no valid action must be excluded
    by the caller (they would be NaN).
    """
    return torch.log_softmax(logits.masked_fill(~mask, -math.inf), -1)


def exploration_probs(logits: Tensor, mask: Tensor, epsilon: float) -> Tensor:
    """``p_E = (1 - eps) softmax(masked logits) + eps Uniform(valid)``, mixed in probability space.

    >>> p = exploration_probs(torch.tensor([[0.0, 0.0, 5.0]]), torch.tensor([[True, True, False]]), 0.5)
    >>> p.tolist()
    [[0.5, 0.5, 0.0]]
    """
    p = masked_log_softmax(logits, mask).exp()
    uniform = mask.float() / mask.sum(-1, keepdim=True).clamp(min=1)
    return (1 - epsilon) * p + epsilon * uniform


def check_log_reward(log_reward: Tensor, clip_min: float | None) -> Tensor:
    """Validate ``log R [B]``: NaN always raises; ``-inf`` (``R = 0``) raises unless ``clip_min`` is
    set, in which case every value is clamped to ``>= clip_min``."""
    if torch.isnan(log_reward).any():
        raise ValueError("log_reward contains NaN; check the reward function of the environment.")
    if clip_min is not None:
        return log_reward.clamp(min=clip_min)
    if torch.isneginf(log_reward).any():
        raise ValueError(
            "log_reward contains -inf (a zero reward); pass log_reward_clip_min (e.g. -20.0) to the loss "
            "to clip it."
        )
    return log_reward


def step_mask(lengths: Tensor, max_len: int) -> Tensor:
    """``BoolTensor [B, max_len]``: ``True`` at real transitions ``t < lengths[b]``."""
    return torch.arange(max_len, device=lengths.device)[None] < lengths[:, None]


def trajectory_balance(log_z: Tensor, log_pf: Tensor, log_pb: Tensor, log_reward: Tensor) -> Tensor:
    """Per-trajectory TB residual squared [paper, Malkin et al. 2022]:
    ``(log Z + sum_t log p_F - log R(x) - sum_t log p_B)^2``, shape ``[B]``.

    >>> trajectory_balance(torch.tensor(1.0), torch.tensor([[-0.5, -0.5]]), torch.zeros(1, 2),
    ...                    torch.tensor([0.5])).tolist()
    [0.25]
    """
    return (log_z + log_pf.sum(-1) - log_reward - log_pb.sum(-1)) ** 2


def _state_flows(log_z: Tensor, log_flow: Tensor, log_reward: Tensor, lengths: Tensor) -> Tensor:
    """``log F [B, T+1]`` along each trajectory: ``log Z`` at 0, the flow head inside, ``log R`` at
    ``lengths[b]`` (and after it, where nothing reads it)."""
    batch, max_len = log_flow.shape
    pos = torch.arange(max_len + 1, device=log_flow.device)[None]
    inner = torch.cat([log_flow, log_flow.new_zeros(batch, 1)], -1)
    flows = torch.where(pos >= lengths[:, None], log_reward[:, None], inner)
    return torch.where(pos == 0, log_z.expand(batch, 1), flows)


def detailed_balance(
    log_z: Tensor, log_flow: Tensor, log_pf: Tensor, log_pb: Tensor, log_reward: Tensor, lengths: Tensor
) -> Tensor:
    """Per-trajectory DB loss on lifted states: the mean over ``t < T_b`` of
    ``delta_t^2``, ``delta_t = log F_t + log p_F - log F_{t+1} - log p_B`` [reconstructed, consistent with
    the paper]. ``log_flow [B, T]`` is the flow head at ``(s_t, W_t)``; returns ``[B]``.

    Summing ``delta_t`` along a trajectory gives the TB residual, so zero DB loss implies the target.
    """
    flows = _state_flows(log_z, log_flow, log_reward, lengths)
    delta = flows[:, :-1] + log_pf - flows[:, 1:] - log_pb
    valid = step_mask(lengths, log_pf.shape[1])
    return (delta**2 * valid).sum(-1) / lengths.clamp(min=1)


def subtrajectory_balance(
    log_z: Tensor,
    log_flow: Tensor,
    log_pf: Tensor,
    log_pb: Tensor,
    log_reward: Tensor,
    lengths: Tensor,
    *,
    weighting: str = "geometric",
    lam: float = 0.9,
) -> Tensor:
    """Per-trajectory SubTB loss [Madan et al. 2023; on lifted states reconstructed], shape ``[B]``.

    For ``0 <= i < j <= T_b``: ``delta_ij = log F_i + sum_{t=i}^{j-1} (log p_F - log p_B) - log F_j``;
    the loss is ``sum lam^(j-i) delta_ij^2 / sum lam^(j-i)``. ``weighting="TB"`` keeps only
    ``(0, T_b)`` (equals :func:`trajectory_balance`), ``"DB"`` only ``j = i + 1`` (equals
    :func:`detailed_balance`).
    """
    flows = _state_flows(log_z, log_flow, log_reward, lengths)
    batch, max_len = log_pf.shape
    zero = log_pf.new_zeros(batch, 1)
    cum = torch.cat([zero, (log_pf - log_pb).cumsum(-1)], -1)  # [B, T+1]
    delta = flows[:, :, None] + cum[:, None, :] - cum[:, :, None] - flows[:, None, :]  # [B, i, j]
    idx = torch.arange(max_len + 1, device=log_pf.device)
    span = (idx[None, :] - idx[:, None]).to(log_pf.dtype)  # j - i
    inside = (span > 0)[None] & (idx[None, None, :] <= lengths[:, None, None])
    if weighting == "TB":
        keep = (idx[None, :, None] == 0) & (idx[None, None, :] == lengths[:, None, None])
    elif weighting == "DB":
        keep = (span == 1)[None].expand(batch, -1, -1)
    else:
        keep = torch.ones_like(inside)
    weights = torch.where(inside & keep, lam**span, torch.zeros_like(span))
    return (weights * delta**2).sum((1, 2)) / weights.sum((1, 2))
