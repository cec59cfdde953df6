"""``TinyUNet``: a small two-level U-Net (BatchNorm, ReLU) for the segmentation examples and tests."""

from __future__ import annotations

import torch
from torch import nn

from hf_ext._registry import paper


def _block(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=False),
        nn.Conv2d(c_out, c_out, 3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=False),
    )


class TinyUNet(nn.Module):
    """U-Net with two down and two up levels (Ronneberger et al., 2015, shrunk).

    ``(B, in_channels, H, W) -> (B, num_labels, H, W)`` logits; ``H`` and ``W`` divisible by 4. Sites for
    hooks: ``enc1``, ``enc2``, ``mid`` (the bottleneck, ``4 * width`` channels at stride 4), ``dec2``,
    ``dec1`` (``width`` channels at full resolution), ``head``.

    Args:
        in_channels: image channels.
        num_labels: output classes.
        width: channels of the first level (doubling per level).
    """

    _paper = paper("seglens")

    def __init__(self, in_channels: int = 1, num_labels: int = 3, width: int = 8) -> None:
        super().__init__()
        w = width
        self.enc1, self.enc2, self.mid = _block(in_channels, w), _block(w, 2 * w), _block(2 * w, 4 * w)
        self.pool = nn.MaxPool2d(2)
        self.up2 = nn.ConvTranspose2d(4 * w, 2 * w, 2, stride=2)
        self.dec2 = _block(4 * w, 2 * w)
        self.up1 = nn.ConvTranspose2d(2 * w, w, 2, stride=2)
        self.dec1 = _block(2 * w, w)
        self.head = nn.Conv2d(w, num_labels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        m = self.mid(self.pool(e2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))
        return self.head(d1)  # type: ignore[no-any-return]
