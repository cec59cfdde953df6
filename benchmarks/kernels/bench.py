"""``hf-ext bench kernels``: every CPU path of EchoAttention's kernels and of the verify kernel against its
PyTorch reference, side by side in one process, with a correctness column.

Rows per (op, shape): the path the library runs (``backend="auto"`` on this machine) and the plain PyTorch
reference it must equal (``is_baseline``), timed interleaved at one thread (medians), with the largest
absolute difference of the outputs (and of the log-sum-exp where the op returns one) against the reference.
Triton kernels run only on CUDA (timed) or under ``TRITON_INTERPRET=1`` (correctness only: interpreter
timings mean nothing and are not shown). All inputs are random; no model is loaded.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

import torch

from benchmarks.harness import BenchReport, Headline, interleaved_times, pinned_threads, seeded
from hf_ext.kernels._dispatch import interpret_mode, triton_installed
from hf_ext.kernels.block_sparse import block_sparse_attention
from hf_ext.kernels.chunked import chunk_attention
from hf_ext.kernels.pooling import pooled_tile_scores

REFERENCE = "PyTorch reference"
# (op, shape label) -> sizes; the quick run takes the first of each op
SHAPES: dict[str, list[dict[str, Any]]] = {
    "block_sparse_attention": [
        {"S": 2048, "H": 2, "D": 32, "block": 64, "keep": 0.25},
        {"S": 8192, "H": 2, "D": 32, "block": 64, "keep": 0.25},
    ],
    "pooled_tile_scores": [
        {"S": 2048, "H": 2, "D": 32, "block": 64},
        {"S": 8192, "H": 2, "D": 32, "block": 64},
    ],
    "chunk_attention (fp32)": [{"R": 7, "N": 8192, "H": 4, "D": 64}, {"R": 7, "N": 32768, "H": 4, "D": 64}],
    "chunk_attention (bf16)": [{"R": 7, "N": 8192, "H": 4, "D": 64}],
}


def _label(sizes: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in sizes.items())


def grid() -> list[dict[str, Any]]:
    """Every (op, shape) of the full run."""
    return [{"op": op, "shape": _label(s)} for op, shapes in SHAPES.items() for s in shapes]


def run(*, quick: bool = False, seed: int = 0) -> BenchReport:
    """Time each path against its reference at every shape of :func:`grid` (the quick run: the first shape
    of each op, 3 repeats instead of 7)."""
    settings = [s for s in grid() if not quick or s["shape"] == _label(SHAPES[s["op"]][0])]
    rows: list[dict[str, Any]] = []
    with pinned_threads(1), seeded(seed):
        for s in settings:
            sizes = next(x for x in SHAPES[s["op"]] if _label(x) == s["shape"])
            rows += _measure(s["op"], sizes, repeats=3 if quick else 7)
    method_row = next(r for r in rows if r["op"] == "block_sparse_attention" and not r["is_baseline"])
    headline = Headline.from_rows(
        rows,
        "time_vs_reference",
        higher_is_better=True,
        method_system=method_row["system"],
        where={"op": "block_sparse_attention", "shape": method_row["shape"]},
    )
    notes = [
        "CPU, 1 thread. time_vs_reference = reference median / path median (>1: the path is faster). "
        "max_abs_err: the path's output against the reference (fp32 unless the row says otherwise).",
        "Triton rows appear only on CUDA (timed) or under TRITON_INTERPRET=1 (correctness only)."
        + ("" if triton_installed() else " triton is not installed here."),
    ]
    return BenchReport(
        rows=rows,
        headline=headline,
        config={"threads": 1, "shapes": SHAPES},
        what=f"{len(settings)} (op, shape) settings, CPU",
        notes=notes,
        settings=settings,
    )


def _measure(op: str, sizes: dict[str, Any], repeats: int) -> list[dict[str, Any]]:
    """Rows of one (op, shape): each path and the reference."""
    paths, check = _PATHS[op](**sizes)
    times = interleaved_times({n: f for n, f in paths.items() if f is not None}, repeats=repeats)
    ref = paths[REFERENCE]
    assert ref is not None
    ref_out = ref()
    ref_ms = 1e3 * statistics.median(times[REFERENCE])
    rows = []
    for name, fn in paths.items():
        out = fn() if fn is not None else check[name]()
        ms = 1e3 * statistics.median(times[name]) if name in times else math.nan
        row = {
            "system": name,
            "is_baseline": name == REFERENCE,
            "op": op,
            "shape": _label(sizes),
            "ms": ms,
            "time_vs_reference": ref_ms / ms if math.isfinite(ms) else math.nan,
            "max_abs_err": max(float((a.float() - b.float()).abs().max()) for a, b in zip(out, ref_out)),
        }
        rows.append(row)
    return rows


Paths = tuple[dict[str, Callable[[], Any] | None], dict[str, Callable[[], Any]]]


def _block_sparse(S: int, H: int, D: int, block: int, keep: float) -> Paths:
    """A random LUT keeping the diagonal plus ``keep`` of the key tiles per query tile."""
    n = S // block
    q, k, v = (torch.randn(1, H, S, D) for _ in range(3))
    k_q = max(1, round(keep * n))
    score = torch.rand(1, H, n, n)
    score.diagonal(dim1=-2, dim2=-1).fill_(2.0)
    lut = score.topk(k_q, -1).indices.int()
    cnt = torch.full((1, H, n), k_q, dtype=torch.int32)
    scale = D**-0.5

    def reference() -> tuple[torch.Tensor, torch.Tensor]:
        tiles = torch.zeros(1, H, n, n, dtype=torch.bool).scatter_(-1, lut.long(), True)
        mask = tiles.repeat_interleave(block, 2).repeat_interleave(block, 3)
        logits = (q @ k.transpose(-1, -2) * scale).masked_fill(~mask, -math.inf)
        return logits.softmax(-1) @ v, logits.logsumexp(-1)

    def gathered() -> Any:
        with torch.no_grad():
            return block_sparse_attention(q, k, v, lut, cnt, block, scale, backend="auto", validate=False)

    def explicit() -> Any:  # the differentiable path (EchoAttention's stage 3)
        with torch.enable_grad():
            res = block_sparse_attention(
                q.requires_grad_(), k, v, lut, cnt, block, scale, backend="torch", validate=False
            )
        q.requires_grad_(False)
        return res[0].detach(), res[1].detach()

    paths: dict[str, Callable[[], Any] | None] = {
        REFERENCE: reference,
        "gather + CPU flash op (auto)": gathered,
        "gather + explicit softmax (autograd)": explicit,
    }
    check: dict[str, Callable[[], Any]] = {}
    if triton_installed() and interpret_mode():
        paths["triton (interpreter, correctness only)"] = None
        check["triton (interpreter, correctness only)"] = lambda: block_sparse_attention(
            q, k, v, lut, cnt, block, scale, backend="triton"
        )
    return paths, check


def _pooled(S: int, H: int, D: int, block: int) -> Paths:
    q, k = torch.randn(1, H, S, D), torch.randn(1, H, S, D)
    scale = D**-0.5

    def reference() -> tuple[torch.Tensor]:
        qm, km = (x.view(1, H, S // block, block, D).mean(3) for x in (q, k))
        return (qm @ km.transpose(-1, -2) * scale + math.log(block),)

    return {REFERENCE: reference, "pooled_tile_scores": lambda: (pooled_tile_scores(q, k, block, scale),)}, {}


def _chunk(dtype: torch.dtype) -> Callable[..., Paths]:
    def paths(R: int, N: int, H: int, D: int) -> Paths:
        q = torch.randn(1, H, R, D).to(dtype)
        k, v = (torch.randn(1, H, N, D).to(dtype) for _ in range(2))
        lengths = torch.tensor([N])

        def reference() -> Any:
            return chunk_attention(q, k, v, lengths, scale=D**-0.5, backend="torch")[:2]

        def auto() -> Any:
            return chunk_attention(q, k, v, lengths, scale=D**-0.5)[:2]

        name = "C kernel (auto)" if dtype == torch.float32 else "auto (falls back: dtype)"
        return {REFERENCE: reference, name: auto}, {}

    return paths


_PATHS: dict[str, Callable[..., Paths]] = {
    "block_sparse_attention": _block_sparse,
    "pooled_tile_scores": _pooled,
    "chunk_attention (fp32)": _chunk(torch.float32),
    "chunk_attention (bf16)": _chunk(torch.bfloat16),
}
