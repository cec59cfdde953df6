"""The benchmark's pieces run and report (the full run is ``hf-ext bench echo_attention``)."""

from __future__ import annotations

import pytest
import torch

from hf_ext.testing import requires

pytestmark = requires("diffusers")


def test_window_mask_matches_budget_from_below():
    from benchmarks.echo_attention.data import window_mask
    from hf_ext.echo_attention.layout import Layout, flop_costs

    lay = Layout(8, 256, 64)
    mask, (wt, ws) = window_mask(lay, 32, 0.25)
    cost = flop_costs(lay, 32)
    assert (cost["estimate"] + cost["exact"] * float(mask.sum())) / cost["dense"] <= 0.25
    assert mask.diagonal().all() and wt >= 0 and ws >= 0


def test_blob_latents_move_one_pixel_per_frame():
    from benchmarks.echo_attention.data import blob_latents

    x = blob_latents(0, frames=3, side=16, blobs=1)
    assert x.shape == (1, 4, 3, 16, 16)
    peaks = [divmod(int(x[0, :, f].abs().sum(0).argmax()), 16) for f in range(3)]
    assert all(max(abs(a - b) for a, b in zip(p, q)) <= 1 for p, q in zip(peaks, peaks[1:]))


@pytest.mark.slow
def test_small_run_reports_every_arm_and_verdict():
    from benchmarks.echo_attention import bench
    from benchmarks.echo_attention.data import WAN
    from benchmarks.echo_attention.parts import attention_rows, e2e_rows
    from benchmarks.harness import pinned_threads

    with pinned_threads(1):
        rows_a = attention_rows([0.0], [0.25], [0], [4], repeats=1)
        rows_b, _ = e2e_rows(WAN, 2, 0.25, 64, 1, 0, repeats=1)
    systems = {
        "dense (SDPA)",
        "echo",
        "echo (pooled 16)",
        "echo (band)",
        "sparse-only (matched FLOPs)",
        "routed (static)",
        "static window (radial-style)",
    }
    more = {f"sparse-only ({m}x echo's FLOPs)" for m in ("0.85", "1.15", "1.3")}
    assert {r["system"] for r in rows_a} == systems and {r["system"] for r in rows_b} == systems | more
    notes = bench._verdicts(rows_a + rows_b)
    assert any(
        "echo error below sparse-only at equal FLOPs" in n and ("MET" in n or "MISSED" in n) for n in notes
    )
    assert any("at equal measured step time" in n for n in notes)
    echo, sparse = (
        next(r for r in rows_b if r["system"] == s) for s in ("echo", "sparse-only (matched FLOPs)")
    )
    assert abs(echo["flop_ratio"] - sparse["flop_ratio"]) <= 0.02 * echo["flop_ratio"]
    assert all(torch.isfinite(torch.tensor(r["rel_err"])) for r in rows_a + rows_b)


def test_gpu_script_smoke_run_writes_its_report(tmp_path):
    from benchmarks.echo_attention.gpu import main

    rows = main(["--smoke", "--out", str(tmp_path)])
    arms = {r["arm"] for r in rows}
    assert {"sparse (kernel)", "sparse + pooled keys (kernel)", "echo_merge"} <= arms
    assert all(r["ms"] > 0 for r in rows if "ms" in r)
    checks = [r for r in rows if "max_abs_out" in r]
    assert checks and all(r["max_abs_out"] < 1e-5 and r["max_abs_lse"] < 1e-5 for r in checks)
    assert (tmp_path / "echo_gpu.json").is_file() and "| smoke" in (tmp_path / "echo_gpu.md").read_text()


def test_quick_settings_are_a_slice_of_the_full_grid():
    from benchmarks.echo_attention import bench
    from benchmarks.harness import check_slice

    full = bench.grid()
    check_slice(list(bench.QUICK), full, method="echo_attention")
    assert len(full) == 9 and len(bench.QUICK) < len(full)
    assert "full: 3 DiT + 6 Q/K/V settings" in bench._what(list(bench.QUICK))
    assert "full:" not in bench._what(full)
