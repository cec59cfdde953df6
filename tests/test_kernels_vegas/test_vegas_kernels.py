"""Vegas kernels (K1 gather / gathered decode attention, K2 importance, K3 top-k, K4 Quest): torch reference math."""

from __future__ import annotations

import math

import pytest
import torch

from hf_ext.kernels.gathered_attention import gather_kv, gathered_decode_attention
from hf_ext.kernels.importance import masked_topk, verify_importance
from hf_ext.kernels.quest import page_minmax, quest_page_scores


def _qkv(b=1, hq=4, hkv=2, n=50, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, hq, 1, d, generator=g), torch.randn(b, hkv, n, d, generator=g),
            torch.randn(b, hkv, n, d, generator=g))  # fmt: skip


def test_k1_hand_computed():
    q = torch.tensor([1.0, 0.0]).view(1, 1, 1, 2)
    k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 0.0]]).view(1, 1, 3, 2)
    v = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]).view(1, 1, 3, 2)
    out, lse = gathered_decode_attention(q, k, v, torch.tensor([[0, 2]]), scale=1.0, backend="torch")
    torch.testing.assert_close(out.flatten(), torch.tensor([0.26894, 0.0]), atol=1e-5, rtol=0)
    assert lse.item() == pytest.approx(math.log(math.e + math.e**2), abs=1e-5)


def test_k1_full_index_equals_sdpa():
    q, k, v = _qkv()
    out, _ = gathered_decode_attention(q, k, v, torch.arange(50)[None], scale=0.3, backend="torch")
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=0.3, enable_gqa=True)
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=1e-5)
    compact, _ = gathered_decode_attention(q, k, v, None, scale=0.3, backend="torch")
    torch.testing.assert_close(compact, ref, atol=1e-6, rtol=1e-5)


def test_k1_permutation_and_outside_positions():
    q, k, v = _qkv()
    idx = torch.tensor([[3, 7, 11, 40]])
    a, la = gathered_decode_attention(q, k, v, idx, scale=0.3, backend="torch")
    b, lb = gathered_decode_attention(q, k, v, idx.flip(-1), scale=0.3, backend="torch")
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(la, lb)
    v2 = v.clone()
    v2[:, :, [0, 1, 2]] = 1e4
    c, _ = gathered_decode_attention(q, k, v2, idx, scale=0.3, backend="torch")
    torch.testing.assert_close(a, c)


def test_k1_lse_split_merge_equals_one_pass():
    q, k, v = _qkv()
    one, lse = gathered_decode_attention(q, k, v, torch.arange(20)[None], scale=0.5, backend="torch")
    a, la = gathered_decode_attention(q, k, v, torch.arange(8)[None], scale=0.5, backend="torch")
    b, lb = gathered_decode_attention(q, k, v, torch.arange(8, 20)[None], scale=0.5, backend="torch")
    lse_m = torch.logaddexp(la, lb)
    merged = torch.exp(la - lse_m)[..., None, None] * a + torch.exp(lb - lse_m)[..., None, None] * b
    torch.testing.assert_close(merged, one, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(lse_m, lse)


def test_k1_per_head_idx_and_gather_kv():
    q, k, v = _qkv(b=2)
    idx = torch.tensor([[1, 5, 9], [2, 4, 6]])
    k_c, v_c = gather_kv(k, v, idx, capacity=5, backend="torch")
    assert k_c.shape == (2, 2, 5, 8)
    torch.testing.assert_close(k_c[1, :, :3], k[1, :, [2, 4, 6]])
    shared, _ = gathered_decode_attention(q, k, v, idx, scale=0.3, backend="torch")
    compact, _ = gathered_decode_attention(q, k_c, v_c, None, length=3, scale=0.3, backend="torch")
    per_head, _ = gathered_decode_attention(q, k, v, idx[:, None].expand(2, 2, 3), scale=0.3, backend="torch")
    torch.testing.assert_close(compact, shared)
    torch.testing.assert_close(per_head, shared)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"k": torch.randn(1, 2, 5, 4), "v": torch.randn(1, 2, 5, 4)}, ValueError, "head size"),
        ({"v": torch.randn(1, 2, 49, 8)}, ValueError, "`k` and `v`"),
        ({"k": torch.randn(1, 3, 5, 8), "v": torch.randn(1, 3, 5, 8)}, ValueError, "multiple of H_kv"),
        ({"idx": torch.tensor([[0, 50]])}, ValueError, r"\[0, 50\)"),
        ({"idx": torch.tensor([[1, 1]])}, ValueError, "duplicated"),
        ({"idx": torch.zeros(1, 0, dtype=torch.long)}, ValueError, "empty"),
        ({"idx": torch.tensor([[0.0, 1.0]])}, TypeError, "idx"),
        ({"q": torch.ones(1, 4, 1, 8, dtype=torch.long)}, TypeError, "`q`"),
    ],
)
def test_k1_bad_inputs(kwargs, exc, match):
    q, k, v = _qkv()
    args = {"q": q, "k": k, "v": v, "idx": torch.tensor([[0, 1]]), **kwargs}
    with pytest.raises(exc, match=match):
        gathered_decode_attention(args["q"], args["k"], args["v"], args["idx"], scale=1.0, backend="torch")


def test_triton_backend_on_cpu_needs_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    from hf_ext.kernels._dispatch import triton_installed

    if not triton_installed():
        pytest.skip("triton not installed")
    q, k, v = _qkv()
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        gathered_decode_attention(q, k, v, None, scale=1.0, backend="triton")


def _softmax_rows_mean(q_rows, k, valid_len, scale):
    b, hq, r, d = q_rows.shape
    kk = k.repeat_interleave(hq // k.shape[1], dim=1)
    logits = torch.einsum("bhrd,bhnd->bhrn", q_rows, kk) * scale
    n = k.shape[2]
    limits = [valid_len] + [n] * (r - 1)
    mask = torch.stack([torch.arange(n) >= lim for lim in limits])
    return torch.softmax(logits.masked_fill(mask, float("-inf")), -1)[..., :valid_len].mean((1, 2))


def test_k2_weight_mode_hand_computed():
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


def test_k2_matches_masked_softmax_and_rows_sum_to_one():
    g = torch.Generator().manual_seed(1)
    q_rows, k = torch.randn(2, 4, 2, 8, generator=g), torch.randn(2, 2, 30, 8, generator=g)
    imp = verify_importance(q_rows, k, 24, scale=0.4, mode="weight", backend="torch")
    torch.testing.assert_close(imp, _softmax_rows_mean(q_rows, k, 24, 0.4), atol=1e-6, rtol=0)
    one_row = verify_importance(q_rows[:, :, :1], k, 24, scale=0.4, mode="weight", backend="torch")
    torch.testing.assert_close(one_row.sum(-1), torch.ones(2))  # row 0 sees exactly [0, valid_len)


def test_k2_bad_inputs():
    q, k = torch.randn(1, 2, 2, 4), torch.randn(1, 1, 6, 4)
    with pytest.raises(ValueError, match="`mode`"):
        verify_importance(q, k, 3, 1.0, mode="max")
    with pytest.raises(ValueError, match="`valid_len`"):
        verify_importance(q, k, 7, 1.0)
    with pytest.raises(ValueError, match="multiple of H_kv"):
        verify_importance(torch.randn(1, 3, 1, 4), torch.randn(1, 2, 6, 4), 3, 1.0)


def test_k3_properties():
    imp = torch.randperm(100).float().view(1, 100) / 7
    idx = masked_topk(imp, 10, backend="torch")
    assert idx.shape == (1, 10) and idx.unique().numel() == 10 and bool((idx.diff() > 0).all())
    assert set(idx[0].tolist()) == set(imp[0].topk(10).indices.tolist())
    assert masked_topk(imp[:, :4], 10).shape == (1, 4)
    with pytest.raises(ValueError, match="`k`"):
        masked_topk(imp, 0)


def test_k4_hand_computed_and_upper_bound():
    q = torch.tensor([1.0, -2.0]).view(1, 1, 1, 2)
    s = quest_page_scores(
        q, torch.tensor([0.0, -1.0]).view(1, 1, 1, 2), torch.tensor([2.0, 3.0]).view(1, 1, 1, 2)
    )
    assert s.item() == 4.0
    g = torch.Generator().manual_seed(2)
    for _ in range(20):
        k = torch.randn(1, 1, 64, 4, generator=g)
        q = torch.randn(1, 2, 1, 4, generator=g)  # two query heads share the KV head
        kmin, kmax = page_minmax(k, 16)
        scores = quest_page_scores(q, kmin, kmax)
        dots = torch.einsum("hd,nd->hn", q[0, :, 0], k[0, 0]).view(2, 4, 16).amax(-1)  # per head, per page
        assert bool((scores[0, 0] >= dots.sum(0) - 1e-5).all())
