"""The five architectures of the learnability harness: grids ``(B, 1, H, W)`` -> next-state logits.

Sizes are the prototype settings hf-ext chose [reconstructed]; the paper's networks are not known.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from hf_ext._validation import check_choice, check_int, check_sequence
from hf_ext.ca_learnability.automata import BOUNDARIES
from hf_ext.ca_learnability.config import ARCHITECTURES


class _TokenHead(nn.Module):
    """A timm ``VisionTransformer`` with one token per cell and a per-token linear read-out."""

    def __init__(self, grid: tuple[int, int]) -> None:
        super().__init__()
        from timm.models.vision_transformer import VisionTransformer

        self.grid = grid
        self.encoder = VisionTransformer(
            img_size=grid,
            patch_size=1,
            in_chans=1,
            num_classes=0,
            global_pool="",
            class_token=False,
            embed_dim=32,
            depth=2,
            num_heads=2,
            mlp_ratio=2.0,
        )
        self.head = nn.Linear(32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.encoder(x)  # (B, H * W, 32), row-major cells
        return self.head(tokens).transpose(1, 2).reshape(x.shape[0], 1, *self.grid)


class _WindowTokens(nn.Module):
    """A timm ``VisionTransformer`` on each cell's ``(2k+1)`` window: attention stays inside the window."""

    def __init__(self, steps: int, mode: str) -> None:
        super().__init__()
        from timm.models.vision_transformer import VisionTransformer

        self.side, self.mode = 2 * steps + 1, mode
        self.encoder = VisionTransformer(
            img_size=self.side,
            patch_size=1,
            in_chans=1,
            num_classes=1,
            global_pool="avg",
            class_token=False,
            embed_dim=32,
            depth=2,
            num_heads=2,
            mlp_ratio=2.0,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, _, h, w = x.shape
        k = self.side // 2
        padded = nn.functional.pad(x, (k, k, k, k), mode=self.mode)
        windows = padded.unfold(2, self.side, 1).unfold(3, self.side, 1)  # (B, 1, H, W, side, side)
        logits = self.encoder(windows.reshape(b * h * w, 1, self.side, self.side))  # (B * H * W, 1)
        return logits.reshape(b, 1, h, w)


class _Global(nn.Module):
    """Flatten -> Linear(HW, 512) -> ReLU -> Linear(512, HW): no locality prior at all."""

    def __init__(self, grid: tuple[int, int], hidden: int = 512) -> None:
        super().__init__()
        cells = grid[0] * grid[1]
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(cells, hidden), nn.ReLU(), nn.Linear(hidden, cells))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).reshape(x.shape)


def build_model(
    arch: str, *, steps: int = 1, grid: tuple[int, int] = (16, 16), boundary: str = "wrap"
) -> nn.Module:
    """A freshly initialised network for the k-step task (seed torch before calling for reproducibility).

    Args:
        arch: ``"cnn"``: ``k`` x [Conv3x3(16) + ReLU] -> Conv1x1(16) + ReLU -> Conv1x1(1), whose receptive
            field is exactly the ``(2k+1)``-window; ``"mlp_patch"``: an MLP ``(2k+1)**2 -> 64 -> 64 -> 1``
            shared over cells on each cell's window (written as a ``(2k+1)``-convolution followed by 1x1
            convolutions, the same function class as unfolding); ``"mlp_global"``: a dense MLP over the
            whole grid (hidden 512); ``"vit"``: a timm ``VisionTransformer`` with one token per cell (embed
            32, depth 2, 2 heads, MLP ratio 2; learned position embeddings, no class token) and a per-token
            Linear(32, 1); ``"vit_window"``: the same timm transformer run on each cell's ``(2k+1)`` window
            (``(2k+1)**2`` tokens, average-pooled to one logit), i.e. attention local to the window and
            shared over cells [reconstructed: hf-ext's local-attention variant, since the global ``"vit"``
            does not learn at this budget].
        steps: ``k``.
        grid: ``(H, W)``; only ``mlp_global`` and ``vit`` depend on it.
        boundary: ``"wrap"`` uses circular padding in the convolutions and windows, ``"zero"`` zero padding.

    Raises:
        ValueError: unknown ``arch`` (the message lists the known ones).
    """
    arch = check_choice("arch", arch, ARCHITECTURES)
    steps = check_int("steps", steps, low=1)
    size = tuple(check_sequence("grid", grid, lambda n, v: check_int(n, v, low=1), length=2))
    mode = "circular" if check_choice("boundary", boundary, BOUNDARIES) == "wrap" else "zeros"
    conv: Any = nn.Conv2d
    if arch == "cnn":
        layers: list[nn.Module] = []
        for i in range(steps):
            layers += [conv(1 if i == 0 else 16, 16, 3, padding=1, padding_mode=mode), nn.ReLU()]
        return nn.Sequential(*layers, conv(16, 16, 1), nn.ReLU(), conv(16, 1, 1))
    if arch == "mlp_patch":
        side = 2 * steps + 1
        return nn.Sequential(
            conv(1, 64, side, padding=steps, padding_mode=mode),
            nn.ReLU(),
            conv(64, 64, 1),
            nn.ReLU(),
            conv(64, 1, 1),
        )
    if arch == "mlp_global":
        return _Global((size[0], size[1]))
    if arch == "vit_window":
        return _WindowTokens(steps, "circular" if mode == "circular" else "constant")
    return _TokenHead((size[0], size[1]))
