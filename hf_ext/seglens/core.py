"""Med-SegLens math: SAE codes and losses, error-preserving latent edits, latent matching, Dice.

Shapes: ``a`` is a batch of activation rows ``(M, d)`` (one row per image position), ``h``/``z`` are
pre-sparsity and sparse codes ``(M, n)``, ``W_dec`` is ``(d, n)`` with unit-norm columns (one dictionary
direction per latent), ``W_enc`` is ``(n, d)``. Everything here is pure torch/numpy.

[paper] SAEs on intermediate segmentation activations, BatchTopK codes, latent alignment across models and
cohorts, additive/multiplicative latent steering. [reconstructed] the TopK/BatchTopK equations and
auxiliary loss follow the public SAE literature (Gao et al. 2024; Bussmann et al. 2024); the edit form
``a' = a + W_dec (z' - z)`` (the SAE error term is kept), the matching rule and the Dice conventions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

EDIT_KINDS = ("scale", "add", "clamp", "ablate")


def normalisation_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean ``(d,)`` and one global scale (scalar) so that ``E|(a - mean) / scale|^2 = d``.

    >>> m, s = normalisation_stats(torch.tensor([[1.0, 3.0], [3.0, 1.0]]))
    >>> m.tolist(), round(float(s), 4)
    ([2.0, 2.0], 1.0)
    """
    mean = x.mean(0)
    sq = (x - mean).pow(2).sum(-1).mean() / x.shape[-1]
    return mean, sq.sqrt().clamp_min(1e-8)


def pre_codes(
    a_n: torch.Tensor, W_enc: torch.Tensor, b_enc: torch.Tensor, b_dec: torch.Tensor
) -> torch.Tensor:
    """``h = ReLU(W_enc (a - b_dec) + b_enc)``: ``(M, d) -> (M, n)``, in normalised units."""
    return torch.relu((a_n - b_dec) @ W_enc.T + b_enc)


def batch_topk(h: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the ``k * M`` largest entries of ``h`` over the whole batch, zero the rest [BatchTopK].

    Ties break by position (a stable sort), so exactly ``k * M`` entries are kept.

    >>> batch_topk(torch.tensor([[3.0, 1.0], [2.0, 0.5]]), 1).tolist()
    [[3.0, 0.0], [2.0, 0.0]]
    """
    flat = h.reshape(-1)
    keep = torch.sort(flat, descending=True, stable=True).indices[: k * h.shape[0]]
    out = torch.zeros_like(flat)
    out[keep] = flat[keep]
    return out.view_as(h)


def topk(h: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the ``k`` largest entries of each row of ``h`` [TopK]; ties break by position.

    >>> topk(torch.tensor([[1.0, 3.0, 2.0]]), 2).tolist()
    [[0.0, 3.0, 2.0]]
    """
    keep = torch.sort(h, dim=-1, descending=True, stable=True).indices[:, :k]
    return torch.zeros_like(h).scatter(-1, keep, h.gather(-1, keep))


def threshold_codes(h: torch.Tensor, theta: float | torch.Tensor) -> torch.Tensor:
    """Inference codes of a BatchTopK SAE: ``h * (h > theta)``, each row on its own."""
    return h * (h > theta)


def aux_loss(
    residual: torch.Tensor, h: torch.Tensor, W_dec: torch.Tensor, dead: torch.Tensor, k_aux: int
) -> torch.Tensor:
    """Auxiliary loss: reconstruct the residual ``a - a_hat`` ``(M, d)`` with the ``k_aux`` largest
    pre-activations ``h`` of the dead latents (``dead``: ``(n,)`` bool); mean squared error per element.
    Zero when no latent is dead."""
    n_dead = int(dead.sum())
    if n_dead == 0:
        return residual.new_zeros(())
    z = topk(h[:, dead], min(k_aux, n_dead))
    return (residual - z @ W_dec[:, dead].T).pow(2).mean()


def l1_penalty(z: torch.Tensor) -> torch.Tensor:
    """``mean_rows sum_j z_j`` (the decoder columns are unit-norm, so this is the usual weighted L1)."""
    return z.abs().sum(-1).mean()


def remove_parallel_grad(W_dec: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """The gradient of ``W_dec`` ``(d, n)`` minus its component along each (unit) column."""
    return grad - (grad * W_dec).sum(0, keepdim=True) * W_dec


def unit_columns(W: torch.Tensor) -> torch.Tensor:
    """``W`` ``(d, n)`` with every column scaled to unit L2 norm."""
    return W / W.norm(dim=0, keepdim=True).clamp_min(1e-12)


def fvu(a: torch.Tensor, a_hat: torch.Tensor) -> float:
    """Fraction of variance unexplained ``|a - a_hat|^2 / |a - mean(a)|^2`` over rows ``(M, d)``."""
    return float((a - a_hat).pow(2).sum() / (a - a.mean(0)).pow(2).sum().clamp_min(1e-12))


def mean_l0(z: torch.Tensor) -> float:
    """Mean number of non-zero codes per row."""
    return float((z != 0).sum(-1).float().mean())


def check_edits(edits: Mapping[int, Any], n_latents: int) -> dict[int, tuple[str, float]]:
    """Normalise ``{latent: (kind, value)}`` (``"ablate"`` alone is allowed) and validate it.

    Raises:
        ValueError: a latent index outside ``[0, n_latents)`` or an unknown kind, naming ``edits``.
    """
    out: dict[int, tuple[str, float]] = {}
    for j, edit in dict(edits).items():
        if isinstance(j, bool) or not isinstance(j, (int, np.integer)) or not 0 <= int(j) < n_latents:
            raise ValueError(f"`edits` latent index must be an int in [0, {n_latents}), got {j!r}")
        kind, value = (edit, 0.0) if isinstance(edit, str) else (edit[0], float(edit[1]))
        if kind not in EDIT_KINDS:
            raise ValueError(f"`edits[{j}]` kind must be one of {', '.join(EDIT_KINDS)}, got {kind!r}")
        out[int(j)] = ("scale", 0.0) if kind == "ablate" else (kind, value)
    return out


def apply_edits(
    z: torch.Tensor, edits: Mapping[int, tuple[str, float]], where: torch.Tensor | None = None
) -> torch.Tensor:
    """Edited codes ``z'`` ``(M, n)``: ``scale`` ``z_j * g``, ``add`` ``z_j + a``, ``clamp`` ``z_j = v``;
    only rows where ``where`` ``(M,)`` is true change (all rows when ``None``). ``z`` is not modified.

    >>> apply_edits(torch.tensor([[1.0, 2.0]]), {1: ("add", 0.5)}).tolist()
    [[1.0, 2.5]]
    """
    z_new = z.clone()
    for j, (kind, value) in edits.items():
        col = z[:, j]
        new = (
            col * value if kind == "scale" else col + value if kind == "add" else torch.full_like(col, value)
        )
        z_new[:, j] = new if where is None else torch.where(where, new, col)
    return z_new


def edit_delta(
    z: torch.Tensor, z_new: torch.Tensor, W_dec: torch.Tensor, scale: torch.Tensor
) -> torch.Tensor:
    """Activation change ``scale * W_dec (z' - z)`` ``(M, d)``, in the activation's own units.

    The intervened activation is ``a + delta = a_hat(z') + (a - a_hat(z))``: the edited reconstruction plus
    the SAE error term. With ``z' = z`` the delta is exactly zero, so the activation is unchanged.
    """
    return ((z_new - z) @ W_dec.T) * scale


def pearson_matrix(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Pearson correlation of every column of ``x`` ``(P, n1)`` with every column of ``y`` ``(P, n2)``;
    a constant column correlates 0 with everything. Returns ``(n1, n2)``."""
    xc, yc = x - x.mean(0), y - y.mean(0)
    nx, ny = xc.norm(dim=0), yc.norm(dim=0)
    r = (xc.T @ yc) / (nx[:, None] * ny[None, :]).clamp_min(1e-12)
    return torch.where((nx[:, None] > 0) & (ny[None, :] > 0), r, torch.zeros_like(r))


def match_latents(score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hungarian matching maximising the total ``score`` ``(n1, n2)``: ``(rows, cols)`` index arrays."""
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(-np.asarray(score, dtype=np.float64))
    return rows, cols


def firing_log_ratio(f_b: torch.Tensor, f_a: torch.Tensor, eps: float) -> torch.Tensor:
    """Differential reliance ``log((f_B + eps) / (f_A + eps))`` per latent (``> 0``: fires more on B)."""
    return torch.log((f_b + eps) / (f_a + eps))


def lesion_dice(pred: torch.Tensor, target: torch.Tensor, labels: tuple[int, ...] = (1, 2)) -> torch.Tensor:
    """Per-image Dice of the lesion ``{label in labels}`` between label maps ``(B, H, W)``; ``(B,)``.

    Conventions: both empty -> 1.0; target empty but something predicted -> 0.0.

    >>> t = torch.tensor([[[0, 1], [1, 2]]]); p = torch.tensor([[[0, 1], [0, 0]]])
    >>> lesion_dice(p, t).tolist(), lesion_dice(p, t, labels=(1,)).tolist()
    ([0.5], [0.6666666865348206])
    """
    if pred.shape != target.shape or pred.dim() != 3:
        raise ValueError(
            f"`pred` and `target` must both be (B, H, W), got {tuple(pred.shape)} and {tuple(target.shape)}"
        )
    lab = torch.tensor(labels, device=pred.device)
    p, t = torch.isin(pred, lab).flatten(1), torch.isin(target, lab).flatten(1)
    inter = (p & t).sum(1).float()
    total = (p.sum(1) + t.sum(1)).float()
    return torch.where(total > 0, 2 * inter / total.clamp_min(1), torch.ones_like(total))
