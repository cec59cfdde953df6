"""Cross-view consistency figures for four-view renders at azimuths 0, 90, 180, 270 (numpy).

* silhouette: a pixel is foreground when any channel is below ``threshold`` (background is white);
* mirror IoU [reconstructed consistency score]: orthographic views 180 degrees apart have silhouettes that
  are exact horizontal mirrors, so ``IoU(sil(a), flip(sil(a + 180)))`` is 1 for any consistent pair;
* visual hull: carve a ``G^3`` grid with the four silhouettes (each ``s x s`` pixel block votes by
  majority) and compare hulls by IoU.

The camera convention is the one of :mod:`hf_ext.viewmask.data`.
"""

from __future__ import annotations

import numpy as np


def silhouettes(images: np.ndarray, *, threshold: float = 0.5) -> np.ndarray:
    """Foreground masks ``[..., H, W]`` bool of images ``[..., H, W, 3]`` in ``[0, 1]``."""
    images = np.asarray(images)
    if images.shape[-1] != 3:
        raise ValueError(f"`images` must be [..., H, W, 3], got shape {images.shape}.")
    return images.min(axis=-1) < threshold


def iou(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two bool masks of one shape; 1.0 when both are empty."""
    a, b = np.asarray(a, bool), np.asarray(b, bool)
    if a.shape != b.shape:
        raise ValueError(f"`a` and `b` must have one shape, got {a.shape} and {b.shape}.")
    union = np.logical_or(a, b).sum()
    return float(np.logical_and(a, b).sum() / union) if union else 1.0


def mirror_iou(sil_a: np.ndarray, sil_b: np.ndarray) -> float:
    """IoU of silhouette ``sil_a`` ``[H, W]`` with the horizontal mirror of ``sil_b`` (the view 180 degrees
    away). 1.0 for ground-truth renders.

    >>> s = np.zeros((4, 4), bool); s[1:3, 0] = True
    >>> mirror_iou(s, s[:, ::-1])
    1.0
    """
    return iou(sil_a, np.asarray(sil_b)[:, ::-1])


def _voxel_votes(sil: np.ndarray, grid: int) -> np.ndarray:
    """``[G, G]`` bool ``[v, u]``: majority of each ``s x s`` pixel block of ``sil`` ``[H, W]``."""
    s = sil.shape[0] // grid
    blocks = sil[: grid * s, : grid * s].reshape(grid, s, grid, s)
    return blocks.mean(axis=(1, 3)) > 0.5


def visual_hull(sils: np.ndarray, *, grid: int = 8) -> np.ndarray:
    """Carve a ``[G, G, G]`` (``[x, y, z]``) grid with four silhouettes ``[4, H, W]`` at azimuths
    0, 90, 180, 270: a voxel survives when every view's block at its projection is foreground."""
    sils = np.asarray(sils, bool)
    if sils.ndim != 3 or sils.shape[0] != 4:
        raise ValueError(f"`sils` must be [4, H, W] (azimuths 0, 90, 180, 270), got shape {sils.shape}.")
    if sils.shape[1] % grid or sils.shape[2] % grid:
        raise ValueError(f"`grid` must divide the silhouette size {sils.shape[1:]}, got {grid}.")
    v = [_voxel_votes(s, grid)[::-1].T for s in sils]  # each [u, z] with z up
    x = np.arange(grid)
    hull = np.ones((grid, grid, grid), bool)
    hull &= v[0][x][:, None, :]  # az 0: u = x
    hull &= v[1][x][None, :, :]  # az 90: u = y
    hull &= v[2][grid - 1 - x][:, None, :]  # az 180: u = G-1-x
    hull &= v[3][grid - 1 - x][None, :, :]  # az 270: u = G-1-y
    return hull
