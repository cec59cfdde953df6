"""Data of ``hf-ext bench echo_attention``: synthetic Q/K/V, blob latents, the tiny hosts, the window mask.

Benchmark-only code (EchoAttention, reconstructed; not verified against the paper). The tiny DiTs have random
weights; attn1 is made content-dependent by tying ``to_k`` to ``to_q`` and setting the q/k norm gains to 1.5.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from hf_ext.echo_attention.layout import Layout, flop_costs


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """``||out - ref|| / ||ref||``."""
    return float((out.detach().float() - ref.float()).norm() / ref.float().norm())


def synthetic_qkv(
    seed: int, drift: float, frames: int = 8, side: int = 16, heads: int = 4, head_dim: int = 64
) -> tuple[torch.Tensor, ...]:
    """Video-like ``[1, H, F*side^2, D]`` Q/K/V: X_f = B + drift*f*Delta + 0.05*N_f, per-head projections
    (``W_k = W_q + 0.3 W'`` so attention favours similar tokens; Q scaled by 3 for peaky rows)."""
    g = torch.Generator().manual_seed(seed)
    c = 32
    yy, xx = torch.meshgrid(torch.arange(side) / side, torch.arange(side) / side, indexing="ij")
    pos = torch.stack([yy.flatten(), xx.flatten()], -1)

    def smooth(n: int) -> torch.Tensor:
        fr, ph = torch.randn(n, 2, generator=g) * 2, torch.rand(n, generator=g) * 2 * math.pi
        return torch.cos(2 * math.pi * pos @ fr.T + ph) @ torch.randn(n, c, generator=g) / math.sqrt(n)

    base = smooth(8) + 0.3 * torch.randn(side * side, c, generator=g)
    delta = smooth(4)
    x = torch.cat(
        [base + drift * f * delta + 0.05 * torch.randn(side * side, c, generator=g) for f in range(frames)]
    )
    w = torch.randn(3, heads, c, head_dim, generator=g) / math.sqrt(c)
    q = torch.einsum("sc,hcd->hsd", x, w[0]) * 3.0
    k = torch.einsum("sc,hcd->hsd", x, w[0] + 0.3 * w[1])
    v = torch.einsum("sc,hcd->hsd", x, w[2])
    return q[None], k[None], v[None]


def window_mask(layout: Layout, head_dim: int, budget: float) -> tuple[torch.Tensor, tuple[int, int]]:
    """Static window (radial-style) tile mask ``|df| <= w_t`` and ``|s_q - s_k| <= w_s``, widths chosen so the
    kept-tile FLOPs are the closest to ``budget`` from below (the narrowest window if none fits)."""
    cost = flop_costs(layout, head_dim)
    f = torch.arange(layout.frames).repeat_interleave(layout.n_s)
    s = torch.arange(layout.n_s).repeat(layout.frames)
    best, best_w, best_fl = None, (0, 0), -1.0
    for wt in range(layout.frames):
        for ws in range(layout.n_s):
            mask = ((f[:, None] - f[None]).abs() <= wt) & ((s[:, None] - s[None]).abs() <= ws)
            fl = (cost["estimate"] + cost["exact"] * float(mask.sum())) / cost["dense"]
            if (fl <= budget and fl > best_fl) or best is None:
                best, best_w, best_fl = mask, (wt, ws), fl if fl <= budget else -1.0
    assert best is not None
    return best, best_w


@dataclass(frozen=True)
class BenchHost:
    """One end-to-end host of the benchmark (Part B: tiny Wan, Part C: tiny CogVideoX).

    Attributes:
        model: Name in the rows' ``model`` column.
        part: The rows' ``part`` column.
        build: ``seed -> transformer`` (random weights, eval mode).
        blocks: Attribute holding the transformer blocks (each with an ``attn1``).
        frames_first: Latents are ``[B, F, C, H, W]`` (CogVideoX) rather than ``[B, C, F, H, W]`` (Wan).
    """

    model: str
    part: str
    build: Callable[[int], Any]
    blocks: str
    frames_first: bool = False

    def latents(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, C, F, H, W]`` -> this host's latent layout."""
        return x.transpose(1, 2).contiguous() if self.frames_first else x


def _wan(seed: int) -> Any:
    from hf_ext.testing import tiny_wan_transformer

    return tiny_wan_transformer(seed)


def _cogvideox(seed: int) -> Any:
    from hf_ext.testing import tiny_cogvideox_transformer

    # sincos positional embeddings sized for 32x32 latents at F=8 (recomputed for other frame counts)
    return tiny_cogvideox_transformer(seed, sample_height=32, sample_width=32, sample_frames=29)


WAN = BenchHost("Wan", "B", _wan, "blocks")
COGVIDEOX = BenchHost("CogVideoX", "C", _cogvideox, "transformer_blocks", frames_first=True)


def content_dependent(host: BenchHost, seed: int) -> Any:
    """The host's tiny DiT with attn1 made content-dependent: ``to_k`` tied to ``to_q`` and q/k norm gains 1.5
    (Wan's RMSNorm over the inner dim, CogVideoX's per-head LayerNorm; both have affine weights)."""
    dit = host.build(seed)
    with torch.no_grad():
        for blk in getattr(dit, host.blocks):
            a = blk.attn1
            a.to_k.weight.copy_(a.to_q.weight)
            a.to_k.bias.copy_(a.to_q.bias)
            a.norm_q.weight.fill_(1.5)
            a.norm_k.weight.fill_(1.5)
    return dit


def blob_latents(seed: int, frames: int, side: int = 32, blobs: int = 4) -> torch.Tensor:
    """``[1, 4, F, side, side]`` coloured Gaussian blobs moving one latent pixel per frame."""
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.arange(side).float(), torch.arange(side).float(), indexing="ij")
    out = torch.zeros(4, frames, side, side)
    for _ in range(blobs):
        colour = torch.randn(4, generator=g)
        y0, x0 = (torch.rand(2, generator=g) * side).tolist()
        vy, vx = (torch.randint(-1, 2, (2,), generator=g)).tolist()
        for f in range(frames):
            cy, cx = (y0 + vy * f) % side, (x0 + vx * f) % side
            out[:, f] += colour[:, None, None] * torch.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * 3.0**2))
    return out[None]
