"""Synthetic segmentation cohorts: a smooth "brain" ellipse on a textured background with a lesion (core
blob inside an edema ring), and an acquisition shift between cohorts. Masks are analytic, so Dice is exact.

Labels: 0 background (brain included), 1 edema, 2 core. Cohorts: ``adult`` (large lesions), ``pediatric``
(smaller, more posterior lesions), ``ssa`` (adult-like anatomy under a shifted acquisition: gamma
intensity curve, lower SNR, blur, down/up-sampling, its strength scaled by ``shift``; and optionally a
grating artefact over the brain, ``artefact``), ``healthy`` (no lesion). With ``texture`` every lesion also
carries a fine grating. These phantoms only exercise the mechanics; they carry no clinical meaning.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from hf_ext._registry import paper
from hf_ext._validation import check_float, check_int, check_sequence

COHORTS = ("adult", "pediatric", "ssa", "healthy")
GRATING_CELLS = 10  # periods of the lesion texture and the ssa artefact across the image


@dataclass
class Cohort:
    """Images ``(N, 1, H, W)`` in ``[0, 1]`` and label maps ``(N, H, W)`` of one cohort."""

    name: str
    images: torch.Tensor
    masks: torch.Tensor

    _paper = paper("seglens")

    def __len__(self) -> int:
        return int(self.images.shape[0])

    def loader(self, batch_size: int = 64) -> Iterator[torch.Tensor]:
        """Image batches in order (for :meth:`ActivationStore.collect`)."""
        return iter(self.images.split(batch_size))

    def subset(self, index: slice | torch.Tensor) -> Cohort:
        """The cohort restricted to ``index``."""
        return Cohort(self.name, self.images[index], self.masks[index])


def make_cohorts(
    n_per_cohort: int = 400,
    size: int = 64,
    *,
    cohorts: tuple[str, ...] = COHORTS,
    shift: float = 1.0,
    texture: float = 0.0,
    artefact: float = 0.0,
    contrast: float = 1.0,
    random_state: int = 0,
) -> dict[str, Cohort]:
    """Build the synthetic cohorts.

    Args:
        n_per_cohort: images per cohort.
        size: image side in pixels (a multiple of 16).
        cohorts: which of ``adult``, ``pediatric``, ``ssa``, ``healthy`` to build.
        shift: strength of the ``ssa`` acquisition shift (0 = none, 1 = gamma about 0.6, noise
            x2, blur sigma 1, 2x down/up-sampling).
        texture: amplitude of a fine grating (period ``size / 10`` pixels) on every lesion, a second lesion
            cue beside brightness (0 = none).
        artefact: amplitude of a scanner artefact on ``ssa`` only: the same kind of grating over the whole
            brain, its amplitude drawn per image in ``[0.5, 1.5] * artefact`` (0 = none). A model that
            learned the lesion texture takes the textured brain for lesion.
        contrast: factor on the lesion brightness (edema +0.25, core +0.45 at 1).
        random_state: seed; each cohort draws from its own stream.

    Example:
        >>> c = make_cohorts(4, 32, cohorts=("adult", "ssa"))
        >>> c["ssa"].images.shape, c["ssa"].masks.unique().tolist()
        (torch.Size([4, 1, 32, 32]), [0, 1, 2])
    """
    n = check_int("n_per_cohort", n_per_cohort, low=1)
    size = check_int("size", size, low=16)
    if size % 16:
        raise ValueError(f"`size` must be a multiple of 16, got {size}")
    names = check_sequence("cohorts", cohorts, lambda nm, v: _cohort_name(nm, v), min_length=1)
    shift = check_float("shift", shift, low=0, high=2)
    texture = check_float("texture", texture, low=0, high=1)
    artefact = check_float("artefact", artefact, low=0, high=1)
    contrast = check_float("contrast", contrast, low=0, high=2)
    seed = check_int("random_state", random_state, low=0)
    return {
        name: _cohort(
            name,
            n,
            size,
            shift,
            texture,
            artefact,
            contrast,
            torch.Generator().manual_seed(seed * 7919 + COHORTS.index(name)),
        )
        for name in names
    }


def _cohort_name(name: str, value: object) -> str:
    if value not in COHORTS:
        raise ValueError(f"`{name}` must be one of {', '.join(COHORTS)}, got {value!r}")
    return str(value)


def _uniform(gen: torch.Generator, n: int, low: float, high: float) -> torch.Tensor:
    return low + (high - low) * torch.rand(n, generator=gen)


def _cohort(
    name: str,
    n: int,
    size: int,
    shift: float,
    texture: float,
    artefact: float,
    contrast: float,
    gen: torch.Generator,
) -> Cohort:
    s = size
    yy, xx = torch.meshgrid(torch.arange(s) + 0.5, torch.arange(s) + 0.5, indexing="ij")
    yy, xx = yy[None] / s, xx[None] / s  # (1, H, W) in [0, 1]
    cy, cx = _uniform(gen, n, 0.45, 0.55)[:, None, None], _uniform(gen, n, 0.45, 0.55)[:, None, None]
    ay, ax = _uniform(gen, n, 0.34, 0.42)[:, None, None], _uniform(gen, n, 0.28, 0.36)[:, None, None]
    brain = ((yy - cy) / ay) ** 2 + ((xx - cx) / ax) ** 2 <= 1
    if name in ("adult", "ssa"):
        r_core, ly = _uniform(gen, n, 0.07, 0.11), _uniform(gen, n, -0.45, 0.45)
    else:
        r_core, ly = _uniform(gen, n, 0.035, 0.06), _uniform(gen, n, 0.15, 0.5)
    lx, ratio = _uniform(gen, n, -0.45, 0.45), _uniform(gen, n, 1.6, 2.0)
    ly, lx, r_core = (cy + ly[:, None, None] * ay), (cx + lx[:, None, None] * ax), r_core[:, None, None]
    d = ((yy - ly) ** 2 + (xx - lx) ** 2).sqrt()
    core = (d <= r_core) & brain
    edema = (d <= r_core * ratio[:, None, None]) & brain & ~core
    if name == "healthy":
        core, edema = torch.zeros_like(core), torch.zeros_like(edema)
    masks = edema.long() + 2 * core.long()
    background = _smooth_noise(gen, n, s, cells=8) * 0.08 + _smooth_noise(gen, n, s, cells=s // 4) * 0.04
    bright = _uniform(gen, n, -0.04, 0.04)[:, None, None]
    img = 0.12 + background + brain * (0.33 + bright) + contrast * (edema * 0.25 + core * 0.45)
    img = _blur(img[:, None], 0.6)
    noise = 0.03
    if name == "ssa" and shift > 0:
        img = _downup(img, 1 + shift)
        img = _blur(img, shift)
        gamma = 1 - _uniform(gen, n, 0.3, 0.5)[:, None, None, None] * shift
        img = img.clamp(1e-4, 1) ** gamma
        noise *= 1 + shift
    img = img + noise * torch.randn(img.shape, generator=gen)
    if texture > 0 or (name == "ssa" and artefact > 0):
        amp = texture * (edema | core).float()
        if name == "ssa" and artefact > 0:
            amp = amp + artefact * _uniform(gen, n, 0.5, 1.5)[:, None, None] * brain.float()
        img = img + _blur((amp * _grating(gen, n, s))[:, None], 0.6)
    return Cohort(name, img.clamp(0, 1), masks)


def _grating(gen: torch.Generator, n: int, size: int) -> torch.Tensor:
    """Vertical sinusoidal gratings ``(n, size, size)`` of period ``size / GRATING_CELLS`` pixels, random
    phase (an artefact along one image axis, as from a fixed phase-encoding direction)."""
    phase = _uniform(gen, n, 0, 2 * math.pi)[:, None, None]
    xx = torch.arange(size, dtype=torch.float32)[None, None, :]
    return torch.sin(2 * math.pi * xx * GRATING_CELLS / size + phase).expand(n, size, size)


def _smooth_noise(gen: torch.Generator, n: int, size: int, cells: int) -> torch.Tensor:
    coarse = torch.randn(n, 1, cells, cells, generator=gen)
    return F.interpolate(coarse, size=(size, size), mode="bicubic", align_corners=False)[:, 0]


def _blur(img: torch.Tensor, sigma: float) -> torch.Tensor:
    if sigma <= 0:
        return img
    r = max(1, math.ceil(2.5 * sigma))
    t = torch.arange(-r, r + 1, dtype=img.dtype)
    k = torch.exp(-(t**2) / (2 * sigma**2))
    k = k / k.sum()
    img = F.conv2d(F.pad(img, (r, r, 0, 0), mode="replicate"), k.view(1, 1, 1, -1))
    return F.conv2d(F.pad(img, (0, 0, r, r), mode="replicate"), k.view(1, 1, -1, 1))


def _downup(img: torch.Tensor, factor: float) -> torch.Tensor:
    s = img.shape[-1]
    small = F.interpolate(img, size=(max(4, round(s / factor)),) * 2, mode="area")
    return F.interpolate(small, size=(s, s), mode="bilinear", align_corners=False)
