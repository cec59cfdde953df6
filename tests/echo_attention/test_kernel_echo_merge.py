"""echo_merge and pooled_tile_scores: math, bad inputs, Triton interpreter parity."""

from __future__ import annotations

import math

import pytest
import torch

from hf_ext.kernels._dispatch import interpret_mode, triton_installed
from hf_ext.kernels.block_sparse import block_sparse_attention
from hf_ext.kernels.echo_tiles import echo_merge
from hf_ext.kernels.pooling import pooled_tile_scores


def _theta(h=1, g=1, d=2, a=1.0, u=0.0, w=0.0, c=None):
    return (
        torch.full((h, g), a),
        torch.zeros(h, g, d) if c is None else c,
        torch.full((h, g), u),
        torch.full((h, g), w),
    )


def _csr(n_q, per_tile):
    """``per_tile``: list (one per query tile) of entry lists -> (indptr [1,1,n_q+1], entries [1,1,n_e,3])."""
    counts = [len(x) for x in per_tile]
    indptr = torch.tensor([0, *torch.tensor(counts).cumsum(0).tolist()])[None, None]
    flat = [e for x in per_tile for e in x] or []
    entries = (
        torch.tensor(flat, dtype=torch.long).view(1, 1, -1, 3)
        if flat
        else torch.zeros(1, 1, 0, 3, dtype=torch.long)
    )
    return indptr, entries


def test_identical_partial_of_equal_lse_keeps_the_output():
    out = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
    lse = torch.tensor([[[0.5, -1.0]]])
    merged = echo_merge(
        out, lse, out[:, :, None], lse[:, :, None], _csr(1, [[(0, 0, 0)]]), _theta(), backend="torch"
    )
    torch.testing.assert_close(merged, out)


def test_hand_example_two_key_subsets():
    # one row, scores 1 (subset E, value (1, 0)) and 2 (echo, value (0, 1)): weights e/(e+e^2), e^2/(e+e^2)
    out = torch.tensor([[[[1.0, 0.0]]]])
    merged = echo_merge(
        out,
        torch.tensor([[[1.0]]]),
        torch.tensor([[[[[0.0, 1.0]]]]]),
        torch.tensor([[[[2.0]]]]),
        _csr(1, [[(0, 0, 0)]]),
        _theta(),
        backend="torch",
    )
    p = 1 / (1 + math.e)
    torch.testing.assert_close(merged, torch.tensor([[[[p, 1 - p]]]]))


def test_theta_is_applied():
    out, lse = torch.zeros(1, 1, 1, 2), torch.tensor([[[-math.inf]]])
    c = torch.tensor([[[0.5, -0.5]]])
    merged = echo_merge(
        out,
        lse,
        torch.ones(1, 1, 1, 1, 2),
        torch.zeros(1, 1, 1, 1),
        _csr(1, [[(0, 3, 0)]]),
        _theta(a=2.0, u=0.1, w=0.2, c=c),
        backend="torch",
    )
    torch.testing.assert_close(merged, torch.tensor([[[[2.5, 1.5]]]]))


def test_lse_merge_of_two_key_subsets_equals_dense_and_no_entries_is_identity():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 32, 8, generator=g) for _ in range(3))
    lut, cnt = torch.tensor([[[[0], [1]]]]), torch.ones(1, 1, 2, dtype=torch.long)
    pairs = torch.tensor([[[[0, 1], [1, 0]]]])
    lut2 = torch.tensor([[[[0, 1], [1, 0]]]])
    out, lse = block_sparse_attention(q, k, v, lut, cnt, 16, 8**-0.5, backend="torch")
    _, _, (po, pl) = block_sparse_attention(
        q, k, v, lut2, cnt * 2, 16, 8**-0.5, tile_partials=pairs, backend="torch"
    )
    merged = echo_merge(out, lse, po, pl, _csr(2, [[(0, 0, 0)], [(1, 0, 0)]]), _theta(d=8), backend="torch")
    torch.testing.assert_close(
        merged, torch.nn.functional.scaled_dot_product_attention(q, k, v), atol=1e-5, rtol=1e-5
    )
    same = echo_merge(out, lse, po, pl, _csr(2, [[], []]), _theta(d=8), backend="torch")
    torch.testing.assert_close(same, out)


def test_gradient_reaches_theta():
    theta = tuple(t.requires_grad_() for t in _theta(d=2))
    out = echo_merge(
        torch.ones(1, 1, 1, 2),
        torch.zeros(1, 1, 1),
        torch.randn(1, 1, 1, 1, 2),
        torch.zeros(1, 1, 1, 1),
        _csr(1, [[(0, 1, 0)]]),
        theta,
        backend="torch",
    )
    out.sum().backward()
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in theta)


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        (lambda a: {**a, "echo_csr": (a["echo_csr"][0].float(), a["echo_csr"][1])}, TypeError, "integer"),
        (lambda a: {**a, "echo_csr": (a["echo_csr"][0][..., :1], a["echo_csr"][1])}, ValueError, "indptr"),
        (
            lambda a: {**a, "echo_csr": (a["echo_csr"][0], a["echo_csr"][1] + 5)},
            ValueError,
            "representative id",
        ),
        (lambda a: {**a, "theta": a["theta"][:3] + (torch.zeros(2, 1),)}, ValueError, "`theta` must be"),
        (lambda a: {**a, "rep_lse": a["rep_lse"][..., :1]}, ValueError, "`rep_lse` must be"),
    ],
)
def test_bad_inputs(change, error, match):
    args = {
        "out_e": torch.zeros(1, 1, 2, 2),
        "lse_e": torch.zeros(1, 1, 2),
        "rep_out": torch.zeros(1, 1, 1, 2, 2),
        "rep_lse": torch.zeros(1, 1, 1, 2),
        "echo_csr": _csr(1, [[(0, 0, 0)]]),
        "theta": _theta(),
        "backend": "torch",
    }
    with pytest.raises(error, match=match):
        echo_merge(**change(args))


def test_pooled_scores_equal_manual_means():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 2, 40, 4, generator=g), torch.randn(1, 2, 40, 4, generator=g)
    valid = torch.ones(40, dtype=torch.bool)
    valid[14:16] = False  # 14 valid tokens in tile 0
    out = pooled_tile_scores(q, k, block=16, scale=0.5, kv_valid=valid)
    assert out.shape == (1, 2, 3, 3)
    qm = torch.stack([q[:, :, :14].mean(2), q[:, :, 16:32].mean(2), q[:, :, 32:40].mean(2)], 2)
    km = torch.stack([k[:, :, :14].mean(2), k[:, :, 16:32].mean(2), k[:, :, 32:40].mean(2)], 2)
    ref = qm @ km.transpose(-1, -2) * 0.5 + torch.tensor([14.0, 16.0, 8.0]).log()
    torch.testing.assert_close(out, ref)


def test_pooled_scores_bad_inputs():
    with pytest.raises(ValueError, match="`block` must be an int >= 1"):
        pooled_tile_scores(torch.zeros(1, 1, 4, 2), torch.zeros(1, 1, 4, 2), block=0, scale=1.0)
    with pytest.raises(ValueError, match="`q` and `k` must both be"):
        pooled_tile_scores(torch.zeros(1, 1, 4, 2), torch.zeros(1, 1, 3, 2), block=2, scale=1.0)


@pytest.mark.triton_interpret
@pytest.mark.skipif(not triton_installed(), reason="needs triton")
def test_triton_matches_reference():
    if not interpret_mode():
        pytest.skip("run with TRITON_INTERPRET=1 in a separate process")
    g = torch.Generator().manual_seed(0)
    b, h, s, blk, d, n_p, n_g = 2, 2, 40, 16, 16, 3, 2
    out, lse = torch.randn(b, h, s, d, generator=g), torch.randn(b, h, s, generator=g)
    po, pl = torch.randn(b, h, n_p, blk, d, generator=g), torch.randn(b, h, n_p, blk, generator=g)
    indptr = torch.tensor([0, 2, 2, 4]).repeat(b, h, 1)
    entries = torch.tensor([[0, 1, 0], [2, 3, 1], [1, 2, 1], [0, 1, 0]]).repeat(b, h, 1, 1)
    theta = (
        torch.rand(h, n_g, generator=g) + 0.5,
        torch.randn(h, n_g, d, generator=g) * 0.1,
        torch.randn(h, n_g, generator=g) * 0.1,
        torch.randn(h, n_g, generator=g) * 0.1,
    )
    args = (out, lse, po, pl, (indptr, entries), theta)
    torch.testing.assert_close(
        echo_merge(*args, backend="triton"), echo_merge(*args, backend="torch"), atol=1e-5, rtol=1e-5
    )


def test_differentiable_and_inference_paths_agree():
    g = torch.Generator().manual_seed(2)
    out, lse = torch.randn(1, 2, 40, 8, generator=g), torch.randn(1, 2, 40, generator=g)
    po, pl = torch.randn(1, 2, 3, 16, 8, generator=g), torch.randn(1, 2, 3, 16, generator=g)
    csr = (
        torch.tensor([0, 2, 2, 4]).repeat(1, 2, 1),
        torch.tensor([[0, 1, 0], [2, 3, 1], [1, 2, 1], [0, 1, 0]]).repeat(1, 2, 1, 1),
    )
    theta = (
        torch.rand(2, 2, generator=g) + 0.5,
        torch.randn(2, 2, 8, generator=g),
        torch.randn(2, 2, generator=g),
        torch.randn(2, 2, generator=g),
    )
    with torch.no_grad():
        fast = echo_merge(out, lse, po, pl, csr, theta, backend="torch")
    slow = echo_merge(
        out, lse, po, pl, csr, tuple(t.clone().requires_grad_() for t in theta), backend="torch"
    )
    torch.testing.assert_close(fast, slow.detach(), atol=1e-5, rtol=1e-5)
