"""Triton kernels of Vegas against their torch references, in Triton's CPU interpreter.

Run in a separate process: ``TRITON_INTERPRET=1 python -m pytest -m triton_interpret tests/test_kernels_vegas``.
"""

from __future__ import annotations

import pytest
import torch

from hf_ext.kernels._dispatch import interpret_mode, triton_installed
from hf_ext.kernels.gathered_attention import gather_kv, gathered_decode_attention
from hf_ext.kernels.importance import masked_topk, verify_importance

pytestmark = [
    pytest.mark.triton_interpret,
    pytest.mark.skipif(not triton_installed(), reason="triton is not installed"),
    pytest.mark.skipif(not interpret_mode(), reason="needs TRITON_INTERPRET=1 set before the process starts"),
]
TOL = dict(atol=1e-5, rtol=1e-5)
SHAPES = [(1, 4, 1, 32, 1000, 128), (2, 4, 2, 64, 128, 7), (2, 8, 8, 32, 17, 1), (1, 4, 1, 256, 128, 7)]


def _inputs(b, hq, hkv, d, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, hq, 1, d, generator=g), torch.randn(b, hkv, n, d, generator=g),
            torch.randn(b, hkv, n, d, generator=g), g)  # fmt: skip


@pytest.mark.parametrize(("b", "hq", "hkv", "d", "n", "m"), SHAPES)
def test_gathered_decode_attention_matches_reference(b, hq, hkv, d, n, m):
    q, k, v, g = _inputs(b, hq, hkv, d, n)
    idx = torch.stack([torch.randperm(n, generator=g)[:m] for _ in range(b)])
    per_head = torch.stack(
        [torch.stack([torch.randperm(n, generator=g)[:m] for _ in range(hkv)]) for _ in range(b)]
    )
    for ix, length in ((idx, None), (per_head, None), (None, m)):
        ref = gathered_decode_attention(q, k, v, ix, scale=0.3, length=length, backend="torch")
        tri = gathered_decode_attention(q, k, v, ix, scale=0.3, length=length, backend="triton")
        torch.testing.assert_close(tri[0], ref[0], **TOL)
        torch.testing.assert_close(tri[1], ref[1], **TOL)


@pytest.mark.parametrize(("b", "hq", "hkv", "d", "n", "m"), SHAPES[:3])
def test_gather_kv_matches_reference(b, hq, hkv, d, n, m):
    _, k, v, g = _inputs(b, hq, hkv, d, n)
    idx = torch.stack([torch.randperm(n, generator=g)[:m] for _ in range(b)])
    ref = gather_kv(k, v, idx, m + 3, backend="torch")
    tri = gather_kv(k, v, idx, m + 3, backend="triton")
    for a, t in zip(ref, tri):
        torch.testing.assert_close(t[:, :, :m], a[:, :, :m], atol=0, rtol=0)


@pytest.mark.parametrize(
    ("b", "hq", "hkv", "d", "n"), [(1, 4, 1, 32, 1000), (2, 4, 2, 64, 128), (2, 8, 8, 32, 17)]
)
@pytest.mark.parametrize("mode", ["weight", "logit"])
@pytest.mark.parametrize("rows", [1, 2])
def test_verify_importance_matches_reference(b, hq, hkv, d, n, mode, rows):
    g = torch.Generator().manual_seed(3)
    q_rows, k = torch.randn(b, hq, rows, d, generator=g), torch.randn(b, hkv, n, d, generator=g)
    valid = n if rows == 1 else n - 1
    ref = verify_importance(q_rows, k, valid, 0.2, mode, backend="torch")
    tri = verify_importance(q_rows, k, valid, 0.2, mode, backend="triton")
    torch.testing.assert_close(tri, ref, **TOL)


@pytest.mark.parametrize(("b", "n", "k"), [(1, 1, 1), (2, 17, 5), (1, 1000, 128), (2, 300, 300)])
def test_masked_topk_matches_reference(b, n, k):
    g = torch.Generator().manual_seed(4)
    imp = torch.randn(b, n, generator=g)
    imp[0, :3] = -imp[0, :3].abs() - 5  # negative scores exercise the sign handling of the int image
    torch.testing.assert_close(masked_topk(imp, k, backend="triton"), masked_topk(imp, k, backend="torch"))


def test_masked_topk_ties_take_lowest_index():
    imp = torch.tensor([[1.0, 2.0, 2.0, 2.0, 0.5]])
    assert masked_topk(imp, 2, backend="triton").tolist() == [[1, 2]]


def test_triton_rejects_non_power_of_two_head_size():
    q, k, v, _ = _inputs(1, 2, 1, 24, 10)
    with pytest.raises(ValueError, match="power of two"):
        gathered_decode_attention(q, k, v, None, scale=1.0, backend="triton")
