"""Activation capture by forward hooks at a named site of any ``nn.Module`` (transformers
``SegformerForSemanticSegmentation``, the bundled ``TinyUNet``, ...), flattened to one row per position."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from hf_ext._registry import paper
from hf_ext._validation import check_int


def resolve_site(model: nn.Module, site: str) -> nn.Module:
    """The submodule called ``site`` (dotted name; ``stages[2]`` is read as ``stages.2``).

    Raises:
        KeyError: no such module; the message lists the closest names of ``model.named_modules()``.
    """
    name = re.sub(r"\[(\d+)\]", r".\1", site)
    modules = dict(model.named_modules())
    if name not in modules or not name:
        close = difflib.get_close_matches(name, [n for n in modules if n], n=5, cutoff=0.4)
        raise KeyError(f"`site` {site!r} is not a module of the model; close matches: {close}")
    return modules[name]


def site_output(output: object, site: str) -> torch.Tensor:
    """The tensor a hooked module returned; a tuple's first element is used.

    Raises:
        TypeError: the output is not a tensor of rank 2 to 4.
    """
    t = output[0] if isinstance(output, tuple) and output else output
    if not isinstance(t, torch.Tensor) or not 2 <= t.dim() <= 4:
        shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
        raise TypeError(f"`site` {site!r} must output a tensor of rank 2-4, got {shape}")
    return t


def to_rows(t: torch.Tensor) -> torch.Tensor:
    """Flatten a site output to rows ``(M, C)``: ``(B, C, H, W) -> (B*H*W, C)`` (image, y, x order),
    ``(B, N, C) -> (B*N, C)``, ``(B, C)`` unchanged."""
    if t.dim() == 4:
        return t.permute(0, 2, 3, 1).reshape(-1, t.shape[1])
    return t.reshape(-1, t.shape[-1])


def from_rows(rows: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`to_rows` for a tensor shaped like ``like``."""
    if like.dim() == 4:
        b, c, h, w = like.shape
        return rows.reshape(b, h, w, c).permute(0, 3, 1, 2)
    return rows.reshape(like.shape)


@contextmanager
def capture_site(model: nn.Module, site: str) -> Iterator[list[torch.Tensor]]:
    """Record the (detached) output of ``site`` at every forward inside the block; the hook is removed on
    exit, also when the block raises."""
    module = resolve_site(model, site)
    seen: list[torch.Tensor] = []
    handle = module.register_forward_hook(lambda _m, _i, out: seen.append(site_output(out, site).detach()))
    try:
        yield seen
    finally:
        handle.remove()


@dataclass
class Activations:
    """Collected rows ``x`` ``(N, C)`` and their positions ``index`` ``(N, 3)`` = ``(image, y, x)``
    (``y = x = 0`` for rank-2 outputs, ``x = token`` for rank-3), plus the feature-map grid ``(H, W)``."""

    x: torch.Tensor
    index: torch.Tensor
    grid: tuple[int, int]

    _paper = paper("seglens")


class ActivationStore:
    """Collect activations of ``model`` at ``site`` over batches of images [paper: one fixed layer].

    Args:
        model: any ``nn.Module``; it is run in eval mode under ``torch.no_grad``.
        site: dotted module name, e.g. ``"decode_head.linear_fuse"`` or ``"segformer.stages.2"``.
        max_samples: keep at most this many rows (a seeded uniform subsample).
        seed: seed of the subsample.

    Example:
        >>> from hf_ext.seglens import TinyUNet
        >>> acts = ActivationStore(TinyUNet(), "mid").collect([torch.randn(2, 1, 32, 32)])
        >>> acts.x.shape, acts.grid
        (torch.Size([128, 32]), (8, 8))
    """

    _paper = paper("seglens")

    def __init__(self, model: nn.Module, site: str, *, max_samples: int = 200_000, seed: int = 0) -> None:
        resolve_site(model, site)
        self.model, self.site = model, site
        self.max_samples = check_int("max_samples", max_samples, low=1)
        self.seed = check_int("seed", seed, low=0)

    @torch.no_grad()
    def collect(self, batches: Iterable[torch.Tensor]) -> Activations:
        """Run every batch ``(B, C_in, H, W)`` and return the rows at the site."""
        rows, index, grid, offset = [], [], (1, 1), 0
        was_training = self.model.training
        self.model.eval()
        try:
            with capture_site(self.model, self.site) as seen:
                for batch in batches:
                    seen.clear()
                    _forward(self.model, batch)
                    t = seen[-1]
                    rows.append(to_rows(t))
                    index.append(_positions(t, offset))
                    grid = (
                        (t.shape[2], t.shape[3]) if t.dim() == 4 else (t.shape[1] if t.dim() == 3 else 1, 1)
                    )
                    offset += t.shape[0]
        finally:
            self.model.train(was_training)
        x, idx = torch.cat(rows), torch.cat(index)
        if x.shape[0] > self.max_samples:
            keep = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(self.seed))
            keep = keep[: self.max_samples].sort().values
            x, idx = x[keep], idx[keep]
        return Activations(x=x, index=idx, grid=grid)


def _forward(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """Logits of a SegFormer-style (``pixel_values=``, ``.logits``) or plain segmentation model."""
    if hasattr(model, "config") and hasattr(model.config, "model_type"):
        return model(pixel_values=images).logits  # type: ignore[no-any-return]
    return model(images)  # type: ignore[no-any-return]


def _positions(t: torch.Tensor, offset: int) -> torch.Tensor:
    b = t.shape[0]
    h = t.shape[2] if t.dim() == 4 else (t.shape[1] if t.dim() == 3 else 1)
    w = t.shape[3] if t.dim() == 4 else 1
    img, y, x = torch.meshgrid(torch.arange(b) + offset, torch.arange(h), torch.arange(w), indexing="ij")
    return torch.stack([img, y, x], -1).reshape(-1, 3)
