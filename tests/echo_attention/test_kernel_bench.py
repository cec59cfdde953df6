"""``hf-ext bench kernels``: every kernel path against its PyTorch reference, with a correctness column."""

from __future__ import annotations

import json
import math

import pytest

from hf_ext import cli


def test_bench_kernels_quick_runs_from_the_cli(tmp_path, capsys):
    out = tmp_path / "k.json"
    assert cli.main(["bench", "kernels", "--quick", "--json", str(out)]) == 0
    assert "hf-ext bench kernels (quick, seed 0)" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["method"] == "kernels" and doc["headline"]["figure"] == "time_vs_reference"
    rows = doc["rows"]
    assert {r["op"] for r in rows} >= {
        "block_sparse_attention",
        "pooled_tile_scores",
        "chunk_attention (fp32)",
    }
    for r in rows:  # every path matches its reference
        assert r["max_abs_err"] < (5e-2 if "bf16" in r["op"] else 1e-4), r
        assert r["is_baseline"] == (r["system"] == "PyTorch reference")
        assert math.isfinite(r["ms"])


def test_bench_id_accepts_kernels_and_methods_only():
    import argparse

    assert cli._bench_id("kernels") == "kernels"
    assert cli._bench_id("echo_attention") == "echo_attention"
    with pytest.raises(argparse.ArgumentTypeError, match="unknown method 'kernel'"):
        cli._bench_id("kernel")
