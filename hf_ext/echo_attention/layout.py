"""The frame-major token layout of video self-attention, its tiles and bands, and the FLOP counts.

EchoAttention (reconstructed; not verified against the paper). Everything here is [reconstructed] from the
one-line description of the method (Sparse operator + Echo operator + per-head routing); see
``docs/methods/echo_attention.md``. Notation: ``F`` latent frames of ``P`` tokens (frame-major), tiles of
``b`` tokens that never straddle frames (``n_s = ceil(P/b)`` per frame, ``n_t = F*n_s`` in all); a *group*
(band) ``g = (delta, s_q, s_k)`` is the set of tile pairs ``((f, s_q), (f + delta, s_k))``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import torch


@dataclass(frozen=True)
class Layout:
    """Frame-major token layout of one video self-attention call.

    Attributes:
        frames: ``F``, latent frames after patching.
        tokens_per_frame: ``P = (H/p_h) * (W/p_w)``.
        block: Tile size ``b``.
    """

    frames: int
    tokens_per_frame: int
    block: int

    @property
    def n_s(self) -> int:
        """Spatial tiles per frame."""
        return math.ceil(self.tokens_per_frame / self.block)

    @property
    def n_t(self) -> int:
        """Tiles in all."""
        return self.frames * self.n_s

    @property
    def seq_len(self) -> int:
        """``S = F * P`` (unpadded)."""
        return self.frames * self.tokens_per_frame

    @property
    def padded_len(self) -> int:
        """``F * n_s * b``: the length the kernels see."""
        return self.n_t * self.block

    def valid(self, device: torch.device) -> torch.Tensor | None:
        """``[padded_len]`` bool mask of real tokens, or ``None`` when no frame needs padding."""
        if self.tokens_per_frame % self.block == 0:
            return None
        row = torch.arange(self.n_s * self.block, device=device) < self.tokens_per_frame
        return row.repeat(self.frames)

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, H, S, D]`` -> ``[B, H, padded_len, D]``, zero rows at the end of each frame."""
        extra = self.n_s * self.block - self.tokens_per_frame
        if extra == 0:
            return x
        b, h, _, d = x.shape
        x = x.reshape(b, h, self.frames, self.tokens_per_frame, d)
        return torch.nn.functional.pad(x, (0, 0, 0, extra)).reshape(b, h, self.padded_len, d)

    def unpad(self, x: torch.Tensor) -> torch.Tensor:
        """Inverse of :meth:`pad` on the sequence dim (dim 2)."""
        if self.tokens_per_frame % self.block == 0:
            return x
        shape = x.shape
        x = x.reshape(*shape[:2], self.frames, self.n_s * self.block, *shape[3:])
        return x[:, :, :, : self.tokens_per_frame].reshape(*shape[:2], self.seq_len, *shape[3:])

    def delta_index(self, device: torch.device) -> torch.Tensor:
        """``[n_t, n_t]`` frame-offset index ``f_k - f_q + F - 1`` of every tile pair."""
        frame = torch.arange(self.n_t, device=device) // self.n_s
        return frame[None, :] - frame[:, None] + self.frames - 1

    def pool_log_count(self, pool: int, device: torch.device) -> torch.Tensor:
        """``[n_t * pool]``: log of the real tokens under each of the ``pool`` pooled keys of every tile."""
        real = torch.arange(self.n_s * self.block, device=device) < self.tokens_per_frame
        count = real.view(self.n_s, pool, self.block // pool).sum(-1).float().repeat(self.frames, 1)
        return count.log().flatten()

    @cached_property
    def bands(self) -> dict[str, torch.Tensor]:
        """Index tensors of the group view ``[G, F]`` (``G = (2F-1) * n_s^2``, member = query frame).

        ``pair`` flat pair index ``t_q * n_t + t_k``; ``valid`` both frames exist; ``tq``/``tk`` tile ids;
        ``delta`` the frame-offset index ``delta + F - 1`` of each group.
        """
        f, ns = self.frames, self.n_s
        delta = torch.arange(-(f - 1), f).view(-1, 1, 1, 1)
        sq = torch.arange(ns).view(1, -1, 1, 1)
        sk = torch.arange(ns).view(1, 1, -1, 1)
        fq = torch.arange(f).view(1, 1, 1, -1)
        fk = fq + delta
        valid, tq, tk = torch.broadcast_tensors(
            (fk >= 0) & (fk < f), fq * ns + sq, fk.clamp(0, f - 1) * ns + sk
        )
        flat = (tq * self.n_t + tk).reshape(-1, f)
        return {
            "pair": flat,
            "valid": valid.reshape(-1, f),
            "tq": tq.reshape(-1, f),
            "tk": tk.reshape(-1, f),
            "delta": (delta + f - 1).expand(-1, ns, ns, 1).reshape(-1),
        }


def flop_costs(layout: Layout, head_dim: int, pool: int = 0) -> dict[str, float]:
    """FLOP counts: dense ``4 S^2 D`` (unpadded S), estimate ``2 S D + 2 n_t^2 D``, exact tile ``4 b^2 D``
    (padding included), echoed tile ``6 b D`` (representative echo); with ``pool`` pooled keys per tile also
    ``pool_keys`` ``2 S D`` (pooled keys and values) and ``coarse`` ``4 b pool D`` per synthesised tile."""
    s, b, d = layout.seq_len, layout.block, head_dim
    return {
        "dense": 4.0 * s * s * d,
        "estimate": 2.0 * layout.padded_len * d + 2.0 * layout.n_t**2 * d,
        "exact": 4.0 * b * b * d,
        "echo": 6.0 * b * d,
        "pool_keys": 2.0 * layout.padded_len * d,
        "coarse": 4.0 * b * pool * d,
    }
