"""Shared builders for the ViewMask tests: a tiny tokenizer and a tiny multi-view transformer."""

from __future__ import annotations

from typing import Any

import torch


def tiny_vq(**overrides: Any) -> Any:
    """A seeded ``LFQAutoencoder`` (16 codes, 4x downsampling, 16 channels unless overridden)."""
    from hf_ext.viewmask import LFQAutoencoder

    torch.manual_seed(0)
    return LFQAutoencoder(**{"codebook_bits": 4, "downsample": 4, "hidden_channels": 16, **overrides})


def tiny_transformer(**overrides: Any) -> Any:
    """A seeded one-layer ``ViewMaskTransformer``: 4 views x 4 tokens, 16 codes, width 16 by default."""
    from hf_ext.viewmask import ViewMaskTransformer

    torch.manual_seed(0)
    args = dict(
        num_views=4,
        tokens_per_view=4,
        codebook_size=16,
        hidden_size=16,
        num_layers=1,
        num_heads=2,
        mlp_size=32,
    )
    return ViewMaskTransformer(**{**args, **overrides})
