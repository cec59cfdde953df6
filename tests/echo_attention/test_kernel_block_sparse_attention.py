"""block_sparse_attention: reference math, bad inputs, and the Triton kernel in the interpreter."""

from __future__ import annotations

import math

import pytest
import torch

from hf_ext.kernels._dispatch import interpret_mode, triton_installed
from hf_ext.kernels.block_sparse import block_sparse_attention


def _qkv(b=1, h=2, s=64, d=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, h, s, d, generator=g) for _ in range(3))


def _full_lut(b, h, n):
    return torch.arange(n).repeat(b, h, n, 1), torch.full((b, h, n), n)


def _dense(q, k, v, allowed):
    """Masked dense softmax; ``allowed`` ``[B, H, S, S]`` bool."""
    s = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    s = s.masked_fill(~allowed, -math.inf)
    return s.softmax(-1) @ v, s.logsumexp(-1)


def test_all_tiles_equals_sdpa():
    q, k, v = _qkv(s=100)
    lut, cnt = _full_lut(1, 2, 7)
    out, lse = block_sparse_attention(q, k, v, lut, cnt, block=16, scale=16**-0.5, backend="torch")
    torch.testing.assert_close(
        out, torch.nn.functional.scaled_dot_product_attention(q, k, v), atol=1e-5, rtol=1e-5
    )
    ref_lse = ((q @ k.transpose(-1, -2)) * 0.25).logsumexp(-1)
    torch.testing.assert_close(lse, ref_lse, atol=1e-5, rtol=1e-5)


def test_lut_order_does_not_matter_and_padding_is_excluded():
    q, k, v = _qkv(s=64)
    lut = torch.tensor([[0, 2, -1], [1, 3, 0], [2, -1, -1], [3, 1, 2]]).repeat(1, 2, 1, 1)
    cnt = torch.tensor([2, 3, 1, 3]).repeat(1, 2, 1)
    valid = torch.ones(64, dtype=torch.bool)
    valid[10:16] = False
    a, la = block_sparse_attention(q, k, v, lut, cnt, 16, 0.25, kv_valid=valid, backend="torch")
    perm = torch.tensor([[2, 0, -1], [0, 3, 1], [2, -1, -1], [1, 2, 3]]).repeat(1, 2, 1, 1)
    b, lb = block_sparse_attention(q, k, v, perm, cnt, 16, 0.25, kv_valid=valid, backend="torch")
    torch.testing.assert_close(a, b)
    allowed = torch.zeros(4, 4, dtype=torch.bool)
    for i, row in enumerate(lut[0, 0].tolist()):
        for j in row[: int(cnt[0, 0, i])]:
            allowed[i, j] = True
    mask = allowed.repeat_interleave(16, 0).repeat_interleave(16, 1) & valid[None, :]
    ref, ref_lse = _dense(q, k, v, mask.expand(1, 2, 64, 64))
    torch.testing.assert_close(a, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(la, ref_lse, atol=1e-5, rtol=1e-5)


def test_dropped_tiles_contribute_nothing():
    q, k, v = _qkv(s=64)
    lut = torch.tensor([[0, 1], [1, 2], [2, 3], [3, 0]]).repeat(1, 2, 1, 1)
    cnt = torch.full((1, 2, 4), 2)
    out, _ = block_sparse_attention(q, k, v, lut, cnt, 16, 0.25, backend="torch")
    v2 = v.clone()
    v2[:, :, 32:48] = 1e4  # tile 2: dropped for query tiles 0 and 3
    out2, _ = block_sparse_attention(q, k, v2, lut, cnt, 16, 0.25, backend="torch")
    torch.testing.assert_close(out[:, :, :16], out2[:, :, :16])
    torch.testing.assert_close(out[:, :, 48:], out2[:, :, 48:])


def test_tile_partials_match_a_single_tile_softmax():
    q, k, v = _qkv(s=48)
    lut, cnt = _full_lut(1, 2, 3)
    pairs = torch.tensor([[0, 2], [1, 1], [-1, -1]]).repeat(1, 2, 1, 1)
    _, _, (po, pl) = block_sparse_attention(q, k, v, lut, cnt, 16, 0.25, tile_partials=pairs, backend="torch")
    s = (q[:, :, :16] @ k[:, :, 32:48].transpose(-1, -2)) * 0.25
    torch.testing.assert_close(po[:, :, 0], s.softmax(-1) @ v[:, :, 32:48], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(pl[:, :, 0], s.logsumexp(-1), atol=1e-5, rtol=1e-5)
    assert torch.isinf(pl[:, :, 2]).all() and (po[:, :, 2] == 0).all()


def test_output_is_the_same_with_or_without_tile_partials():
    q, k, v = _qkv(s=60)  # 4 tiles, the last one partly outside S
    lut = torch.tensor([[0, 2, -1], [1, 3, 0], [2, -1, -1], [3, 1, 2]]).repeat(1, 2, 1, 1)
    cnt = torch.tensor([2, 3, 1, 3]).repeat(1, 2, 1)
    # head 0: query tile 2 keeps one key tile, which is also a partial pair; head 1: padded pairs
    pairs = torch.tensor([[[[0, 2], [2, 2], [3, 3]], [[1, 0], [-1, -1], [-1, -1]]]])
    plain = block_sparse_attention(q, k, v, lut, cnt, 16, 0.25, backend="torch")
    with_parts = block_sparse_attention(q, k, v, lut, cnt, 16, 0.25, tile_partials=pairs, backend="torch")
    for a, b in zip(plain, with_parts[:2]):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_strided_diffusers_layout_is_accepted():
    q, k, v = (x.transpose(1, 2).contiguous().transpose(1, 2) for x in _qkv(s=32))
    assert not q.is_contiguous()
    lut, cnt = _full_lut(1, 2, 2)
    out, _ = block_sparse_attention(q, k, v, lut, cnt, 16, 0.25, backend="torch")
    torch.testing.assert_close(
        out, torch.nn.functional.scaled_dot_product_attention(q, k, v), atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        (lambda a: {**a, "k": a["k"][:, :1]}, ValueError, "share"),
        (lambda a: {**a, "q": a["q"].long()}, TypeError, "`q` must be a floating-point"),
        (lambda a: {**a, "lut": a["lut"].float()}, TypeError, "`lut` must be an integer"),
        (lambda a: {**a, "lut": a["lut"] + 5}, ValueError, "`lut` ids must lie"),
        (lambda a: {**a, "lut_count": a["lut_count"] + 1}, ValueError, "`lut_count` must lie"),
        (
            lambda a: {**a, "kv_valid": torch.ones(3, dtype=torch.bool)},
            ValueError,
            "`kv_valid` must have shape",
        ),
        (lambda a: {**a, "backend": "cuda"}, ValueError, "`backend` must be one of"),
        (
            lambda a: {**a, "tile_partials": torch.tensor([[[[0, 9]]]]).repeat(1, 2, 1, 1)},
            ValueError,
            "not in that",
        ),
    ],
)
def test_bad_inputs(change, error, match):
    q, k, v = _qkv(s=32)
    lut, cnt = _full_lut(1, 2, 2)
    args = {
        "q": q,
        "k": k,
        "v": v,
        "lut": lut,
        "lut_count": cnt,
        "block": 16,
        "scale": 0.25,
        "backend": "torch",
    }
    with pytest.raises(error, match=match):
        block_sparse_attention(**change(args))


@pytest.mark.skipif(
    not triton_installed() or interpret_mode(), reason="needs triton, outside interpreter mode"
)
def test_triton_on_cpu_outside_interpreter_raises():
    q, k, v = _qkv(s=32)
    lut, cnt = _full_lut(1, 2, 2)
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        block_sparse_attention(q, k, v, lut, cnt, 16, 0.25, backend="triton")


@pytest.mark.triton_interpret
@pytest.mark.skipif(not triton_installed(), reason="needs triton")
@pytest.mark.parametrize(("s", "block", "d"), [(100, 16, 16), (64, 32, 32)])
def test_triton_matches_reference(s, block, d):
    if not interpret_mode():
        pytest.skip("run with TRITON_INTERPRET=1 in a separate process")
    q, k, v = _qkv(b=2, h=2, s=s, d=d, seed=3)
    n = math.ceil(s / block)
    g = torch.Generator().manual_seed(1)
    order = torch.stack([torch.randperm(n, generator=g) for _ in range(2 * 2 * n)]).view(2, 2, n, n)
    cnt = torch.randint(1, n + 1, (2, 2, n), generator=g)
    lut = torch.where(torch.arange(n) < cnt[..., None], order, -1)
    valid = torch.rand(s, generator=g) > 0.2
    pairs = torch.stack([torch.zeros(2, 2, dtype=torch.long), lut[:, :, 0, 0]], -1)[:, :, None]
    kw = {"block": block, "scale": d**-0.5, "kv_valid": valid, "tile_partials": pairs}
    out, lse, (po, pl) = block_sparse_attention(q, k, v, lut, cnt, backend="triton", **kw)
    ref, ref_lse, (rpo, rpl) = block_sparse_attention(q, k, v, lut, cnt, backend="torch", **kw)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse, ref_lse, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(po, rpo, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(pl, rpl, atol=1e-5, rtol=1e-5)


@pytest.mark.triton_interpret
@pytest.mark.skipif(not triton_installed(), reason="needs triton")
def test_triton_rejects_non_power_of_two_block():
    if not interpret_mode():
        pytest.skip("run with TRITON_INTERPRET=1 in a separate process")
    q, k, v = _qkv(s=48, d=16)
    lut, cnt = _full_lut(1, 2, 2)
    with pytest.raises(ValueError, match="`block` must be a power of two"):
        block_sparse_attention(q, k, v, lut, cnt, 24, 0.25, backend="triton")


def _coarse_case(seed=0, b=1, h=2, s=64, d=16, block=16, m=4, n_c=2):
    """q/k/v plus coarse keys: key tile ``t``'s ``m`` pooled keys/values, random entries per query tile."""
    from hf_ext.kernels.block_sparse import CoarseKeys

    g = torch.Generator().manual_seed(seed)
    q, k, v = _qkv(b=b, h=h, s=s, d=d, seed=seed)
    n = s // block
    keys, values = (torch.randn(b, h, n * m, d, generator=g) for _ in range(2))
    log_count = torch.full((n * m,), math.log(block // m))
    log_count[1] = -math.inf  # an empty pooled key
    c_lut = torch.randint(0, n, (b, h, n, n_c), generator=g)
    c_lut[..., -1] = -1  # an unused entry
    bias = torch.randn(b, h, n, n_c, generator=g)
    return q, k, v, CoarseKeys(keys, values, log_count, c_lut, bias)


def test_coarse_keys_join_the_softmax():
    q, k, v, coarse = _coarse_case()
    lut = torch.tensor([[0, 1], [1, 2], [2, -1], [3, 0]]).repeat(1, 2, 1, 1)
    cnt = torch.tensor([2, 2, 1, 2]).repeat(1, 2, 1)
    out, lse = block_sparse_attention(q, k, v, lut, cnt, 16, 0.25, coarse=coarse, backend="torch")
    m = coarse.keys.shape[2] // 4
    for h in range(2):
        for qt in range(4):
            kk, vv, bias = [], [], []
            for j in range(int(cnt[0, h, qt])):
                t = int(lut[0, h, qt, j])
                kk.append(k[0, h, t * 16 : (t + 1) * 16])
                vv.append(v[0, h, t * 16 : (t + 1) * 16])
                bias.append(torch.zeros(16))
            for e in range(coarse.lut.shape[-1]):
                t = int(coarse.lut[0, h, qt, e])
                if t < 0:
                    continue
                kk.append(coarse.keys[0, h, t * m : (t + 1) * m])
                vv.append(coarse.values[0, h, t * m : (t + 1) * m])
                bias.append(coarse.log_count[t * m : (t + 1) * m] + coarse.bias[0, h, qt, e])
            logits = q[0, h, qt * 16 : (qt + 1) * 16] @ torch.cat(kk).T * 0.25 + torch.cat(bias)
            torch.testing.assert_close(out[0, h, qt * 16 : (qt + 1) * 16], logits.softmax(-1) @ torch.cat(vv))
            torch.testing.assert_close(lse[0, h, qt * 16 : (qt + 1) * 16], logits.logsumexp(-1))


def test_coarse_keys_bad_inputs():
    q, k, v, coarse = _coarse_case()
    lut, cnt = _full_lut(1, 2, 4)
    with pytest.raises(ValueError, match="`coarse.lut` ids must lie in"):
        block_sparse_attention(q, k, v, lut, cnt, 16, 0.25, coarse=coarse._replace(lut=coarse.lut + 9))
    with pytest.raises(ValueError, match="`coarse.bias` must be"):
        block_sparse_attention(q, k, v, lut, cnt, 16, 0.25, coarse=coarse._replace(bias=coarse.bias[..., :1]))


def test_gradient_reaches_the_coarse_bias():
    q, k, v, coarse = _coarse_case()
    bias = coarse.bias.clone().requires_grad_()
    lut, cnt = torch.tensor([[0], [1], [2], [3]]).repeat(1, 2, 1, 1), torch.ones(1, 2, 4, dtype=torch.long)
    out, _ = block_sparse_attention(
        q, k, v, lut, cnt, 16, 0.25, coarse=coarse._replace(bias=bias), backend="torch"
    )
    out.sum().backward()
    assert bias.grad is not None and bias.grad[..., 0].abs().sum() > 0 and (bias.grad[..., -1] == 0).all()


@pytest.mark.triton_interpret
@pytest.mark.skipif(not triton_installed(), reason="needs triton")
@pytest.mark.parametrize("m", [4, 16])
def test_triton_coarse_keys_match_reference(m):
    if not interpret_mode():
        pytest.skip("run with TRITON_INTERPRET=1 in a separate process")
    q, k, v, coarse = _coarse_case(b=2, s=64, d=16, m=m, n_c=3)
    lut = torch.tensor([[0, 1], [1, 2], [2, -1], [3, 0]]).repeat(2, 2, 1, 1)
    cnt = torch.tensor([2, 2, 1, 2]).repeat(2, 2, 1)
    kw = {"block": 16, "scale": 0.25, "coarse": coarse}
    out, lse = block_sparse_attention(q, k, v, lut, cnt, backend="triton", **kw)
    ref, ref_lse = block_sparse_attention(q, k, v, lut, cnt, backend="torch", **kw)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse, ref_lse, atol=1e-5, rtol=1e-5)
