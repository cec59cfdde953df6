"""``verify_importance`` and ``masked_topk``: hand-computed cases, properties, bad inputs, Triton parity."""

from __future__ import annotations

import math

import pytest
import torch

from hf_ext.kernels.importance import importance_from_logits, masked_topk, verify_importance

TOL = dict(atol=1e-5, rtol=1e-5)


def _softmax_rows_mean(q_rows, k, valid_len, scale):
    b, hq, r, d = q_rows.shape
    kk = k.repeat_interleave(hq // k.shape[1], dim=1)
    logits = torch.einsum("bhrd,bhnd->bhrn", q_rows, kk) * scale
    n = k.shape[2]
    limits = [valid_len] + [n] * (r - 1)
    mask = torch.stack([torch.arange(n) >= lim for lim in limits])
    return torch.softmax(logits.masked_fill(mask, float("-inf")), -1)[..., :valid_len].mean((1, 2))


def test_weight_mode_hand_computed():
    # 1 layer, 2 heads, D = 2, five keys, one row.
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]]).view(1, 2, 1, 2)
    k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0], [-1.0, 0.0]]).view(1, 1, 5, 2)
    e = math.e
    h1 = torch.tensor([e, 1, e, 1, 1 / e]) / (2 * e + 2 + 1 / e)
    h2 = torch.tensor([1, e, e, 1, 1]) / (2 * e + 3)
    imp = verify_importance(q, k, 5, scale=1.0, mode="weight", backend="torch")
    torch.testing.assert_close(imp[0], (h1 + h2) / 2, atol=1e-6, rtol=0)
    logit = verify_importance(q, k, 5, scale=1.0, mode="logit", backend="torch")
    torch.testing.assert_close(logit[0], torch.tensor([0.5, 0.5, 1.0, 0.0, -0.5]))


def test_matches_masked_softmax_and_rows_sum_to_one():
    g = torch.Generator().manual_seed(1)
    q_rows, k = torch.randn(2, 4, 2, 8, generator=g), torch.randn(2, 2, 30, 8, generator=g)
    imp = verify_importance(q_rows, k, 24, scale=0.4, mode="weight", backend="torch")
    torch.testing.assert_close(imp, _softmax_rows_mean(q_rows, k, 24, 0.4), atol=1e-6, rtol=0)
    one_row = verify_importance(q_rows[:, :, :1], k, 24, scale=0.4, mode="weight", backend="torch")
    torch.testing.assert_close(one_row.sum(-1), torch.ones(2))  # row 0 sees exactly [0, valid_len)


@pytest.mark.parametrize("mode", ["weight", "logit"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])  # the C kernel (CPU fp32), the reference
@pytest.mark.parametrize("n", [30, 2600])  # the C kernel works in chunks of 1024 positions
def test_importance_from_logits_equals_verify_importance(mode, dtype, n):
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(2, 4, 2, 8, generator=g), torch.randn(2, 2, n, 8, generator=g)
    valid, seen = torch.tensor([n - 5, n - 10]), torch.tensor([n, n - 6])
    kk = k.repeat_interleave(2, dim=1)
    logits = torch.einsum("bhrd,bhnd->bhrn", q, kk) * 0.5
    limits = torch.stack([valid, seen], dim=-1)  # row 0 sees [0, valid), row 1 [0, seen)
    logits = logits.masked_fill(torch.arange(n) >= limits[:, None, :, None], float("-inf")).to(dtype)
    got = importance_from_logits(logits, torch.logsumexp(logits, -1), valid, mode)
    want = verify_importance(q, k, valid, 0.5, mode, key_len=seen, backend="torch")
    torch.testing.assert_close(got.float(), want, **TOL)
    assert got[1, n - 10 :].isinf().all()


def test_importance_from_logits_bad_inputs():
    logits, lse = torch.zeros(1, 2, 2, 5), torch.zeros(1, 2, 2)
    with pytest.raises(ValueError, match="`mode` must be one of"):
        importance_from_logits(logits, lse, torch.tensor([5]), "prob")
    with pytest.raises(ValueError, match="must agree"):
        importance_from_logits(logits, torch.zeros(1, 2), torch.tensor([5]))
    with pytest.raises(ValueError, match=r"`valid_len` must lie in \[1, 5\]"):
        importance_from_logits(logits, lse, torch.tensor([6]))


def test_bad_inputs():
    q, k = torch.randn(1, 2, 2, 4), torch.randn(1, 1, 6, 4)
    with pytest.raises(ValueError, match="`mode`"):
        verify_importance(q, k, 3, 1.0, mode="max")
    with pytest.raises(ValueError, match="`valid_len`"):
        verify_importance(q, k, 7, 1.0)
    with pytest.raises(ValueError, match="multiple of H_kv"):
        verify_importance(torch.randn(1, 3, 1, 4), torch.randn(1, 2, 6, 4), 3, 1.0)


def test_properties():
    imp = torch.randperm(100).float().view(1, 100) / 7
    idx = masked_topk(imp, 10, backend="torch")
    assert idx.shape == (1, 10) and idx.unique().numel() == 10 and bool((idx.diff() > 0).all())
    assert set(idx[0].tolist()) == set(imp[0].topk(10).indices.tolist())
    assert masked_topk(imp[:, :4], 10).shape == (1, 4)
    with pytest.raises(ValueError, match="`k`"):
        masked_topk(imp, 0)


@pytest.mark.triton_interpret
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


@pytest.mark.triton_interpret
@pytest.mark.parametrize(("b", "n", "k"), [(1, 1, 1), (2, 17, 5), (1, 1000, 128), (2, 300, 300)])
def test_masked_topk_matches_reference(b, n, k):
    g = torch.Generator().manual_seed(4)
    imp = torch.randn(b, n, generator=g)
    imp[0, :3] = -imp[0, :3].abs() - 5  # negative scores exercise the sign handling of the int image
    torch.testing.assert_close(masked_topk(imp, k, backend="triton"), masked_topk(imp, k, backend="torch"))


@pytest.mark.triton_interpret
def test_masked_topk_ties_take_lowest_index():
    imp = torch.tensor([[1.0, 2.0, 2.0, 2.0, 0.5]])
    assert masked_topk(imp, 2, backend="triton").tolist() == [[1, 2]]


@pytest.mark.parametrize(
    ("b", "n", "k"), [(1, 1, 1), (2, 17, 5), (3, 1000, 128), (2, 300, 300), (8, 33000, 2300)]
)
def test_masked_topk_c_kernel_matches_the_reference(b, n, k):
    g = torch.Generator().manual_seed(5)
    imp = torch.randn(b, n, generator=g)
    imp[0, n // 2 :] = float("-inf")  # positions a row may not select (past its valid length)
    budgets = torch.tensor([k] + [max(1, k - 7 * i) for i in range(1, b)])
    got = masked_topk(imp, budgets)  # CPU fp32: the C kernel
    assert torch.equal(got, masked_topk(imp, budgets, backend="torch"))


def test_masked_topk_c_kernel_ties_take_lowest_index_and_pads():
    imp = torch.tensor([[1.0, 2.0, 2.0, 2.0, 0.5], [3.0, float("-inf"), 1.0, float("-inf"), float("-inf")]])
    assert masked_topk(imp, 2).tolist() == [[1, 2], [0, 2]]
    assert masked_topk(imp, torch.tensor([4, 3])).tolist() == [[0, 1, 2, 3], [0, 2, -1, -1]]


def test_masked_topk_takes_the_reference_when_the_c_kernel_cannot_allocate(monkeypatch):
    import hf_ext.kernels.importance as importance

    monkeypatch.setattr(importance, "call", lambda fn, *args: 1)  # the C status of a failed candidate buffer
    imp = torch.tensor([[0.1, 0.9, 0.3, 0.8], [0.5, 0.0, 0.2, 0.4]])
    assert masked_topk(imp, torch.tensor([2, 1])).tolist() == [[1, 3], [0, -1]]


def test_masked_topk_c_kernel_decides_on_the_lowest_bits():
    # adjacent floats share their top 22 bits, so the select's later digits decide; duplicates tie
    g = torch.Generator().manual_seed(6)
    steps = torch.randint(0, 1500, (2, 4000), generator=g)
    imp = 1.0 + steps.float() * 2.0**-23  # 1 + steps ulps, exact in fp32
    for k in (1, 37, 2300, 4000):
        order = torch.sort(-imp, dim=-1, stable=True).indices  # ties: lowest index first
        expected = order[:, :k].sort(dim=-1).values
        assert torch.equal(masked_topk(imp, k), expected)
