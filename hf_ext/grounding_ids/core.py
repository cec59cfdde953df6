"""Grounding-ID math: partition geometry, token maps and the binding measures [paper: the quantities;
formulas and geometry reconstructed].

Pixel boxes are half-open ``[left, right) x [top, bottom)``. Hidden states are ``[N, D]`` (tokens x width),
attention maps ``[heads, queries, keys]``; every measure is unitless.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hf_ext._registry import paper


@dataclass(frozen=True)
class PartitionBox:
    """One partition: its index, symbol and half-open pixel box ``[left, right) x [top, bottom)``."""

    _paper = paper("grounding_ids")

    index: int
    symbol: str
    left: int
    top: int
    right: int
    bottom: int

    def contains(self, x: float, y: float) -> bool:
        """Whether the point ``(x, y)`` (pixels) lies in the box."""
        return self.left <= x < self.right and self.top <= y < self.bottom


def cuts(start: int, stop: int, n: int) -> list[int]:
    """``n + 1`` integer boundaries splitting ``[start, stop)``: ``start + round(i (stop - start) / n)``.

    >>> cuts(0, 10, 3)
    [0, 3, 7, 10]
    """
    return [start + round(i * (stop - start) / n) for i in range(n + 1)]


def partition_boxes(
    region: tuple[int, int, int, int], layout: str, shape: tuple[int, int], symbols: Sequence[str]
) -> list[PartitionBox]:
    """Boxes tiling ``region = (left, top, right, bottom)`` exactly (no gaps, no overlaps).

    Args:
        region: The pixel area to split (the part of the image the vision tower sees).
        layout: ``"rows"``, ``"columns"`` or ``"grid"``.
        shape: ``(rows, columns)`` of partitions; ``(n, 1)`` for rows, ``(1, n)`` for columns.
        symbols: One symbol per partition, row-major.

    Examples:
        >>> [(b.symbol, b.top, b.bottom) for b in partition_boxes((0, 0, 8, 8), "rows", (2, 1), "@#")]
        [('@', 0, 4), ('#', 4, 8)]
    """
    left, top, right, bottom = region
    rows, cols = shape
    if layout not in ("rows", "columns", "grid"):
        raise ValueError(f"`layout` must be 'rows', 'columns' or 'grid', got {layout!r}.")
    if rows > bottom - top or cols > right - left:
        raise ValueError(
            f"`shape` {shape} needs at least one pixel per partition; region is "
            f"{right - left}x{bottom - top} px."
        )
    ys, xs = cuts(top, bottom, rows), cuts(left, right, cols)
    return [
        PartitionBox(r * cols + c, symbols[r * cols + c], xs[c], ys[r], xs[c + 1], ys[r + 1])
        for r in range(rows)
        for c in range(cols)
    ]


def patch_partitions(boxes: Sequence[PartitionBox], grid: tuple[int, int], to_original: Any) -> list[int]:
    """Partition of each patch (row-major over ``grid = (rows, cols)`` patches), by its centre.

    ``to_original(i, j)`` maps the centre of patch ``(i, j)`` to original-image pixels ``(x, y)``; a centre
    outside every box (a crop border) gets ``-1``.
    """
    out = []
    for i in range(grid[0]):
        for j in range(grid[1]):
            x, y = to_original(i, j)
            out.append(next((b.index for b in boxes if b.contains(x, y)), -1))
    return out


def llava_geometry(
    height: int, width: int, shortest_edge: int, crop: tuple[int, int], patch_size: int
) -> tuple[tuple[int, int, int, int], tuple[int, int], Any]:
    """LLaVA / CLIP geometry [reconstructed]: resize the shortest edge to ``shortest_edge``, centre crop.

    Returns ``(visible region in original pixels, patch grid (rows, cols), to_original)``; ``to_original``
    maps a patch index to its centre in original pixels.
    """
    scale = shortest_edge / min(height, width)
    rh, rw = (
        (shortest_edge, round(width * scale)) if height <= width else (round(height * scale), shortest_edge)
    )
    ch, cw = crop
    oy, ox = (rh - ch) // 2, (rw - cw) // 2
    region = (
        max(0, round(ox / scale)),
        max(0, round(oy / scale)),
        min(width, round((ox + cw) / scale)),
        min(height, round((oy + ch) / scale)),
    )

    def to_original(i: int, j: int) -> tuple[float, float]:
        return (ox + (j + 0.5) * patch_size) / scale, (oy + (i + 0.5) * patch_size) / scale

    return region, (ch // patch_size, cw // patch_size), to_original


def qwen2_vl_geometry(
    height: int, width: int, grid_thw: tuple[int, int, int], merge: int = 2
) -> tuple[tuple[int, int, int, int], tuple[int, int], Any]:
    """Qwen2-VL geometry [reconstructed]: the whole image is resized to ``(h, w)`` patches
    (``image_grid_thw``) and each ``merge x merge`` block of patches becomes one token; returns as
    :func:`llava_geometry`.
    """
    _, gh, gw = grid_thw
    sy, sx = height / gh, width / gw

    def to_original(i: int, j: int) -> tuple[float, float]:
        return (j + 0.5) * merge * sx, (i + 0.5) * merge * sy

    return (0, 0, width, height), (gh // merge, gw // merge), to_original


def _normalize(h: Any) -> Any:
    import torch

    return torch.nn.functional.normalize(h.float(), dim=-1)


def alignment_margin(image_means: Any, symbol_means: Any) -> Any:
    """``mean_p [cos(img_p, sym_p) - mean_{q != p} cos(img_p, sym_q)]`` [reconstructed]; ``> 0``: binding.

    Args:
        image_means: ``[P, D]`` mean hidden state of each partition's image tokens.
        symbol_means: ``[P, D]`` mean hidden state of each partition's symbol tokens.

    >>> import torch
    >>> float(alignment_margin(torch.eye(3), torch.eye(3)))
    1.0
    """
    cos = _normalize(image_means) @ _normalize(symbol_means).T
    p = cos.shape[0]
    if p < 2:
        raise ValueError(f"alignment_margin needs at least 2 partitions, got {p}.")
    diag = cos.diagonal()
    off = (cos.sum(1) - diag) / (p - 1)
    return (diag - off).mean()


def within_partition_alignment(hidden: Any, labels: Any) -> Any:
    """Mean pairwise cosine of tokens in the same partition minus that across partitions [reconstructed].

    Args:
        hidden: ``[N, D]`` image-token hidden states.
        labels: ``[N]`` partition of each token (``-1`` tokens are ignored).
    """
    import torch

    keep = labels >= 0
    h, lab = _normalize(hidden[keep]), labels[keep]
    cos = h @ h.T
    same = lab[:, None] == lab[None, :]
    off_diag = ~torch.eye(len(lab), dtype=torch.bool, device=cos.device)
    within, across = same & off_diag, ~same
    if not within.any() or not across.any():
        raise ValueError("within_partition_alignment needs 2+ partitions with 2+ tokens in one of them.")
    return cos[within].mean() - cos[across].mean()


def modality_gap(image_hidden: Any, text_hidden: Any) -> Any:
    """``|| mean_i norm(img_i) - mean_j norm(txt_j) ||_2`` in ``[0, 2]`` [paper: the gap; norm reconstructed].

    >>> import torch
    >>> float(modality_gap(torch.ones(2, 3), torch.ones(4, 3)))
    0.0
    """
    return (_normalize(image_hidden).mean(0) - _normalize(text_hidden).mean(0)).norm()


def attention_mass(attn: Any, queries: Sequence[Any], keys: Sequence[Any]) -> tuple[Any, Any]:
    """Share of each query set's attention on every key set, among all keys of the sets [reconstructed].

    Args:
        attn: ``[H, Q, K]`` attention probabilities of one sequence at one layer.
        queries: ``P`` index tensors into the query axis (e.g. symbol-p text tokens).
        keys: ``P`` index tensors into the key axis (e.g. partition-p image tokens).

    Returns:
        ``(mass, ratio)``, both ``[P, P]``: ``mass[p, q]`` = attention of set-p queries on set-q keys over
        their attention on all sets' keys, averaged over queries and heads; ``ratio = mass / (|K_q| / |K|)``
        (``1`` = chance). Matched-part attention is the diagonal.
    """
    import torch

    all_keys = torch.cat([k.reshape(-1) for k in keys])
    size = torch.tensor([float(k.numel()) for k in keys], device=attn.device)
    rows = []
    for q in queries:
        a = attn[:, q.reshape(-1)].float()  # [H, |q|, K]
        per_key = torch.stack([a[..., k.reshape(-1)].sum(-1) for k in keys], -1)  # [H, |q|, P]
        total = a[..., all_keys].sum(-1, keepdim=True).clamp_min(torch.finfo(a.dtype).tiny)
        rows.append((per_key / total).mean((0, 1)))
    mass = torch.stack(rows)
    return mass, mass / (size / size.sum())
