"""``gather_kv`` and ``gathered_decode_attention``: hand-computed cases, properties, bad inputs, Triton."""

from __future__ import annotations

import math

import pytest
import torch

from hf_ext.kernels.gathered_attention import gather_kv, gathered_decode_attention

TOL = dict(atol=1e-5, rtol=1e-5)


SHAPES = [(1, 4, 1, 32, 1000, 128), (2, 4, 2, 64, 128, 7), (2, 8, 8, 32, 17, 1), (1, 4, 1, 256, 128, 7)]


def _qkv(b=1, hq=4, hkv=2, n=50, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(b, hq, 1, d, generator=g),
        torch.randn(b, hkv, n, d, generator=g),
        torch.randn(b, hkv, n, d, generator=g),
    )


def _inputs(b, hq, hkv, d, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(b, hq, 1, d, generator=g),
        torch.randn(b, hkv, n, d, generator=g),
        torch.randn(b, hkv, n, d, generator=g),
        g,
    )


def test_hand_computed():
    q = torch.tensor([1.0, 0.0]).view(1, 1, 1, 2)
    k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 0.0]]).view(1, 1, 3, 2)
    v = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]).view(1, 1, 3, 2)
    out, lse = gathered_decode_attention(q, k, v, torch.tensor([[0, 2]]), scale=1.0, backend="torch")
    torch.testing.assert_close(out.flatten(), torch.tensor([0.26894, 0.0]), atol=1e-5, rtol=0)
    assert lse.item() == pytest.approx(math.log(math.e + math.e**2), abs=1e-5)


def test_full_index_equals_sdpa():
    q, k, v = _qkv()
    out, _ = gathered_decode_attention(q, k, v, torch.arange(50)[None], scale=0.3, backend="torch")
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=0.3, enable_gqa=True)
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=1e-5)
    compact, _ = gathered_decode_attention(q, k, v, None, scale=0.3, backend="torch")
    torch.testing.assert_close(compact, ref, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("path", ["c kernel", "aten flash"])
@pytest.mark.parametrize(("b", "hq", "hkv", "d", "n", "m"), SHAPES)
def test_cpu_fused_compact_path_equals_the_reference(b, hq, hkv, d, n, m, path, monkeypatch):
    import hf_ext.kernels.gathered_attention as ga

    if path == "aten flash":  # where the C kernel does not build or apply
        monkeypatch.setattr(ga, "run_kernel", lambda *a: None)
    q, k, v, _ = _inputs(b, hq, hkv, d, n)
    lengths = torch.tensor([m] + [max(1, m - 3 * i) for i in range(1, b)])  # ragged rows in [1, m]
    fused = gathered_decode_attention(q, k, v, None, scale=0.3, length=lengths, backend="auto")
    ref = ga._reference_gathered_decode_attention(q, k, v, None, 0.3, lengths)
    torch.testing.assert_close(fused[0], ref[0], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(fused[1], ref[1], atol=1e-5, rtol=1e-6)
    half = gathered_decode_attention(
        q.bfloat16(), k.bfloat16(), v.bfloat16(), None, scale=0.3, length=lengths
    )
    assert half[0].dtype == torch.bfloat16 and torch.isfinite(half[0].float()).all()


@pytest.mark.parametrize(("b", "hq", "hkv", "d", "n", "m"), SHAPES)
def test_gather_writes_into_out_and_matches_a_fresh_buffer(b, hq, hkv, d, n, m):
    _, k, v, g = _inputs(b, hq, hkv, d, n)
    k, v = k[:, :, : n - 1], v[:, :, : n - 1]  # a cache slice of a longer buffer, as decoding passes it
    idx = torch.stack([torch.randperm(n - 1, generator=g)[:m] for _ in range(b)])
    idx[-1, m // 2 :] = -1  # a shorter row
    ref = gather_kv(k, v, idx, m + 3, backend="torch")
    out = (torch.full((b, hkv, m + 9, d), 7.0), torch.full((b, hkv, m + 9, d), 7.0))
    got = gather_kv(k, v, idx, m + 3, out=out, backend="torch")
    assert got[0] is out[0] and got[1] is out[1]
    for a, t in zip(ref, got):
        for row in range(b):
            live = idx[row] >= 0
            assert torch.equal(t[row, :, :m][:, live], a[row, :, :m][:, live])
    assert bool((got[0][:, :, m + 3 :] == 7.0).all())  # past the capacity nothing is written


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("b", "hq", "hkv", "d", "n", "m"), SHAPES)
def test_gather_c_kernel_equals_the_reference(b, hq, hkv, d, n, m, dtype):
    _, k, v, g = _inputs(b, hq, hkv, d, n)
    k, v = k[:, :, : n - 1].to(dtype), v[:, :, : n - 1].to(dtype)  # a slice of a longer buffer
    idx = torch.stack([torch.randperm(n - 1, generator=g)[:m] for _ in range(b)])
    idx[-1, m // 2 :] = -1  # a shorter row: its padding is skipped
    fill = torch.full((b, hkv, m + 4, d), 7.0, dtype=dtype)
    got = gather_kv(k, v, idx, m + 2, out=(fill.clone(), fill.clone()))
    want = gather_kv(k, v, idx, m + 2, out=(fill.clone(), fill.clone()), backend="torch")
    live = (idx >= 0)[:, None, :, None].expand(-1, hkv, -1, d)
    for a, t in zip(want, got):
        assert torch.equal(t[:, :, :m][live], a[:, :, :m][live])
        assert bool((t[:, :, :m][~live] == 7.0).all())  # padding rows are left as they were
        assert bool((t[:, :, m:] == 7.0).all())


def test_gather_kv_rejects_an_out_without_room():
    _, k, v, _ = _inputs(1, 2, 2, 8, 10)
    with pytest.raises(ValueError, match=r"`out` must be two \[B, H_kv, >= capacity, D\]"):
        gather_kv(k, v, torch.tensor([[1, 2, 3]]), 5, out=(torch.empty(1, 2, 4, 8), torch.empty(1, 2, 4, 8)))


@pytest.mark.parametrize("backend", ["auto", "torch"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compact_mode_ignores_non_finite_slots_past_a_row_length(backend, dtype):
    q, k, v, _ = _inputs(2, 4, 2, 8, 10)
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    lengths = torch.tensor([10, 6])
    clean = gathered_decode_attention(q, k, v, None, scale=0.3, length=lengths, backend=backend)
    k[1, :, 6:], v[1, :, 6:] = float("nan"), float("-inf")  # a short row's stale slots
    dirty = gathered_decode_attention(q, k, v, None, scale=0.3, length=lengths, backend=backend)
    torch.testing.assert_close(dirty[0], clean[0])
    torch.testing.assert_close(dirty[1], clean[1])


def test_padding_finite_skips_the_check_and_keeps_the_result(monkeypatch):
    import hf_ext.kernels.gathered_attention as ga

    monkeypatch.setattr(ga, "run_kernel", lambda *a: None)  # ATen's path (the C kernel reads no padding)
    q, k, v, _ = _inputs(2, 4, 2, 8, 10)
    lengths = torch.tensor([10, 3])
    checked = gathered_decode_attention(q, k, v, None, scale=0.3, length=lengths)
    monkeypatch.setattr(ga, "_tails_finite", lambda *a: pytest.fail("the padding was read"))
    vouched = gathered_decode_attention(q, k, v, None, scale=0.3, length=lengths, padding_finite=True)
    ref = gathered_decode_attention(q, k, v, None, scale=0.3, length=lengths, backend="torch")
    for a, b, c in zip(checked, vouched, ref):
        torch.testing.assert_close(a, b)
        torch.testing.assert_close(b, c)


def test_permutation_and_outside_positions():
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


def test_lse_split_merge_equals_one_pass():
    q, k, v = _qkv()
    one, lse = gathered_decode_attention(q, k, v, torch.arange(20)[None], scale=0.5, backend="torch")
    a, la = gathered_decode_attention(q, k, v, torch.arange(8)[None], scale=0.5, backend="torch")
    b, lb = gathered_decode_attention(q, k, v, torch.arange(8, 20)[None], scale=0.5, backend="torch")
    lse_m = torch.logaddexp(la, lb)
    merged = torch.exp(la - lse_m)[..., None, None] * a + torch.exp(lb - lse_m)[..., None, None] * b
    torch.testing.assert_close(merged, one, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(lse_m, lse)


def test_per_head_idx_and_gather_kv():
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
        ({"idx": torch.zeros(1, 0, dtype=torch.long)}, ValueError, "selects nothing"),
        ({"idx": torch.tensor([[0.0, 1.0]])}, TypeError, "idx"),
        ({"q": torch.ones(1, 4, 1, 8, dtype=torch.long)}, TypeError, "`q`"),
    ],
)
def test_bad_inputs(kwargs, exc, match):
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


@pytest.mark.triton_interpret
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


@pytest.mark.triton_interpret
@pytest.mark.parametrize(("b", "hq", "hkv", "d", "n", "m"), SHAPES[:3])
def test_gather_kv_matches_reference(b, hq, hkv, d, n, m):
    _, k, v, g = _inputs(b, hq, hkv, d, n)
    idx = torch.stack([torch.randperm(n, generator=g)[:m] for _ in range(b)])
    ref = gather_kv(k, v, idx, m + 3, backend="torch")
    tri = gather_kv(k, v, idx, m + 3, backend="triton")
    for a, t in zip(ref, tri):
        torch.testing.assert_close(t[:, :, :m], a[:, :, :m], atol=0, rtol=0)


@pytest.mark.triton_interpret
def test_triton_rejects_non_power_of_two_head_size():
    q, k, v, _ = _inputs(1, 2, 1, 24, 10)
    with pytest.raises(ValueError, match="power of two"):
        gathered_decode_attention(q, k, v, None, scale=1.0, backend="triton")
