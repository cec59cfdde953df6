"""The device check of EchoAttention's kernels: ``block_sparse_attention`` (plain, with pooled keys and with
representative partials) and ``echo_merge`` against SDPA (flash) at S = 16k-75k tokens.

Benchmark-only code (EchoAttention, reconstructed; not verified against the paper). One short run for a lent
GPU, under 5 minutes; it changes no device setting::

    python -m benchmarks.echo_attention.gpu --out DIR     # CUDA: Triton kernels vs SDPA
    python -m benchmarks.echo_attention.gpu --smoke --out DIR   # CPU, tiny shapes

Steps: (1) correctness of the Triton kernels in bf16 against the fp32 PyTorch reference (max abs difference
of output and LSE) at the smallest shape; (2) times (``triton.testing.do_bench`` medians) of dense SDPA with
the flash backend and the default one, of ``block_sparse_attention`` at budgets 1, 0.25 and 0.125 (the LUT
built beforehand: kernel time only; budget 1 measures the LUT overhead), of it with the pooled echo's keys
and with the band echo's partials plus ``echo_merge``, and of the whole operator (estimate, planner and
kernel) in sparse and pooled-echo mode.
Results go to ``DIR/echo_gpu.json`` and ``DIR/echo_gpu.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import torch

from benchmarks.harness import Timer
from hf_ext.echo_attention.allocation import allocate, plan_tiles, tile_counts
from hf_ext.echo_attention.core import (
    identity_theta,
    pooled_keys,
    sparse_echo_attention,
    split_budget,
    tile_mass,
)
from hf_ext.echo_attention.layout import Layout
from hf_ext.kernels.block_sparse import CoarseKeys, block_sparse_attention
from hf_ext.kernels.echo_tiles import echo_merge

logger = logging.getLogger(__name__)

# (name, frames, tokens per frame, heads, head dim): Wan2.1-like self-attention at b = 64
SHAPES = [
    ("16k (10 x 1600)", 10, 1600, 12, 128),
    ("Wan2.1-1.3B 480p (21 x 1560)", 21, 1560, 12, 128),
    ("Wan2.1-14B 720p (21 x 3600)", 21, 3600, 40, 128),
]
SMOKE_SHAPES = [("smoke (4 x 256)", 4, 256, 2, 32)]
BUDGETS = (1.0, 0.25, 0.125)
ECHO_SHARE, POOL, BAND_SHARE = 0.1, 8, 0.25


def _timer(device: torch.device) -> Callable[[Callable[[], Any]], float]:
    """Median milliseconds of a call: ``triton.testing.do_bench`` on CUDA, 5 timed calls on CPU."""
    if device.type == "cuda":
        from triton.testing import do_bench

        return lambda fn: float(do_bench(fn, warmup=25, rep=100))

    def cpu(fn: Callable[[], Any]) -> float:
        fn()
        times = []
        for _ in range(5):
            with Timer(device) as t:
                fn()
            times.append(t.seconds)
        return 1e3 * statistics.median(times)

    return cpu


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, flash: bool) -> Callable[[], torch.Tensor]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def call() -> torch.Tensor:
        if not flash:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)

    return call


def _inputs(
    layout: Layout, heads: int, d: int, device: torch.device, dtype: torch.dtype
) -> tuple[torch.Tensor, ...]:
    """Padded video-like ``[1, H, padded_len, D]`` q/k/v: a smooth per-frame base plus noise, so that the
    estimate has structure to find."""
    g = torch.Generator(device="cpu").manual_seed(0)
    base = torch.randn(1, heads, 1, layout.tokens_per_frame, d, generator=g)
    qkv = []
    for _ in range(3):
        x = base + 0.5 * torch.randn(1, heads, layout.frames, layout.tokens_per_frame, d, generator=g)
        qkv.append(layout.pad(x.reshape(1, heads, layout.seq_len, d)).to(device, dtype))
    return tuple(qkv)


def _plans(q: torch.Tensor, k: torch.Tensor, layout: Layout, budget: float, echo: bool) -> Any:
    """The sparse (or pooled-echo) allocation of ``q``/``k`` at ``budget``."""
    h, d = q.shape[1], q.shape[-1]
    p_hat = tile_mass(q, k, layout).flatten(0, 1)
    exact, fe = split_budget([budget] * h, [echo] * h, ECHO_SHARE)
    n_ex, n_co = tile_counts(layout, d, exact, fe, POOL if echo else 0)
    widths = (-(-max(n_ex) // layout.n_t), max(n_co))
    dev = q.device
    return plan_tiles(
        p_hat, layout, d, torch.tensor(n_ex, device=dev), torch.tensor(n_co, device=dev), widths, POOL
    )


def _coarse(k: torch.Tensor, v: torch.Tensor, layout: Layout, alloc: Any) -> CoarseKeys:
    kc, vc = pooled_keys(k, v, layout, POOL)
    h = k.shape[1]
    lut = alloc.coarse_lut.view(1, h, *alloc.coarse_lut.shape[1:])
    return CoarseKeys(
        kc, vc, layout.pool_log_count(POOL, k.device), lut, torch.zeros(lut.shape, device=k.device)
    )


def run_shape(
    name: str, frames: int, tokens: int, heads: int, d: int, device: torch.device, check: bool
) -> list[dict[str, Any]]:
    """Every timed arm at one shape (rows of the report); with ``check`` also the correctness rows."""
    layout = Layout(frames, tokens, 64)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    backend = "triton" if device.type == "cuda" else "torch"
    q, k, v = _inputs(layout, heads, d, device, dtype)
    valid = layout.valid(device)
    scale = d**-0.5
    timer = _timer(device)
    rows: list[dict[str, Any]] = []

    def row(arm: str, budget: float, ms: float, flops: float | None = None) -> None:
        rows.append(
            {"shape": name, "S": layout.seq_len, "arm": arm, "budget": budget, "ms": ms, "flops": flops}
        )

    qu, ku, vu = (layout.unpad(x) for x in (q, k, v))
    if device.type == "cuda":
        row("SDPA (flash)", 1.0, timer(_sdpa(qu, ku, vu, flash=True)), 1.0)
    row("SDPA (default)", 1.0, timer(_sdpa(qu, ku, vu, flash=False)), 1.0)

    def sparse_call(alloc: Any, coarse: CoarseKeys | None = None, pairs: torch.Tensor | None = None) -> Any:
        lut, cnt = (x.view(1, heads, *x.shape[1:]) for x in (alloc.lut, alloc.lut_count))
        return lambda: block_sparse_attention(
            q,
            k,
            v,
            lut,
            cnt,
            64,
            scale,
            valid,
            tile_partials=pairs,
            coarse=coarse,
            backend=backend,
            validate=False,
        )

    for budget in BUDGETS:
        if device.type != "cuda" and budget == 1.0:
            continue  # the CPU reference gathers every tile: no kernel figure to compare
        alloc = _plans(q, k, layout, budget, echo=False)
        row("sparse (kernel)", budget, timer(sparse_call(alloc)), float(alloc.flops.mean()))
        if check and budget == 0.25:
            rows += _check(sparse_call(alloc), q, k, v, alloc, layout, heads, scale, valid, name, "sparse")
    alloc = _plans(q, k, layout, 0.25, echo=True)
    coarse = _coarse(k, v, layout, alloc)
    row("sparse + pooled keys (kernel)", 0.25, timer(sparse_call(alloc, coarse)), float(alloc.flops.mean()))
    if check:
        rows += _check(
            sparse_call(alloc, coarse), q, k, v, alloc, layout, heads, scale, valid, name, "sparse + pooled"
        )
    fx, fe = split_budget([0.25] * heads, [True] * heads, BAND_SHARE)
    p_hat = tile_mass(q, k, layout).flatten(0, 1)
    band = allocate(p_hat, layout, d, torch.tensor(fx, device=device), torch.tensor(fe, device=device), 4)
    assert band.pairs is not None and band.indptr is not None and band.entries is not None
    pairs = band.pairs.view(1, heads, *band.pairs.shape[1:])
    res = sparse_call(band, pairs=pairs)()
    band_time = timer(sparse_call(band, pairs=pairs))
    row("sparse + band partials (kernel)", 0.25, band_time, float(band.flops.mean()))
    csr = (band.indptr.view(1, heads, -1), band.entries.view(1, heads, *band.entries.shape[1:]))
    theta = identity_theta(heads, layout, d, device)
    row(
        "echo_merge",
        0.25,
        timer(lambda: echo_merge(res[0], res[1], res[2][0], res[2][1], csr, theta, backend=backend)),
    )
    splits = {
        "sparse": ([0.25] * heads, [0.0] * heads),
        "echo (pooled)": split_budget([0.25] * heads, [True] * heads, ECHO_SHARE),
    }
    for mode, (fx, fe) in splits.items():
        op = partial(sparse_echo_attention, qu, ku, vu, layout, fx, fe, theta, pool=POOL, backend=backend)
        row(f"operator {mode} (estimate + plan + kernel)", 0.25, timer(op))
    return rows


def _check(
    fn: Callable[[], Any],
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    alloc: Any,
    layout: Layout,
    heads: int,
    scale: float,
    valid: torch.Tensor | None,
    name: str,
    arm: str,
) -> list[dict[str, Any]]:
    """Max abs difference of ``fn``'s (out, lse) against the fp32 PyTorch reference on the same inputs."""
    out, lse = fn()[:2]
    lut, cnt = (x.view(1, heads, *x.shape[1:]) for x in (alloc.lut, alloc.lut_count))
    coarse = None
    if alloc.coarse_lut is not None:
        coarse = _coarse(k.float(), v.float(), layout, alloc)
    ref, ref_lse = block_sparse_attention(  # type: ignore[misc]
        q.float(),
        k.float(),
        v.float(),
        lut,
        cnt,
        64,
        scale,
        valid,
        coarse=coarse,
        backend="torch",
        validate=False,
    )
    real = torch.isfinite(ref_lse)
    return [
        {
            "shape": name,
            "S": layout.seq_len,
            "arm": f"check {arm}",
            "max_abs_out": float((out.float() - ref).abs().max()),
            "max_abs_lse": float((lse - ref_lse)[real].abs().max()),
        }
    ]


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The report table: time and time ratio to the best dense SDPA of the shape, against the FLOP ratio."""
    lines = ["| shape | arm | budget | ms | dense / arm | FLOP ratio |", "|---|---|---|---|---|---|"]
    for r in rows:
        if "ms" not in r:
            continue
        dense = min(x["ms"] for x in rows if x.get("shape") == r["shape"] and x["arm"].startswith("SDPA"))
        fl = "" if r["flops"] is None else f"{r['flops']:.3f}"
        lines.append(
            f"| {r['shape']} | {r['arm']} | {r['budget']} | {r['ms']:.3f} | {dense / r['ms']:.2f} | {fl} |"
        )
    checks = [r for r in rows if "max_abs_out" in r]
    if checks:
        lines += ["", "| shape | check | max abs out | max abs LSE |", "|---|---|---|---|"]
        lines += [
            f"| {r['shape']} | {r['arm']} | {r['max_abs_out']:.3g} | {r['max_abs_lse']:.3g} |" for r in checks
        ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Run the device check and write ``echo_gpu.json`` / ``echo_gpu.md`` into ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for echo_gpu.json and echo_gpu.md")
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny shapes (checks the script only)")
    args = parser.parse_args(argv)
    if args.smoke:
        device, shapes = torch.device("cpu"), SMOKE_SHAPES
    elif not torch.cuda.is_available():
        raise SystemExit("No CUDA device: run with --smoke on CPU.")
    else:
        device, shapes = torch.device("cuda"), SHAPES
    rows: list[dict[str, Any]] = []
    with torch.no_grad():
        for i, shape in enumerate(shapes):
            logger.info("shape %s", shape[0])
            rows += run_shape(*shape, device=device, check=i == 0)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "echo_gpu.json").write_text(json.dumps(rows, indent=1))
    table = markdown(rows)
    (args.out / "echo_gpu.md").write_text(table)
    print(table)
    return rows


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main()
