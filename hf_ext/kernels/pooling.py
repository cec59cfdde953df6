"""``pooled_tile_scores``: tile-level attention logits from mean-pooled queries and keys (torch only).

Used by EchoAttention (reconstructed; not verified against the paper) to estimate which attention tiles
matter before any exact tile is computed. Cost: ``2*S*D`` for pooling plus ``2*n_q*n_k*D`` for the matmul.
"""

from __future__ import annotations

import math

import torch


def pooled_tile_scores(
    q: torch.Tensor,
    k: torch.Tensor,
    block: int,
    scale: float,
    kv_valid: torch.Tensor | None = None,
) -> torch.Tensor:
    """Estimated tile logits ``S_hat[t_q, t_k] = mean(q_tq) . mean(k_tk) * scale + log n_valid(t_k)``.

    Means run over the valid rows of each tile (``kv_valid`` masks padding in queries and keys alike);
    the ``log n_valid`` term keeps partly padded key tiles from being over-weighted. Softmax over the
    last dimension gives the estimated tile attention mass ``P_hat``.

    Args:
        q: Queries ``[B, H, S, D]`` (any strides).
        k: Keys ``[B, H, S, D]``.
        block: Tile size ``b`` in tokens; ``S`` need not be a multiple (the last tile is partial).
        scale: Logit scale, usually ``D ** -0.5``.
        kv_valid: *optional* ``[S]`` bool mask of real (non-padding) tokens.

    Returns:
        ``[B, H, ceil(S/b), ceil(S/b)]`` float32 tile logits; a key tile with no valid token gets ``-inf``.

    Example:
        >>> q = torch.ones(1, 1, 4, 2); k = torch.ones(1, 1, 4, 2)
        >>> pooled_tile_scores(q, k, block=2, scale=1.0)[0, 0]
        tensor([[2.6931, 2.6931],
                [2.6931, 2.6931]])
    """
    if q.dim() != 4 or k.shape != q.shape:
        raise ValueError(
            f"`q` and `k` must both be [B, H, S, D] of one shape, got {tuple(q.shape)} and {tuple(k.shape)}."
        )
    if not isinstance(block, int) or block < 1:
        raise ValueError(f"`block` must be an int >= 1, got {block!r}.")
    b, h, s, d = q.shape
    n = math.ceil(s / block)
    valid = torch.ones(s, dtype=torch.bool, device=q.device) if kv_valid is None else kv_valid.to(torch.bool)
    if valid.shape != (s,):
        raise ValueError(f"`kv_valid` must have shape ({s},), got {tuple(valid.shape)}.")
    w = torch.nn.functional.pad(valid.to(torch.float32), (0, n * block - s)).view(n, block)
    count = w.sum(-1)  # [n]

    def pool(x: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.pad(x.to(torch.float32), (0, 0, 0, n * block - s)).view(b, h, n, block, d)
        return torch.einsum("bhnsd,ns->bhnd", x, w) / count.clamp_min(1.0)[:, None]

    logits = torch.einsum("bhqd,bhkd->bhqk", pool(q), pool(k)) * scale
    return logits + torch.where(count > 0, count.clamp_min(1.0).log(), -math.inf)
