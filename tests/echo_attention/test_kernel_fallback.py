"""A fast kernel path that cannot run warns once per reason (dtype, head size, device) and runs the
reference."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import torch

from hf_ext.kernels import _dispatch
from hf_ext.kernels.chunked import chunk_attention


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(_dispatch, "_WARNED", set())


def _fallbacks(caplog):
    return [r.getMessage() for r in caplog.records if "fast path does not apply" in r.getMessage()]


@pytest.mark.parametrize(
    ("dtype", "d", "reason"),
    [(torch.bfloat16, 16, "dtype torch.bfloat16"), (torch.float32, 12, "head size 12")],
)
def test_chunk_attention_warns_once_per_reason(caplog, dtype, d, reason):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 2, 3, d, generator=g).to(dtype)
    k, v = (torch.randn(1, 2, 10, d, generator=g).to(dtype) for _ in range(2))
    with caplog.at_level(logging.WARNING, logger="hf_ext.kernels._dispatch"):
        for _ in range(2):
            out, _, _ = chunk_attention(q, k, v, torch.tensor([10]), scale=d**-0.5)
    msgs = _fallbacks(caplog)
    assert len(msgs) == 1 and "`chunk_attention`" in msgs[0] and reason in msgs[0]
    ref, _, _ = chunk_attention(q, k, v, torch.tensor([10]), scale=d**-0.5, backend="torch")
    torch.testing.assert_close(out, ref)


def test_chunk_attention_fp32_takes_the_kernel_without_warning(caplog):
    q, k, v = torch.randn(1, 2, 3, 16), torch.randn(1, 2, 10, 16), torch.randn(1, 2, 10, 16)
    with caplog.at_level(logging.WARNING, logger="hf_ext.kernels._dispatch"):
        chunk_attention(q, k, v, torch.tensor([10]), scale=0.25)
    assert not _fallbacks(caplog)


def test_triton_path_falls_back_on_sizes_and_missing_triton(caplog, monkeypatch):
    cuda = SimpleNamespace(is_cuda=True)
    monkeypatch.setattr(_dispatch, "triton_installed", lambda: True)
    with caplog.at_level(logging.WARNING, logger="hf_ext.kernels._dispatch"):
        assert _dispatch.resolve_fast_path("op", "auto", cuda, minimum=16, block=64, D=128) == "triton"
        for _ in range(2):
            assert _dispatch.resolve_fast_path("op", "auto", cuda, minimum=16, block=64, D=72) == "torch"
        monkeypatch.setattr(_dispatch, "triton_installed", lambda: False)
        assert _dispatch.resolve_fast_path("op", "auto", cuda, minimum=16, block=64, D=128) == "torch"
    msgs = _fallbacks(caplog)
    assert len(msgs) == 2
    assert "head size 72" in msgs[0] and "device cuda without triton" in msgs[1]
    monkeypatch.setattr(_dispatch, "triton_installed", lambda: True)
    with pytest.raises(ValueError, match="`D` must be a power of two >= 16"):  # explicit triton still raises
        _dispatch.resolve_fast_path("op", "triton", cuda, minimum=16, block=64, D=72)
