"""The multi-view probe of MVProbe and its one-view special case, ProbeX, in pure torch.

A probe reads one weight matrix ``X`` of shape ``(d_H, d_W)`` per model (batched ``(B, d_H, d_W)``) and maps
it to a representation ``(B, rep_dim)`` and logits ``(B, n_outputs)``:

1. views [paper]: the row view ``X`` (points = the ``d_H`` rows) and the column view ``Xᵀ`` (points = the
   ``d_W`` columns), each optionally centred over its points and L2-normalised per point;
2. four branches, each with its own ``r`` learned probes [paper]::

       xu   = X U1          (d_H, r)     U1: (d_W, r)   first order, ProbeX's only branch
       xxtu = X (Xᵀ U2)     (d_H, r)     U2: (d_H, r)   row Gram X Xᵀ, evaluated right to left
       xtu  = Xᵀ U3         (d_W, r)     U3: (d_H, r)
       xtxu = Xᵀ (X U4)     (d_W, r)     U4: (d_W, r)   column Gram Xᵀ X

3. per-sample standardisation of each branch over its whole ``(points, r)`` block (MVProbe only) [paper];
4. per branch: a bias-free ``Linear(points -> p)`` over the point axis, ReLU, flatten to ``r·p`` [paper];
5. concatenation in the order ``xu, xxtu, xtu, xtxu``, ``Linear(-> rep_dim)``, then the ``Linear`` head.

``xu`` is homogeneous of degree 1 in ``X`` and the Gram branches of degree 2, so unscaled Gram branches
dominate large-norm layers and vanish for small ones; standardisation balances them and makes the
representation
invariant to ``X -> cX`` (``c > 0``, up to the 1e-8 eps) [reconstructed analysis]. Neither probe is invariant
to permuting hidden neurons: the projection mixes the point axis with fixed weights, so both assume a zoo that
shares one ancestor (aligned neuron order).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from hf_ext._registry import paper

BRANCHES = ("xu", "xxtu", "xtu", "xtxu")
ROW_BRANCHES = ("xu", "xxtu")  # points are the d_H rows of X
EPS = 1e-8


def _view(x: torch.Tensor, *, center: bool, row_norm: bool) -> torch.Tensor:
    """Centre ``x`` ``(B, points, dim)`` over the point axis and/or L2-normalise each point [paper]."""
    if center:
        x = x - x.mean(dim=-2, keepdim=True)
    if row_norm:
        x = x / x.norm(dim=-1, keepdim=True).clamp_min(EPS)
    return x


def branch_outputs(
    x: torch.Tensor,
    probes: dict[str, torch.Tensor],
    *,
    x_center: bool = False,
    x_row_norm: bool = False,
) -> dict[str, torch.Tensor]:
    """The raw branch outputs of one batch of weight matrices [paper].

    Args:
        x: ``(B, d_H, d_W)`` weight matrices.
        probes: branch name -> probe matrix: ``(d_W, r)`` for ``xu`` / ``xtxu``, ``(d_H, r)`` for
            ``xxtu`` / ``xtu``. Only the branches given are computed.
        x_center: Subtract the mean over the point axis of each view first.
        x_row_norm: L2-normalise each point of each view first.

    Returns:
        branch name -> ``(B, d_H, r)`` (``xu``, ``xxtu``) or ``(B, d_W, r)`` (``xtu``, ``xtxu``). Gram
        products are evaluated right to left, ``O(d_H d_W r)`` per model; no ``d x d`` Gram is formed.

    >>> x = torch.eye(2)[None]; u = torch.ones(2, 1)
    >>> branch_outputs(x, {"xu": u, "xxtu": u})["xxtu"].squeeze(0).tolist()
    [[1.0], [1.0]]
    """
    unknown = set(probes) - set(BRANCHES)
    if unknown:
        raise ValueError(f"`probes` has unknown branches {sorted(unknown)}; known: {', '.join(BRANCHES)}.")
    rows = _view(x, center=x_center, row_norm=x_row_norm)
    cols = _view(x.transpose(-1, -2), center=x_center, row_norm=x_row_norm)
    out: dict[str, torch.Tensor] = {}
    for name, u in probes.items():
        v = rows if name in ROW_BRANCHES else cols
        out[name] = v @ u if name in ("xu", "xtu") else v @ (v.transpose(-1, -2) @ u)
    return out


def standardize_per_sample(s: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """``(s - mean) / (std + eps)`` over all entries of each sample of ``s`` ``(B, ...)`` [paper].

    ``std`` is Bessel-corrected (torch's default), as in the official code.

    >>> standardize_per_sample(torch.tensor([[1.0, 3.0]])).tolist()
    [[-0.7071067690849304, 0.7071067690849304]]
    """
    flat = s.flatten(1)
    mean = flat.mean(dim=1).view(-1, *[1] * (s.dim() - 1))
    std = flat.std(dim=1).view(-1, *[1] * (s.dim() - 1))
    return (s - mean) / (std + eps)


class MultiViewProbe(nn.Module):
    """The probe network; ``branches=("xu",)`` with ``standardize=False`` is ProbeX [paper].

    The probe matrices are stored as the weights of ``Linear(r, d)`` modules (``U = probe.weight``, shape
    ``(d, r)``), so PyTorch's default initialisation draws ``U ~ U(-1/sqrt(r), 1/sqrt(r))`` as in the
    official code. Only the active branches are built; the output equals the official zero-masking of the
    inactive ones [reconstructed equivalence].

    Args:
        d_h: Rows of the weight matrices.
        d_w: Columns of the weight matrices.
        n_outputs: Width of the head (classes or labels).
        n_probes: ``r``, probes per branch.
        proj_dim: ``p``, projection width of the point axis.
        rep_dim: Representation width.
        branches: Active branches, a subset of ``("xu", "xxtu", "xtu", "xtxu")``.
        standardize: Per-sample standardisation of every branch (MVProbe); ``False`` for ProbeX.
        x_center: Centre each view over its points (see :func:`branch_outputs`).
        x_row_norm: L2-normalise each point of each view.
    """

    _paper = paper("mvprobe")

    def __init__(
        self,
        d_h: int,
        d_w: int,
        n_outputs: int,
        *,
        n_probes: int = 128,
        proj_dim: int = 128,
        rep_dim: int = 512,
        branches: Sequence[str] = BRANCHES,
        standardize: bool = True,
        x_center: bool = False,
        x_row_norm: bool = False,
    ) -> None:
        super().__init__()
        self.branches = tuple(b for b in BRANCHES if b in branches)  # the fixed concatenation order
        if not self.branches or len(self.branches) != len(tuple(branches)):
            raise ValueError(f"`branches` must be distinct names out of {BRANCHES}, got {tuple(branches)!r}.")
        self.standardize = standardize
        self.x_center = x_center
        self.x_row_norm = x_row_norm
        dims = {"xu": (d_w, d_h), "xxtu": (d_h, d_h), "xtu": (d_h, d_w), "xtxu": (d_w, d_w)}
        self.probes = nn.ModuleDict({b: nn.Linear(n_probes, dims[b][0], bias=False) for b in self.branches})
        self.projections = nn.ModuleDict(
            {b: nn.Linear(dims[b][1], proj_dim, bias=False) for b in self.branches}
        )
        self.encoder = nn.Linear(len(self.branches) * n_probes * proj_dim, rep_dim)
        self.head = nn.Linear(rep_dim, n_outputs)

    def represent(self, x: torch.Tensor) -> torch.Tensor:
        """The representation ``(B, rep_dim)`` of weight matrices ``x`` ``(B, d_H, d_W)``."""
        probes = {b: self.probes[b].weight for b in self.branches}
        outs = branch_outputs(x, probes, x_center=self.x_center, x_row_norm=self.x_row_norm)  # type: ignore[arg-type]
        feats = []
        for b in self.branches:
            s = standardize_per_sample(outs[b]) if self.standardize else outs[b]
            feats.append(torch.relu(self.projections[b](s.transpose(-1, -2))).flatten(1))  # (B, r*p)
        return self.encoder(torch.cat(feats, dim=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, n_outputs)``."""
        return self.head(self.represent(x))


def per_label_accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Share of correct entries (the paper's metric; ``1 - Hamming loss``); plain accuracy for 1-D labels.

    >>> per_label_accuracy(np.array([[1, 0], [0, 1]]), np.array([[1, 1], [0, 1]]))
    0.75
    """
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"`y_pred` must have the shape of `y_true` {y_true.shape}, got {y_pred.shape}.")
    return float(np.mean(y_true == y_pred))
