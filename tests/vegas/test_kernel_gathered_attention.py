"""``gathered_decode_attention``: hand-computed cases, properties, a ``KeySelection``, bad inputs, Triton."""

from __future__ import annotations

import math

import pytest
import torch

from hf_ext.kernels.chunked import KeySelection
from hf_ext.kernels.gathered_attention import gathered_decode_attention

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


def test_shared_per_head_and_compact_idx_agree():
    q, k, v = _qkv(b=2)
    idx = torch.tensor([[1, 5, 9], [2, 4, 6]])
    k_c, v_c = (t[torch.arange(2)[:, None], :, idx].transpose(1, 2) for t in (k, v))  # [2, 2, 3, 8]
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
    sel = KeySelection.from_rows([r[r < n // 2].sort().values for r in idx], [n // 2] * b)
    for ix, length in ((idx, None), (per_head, None), (None, m), (sel, n // 2 + 1)):
        ref = gathered_decode_attention(q, k, v, ix, scale=0.3, length=length, backend="torch")
        tri = gathered_decode_attention(q, k, v, ix, scale=0.3, length=length, backend="triton")
        torch.testing.assert_close(tri[0], ref[0], **TOL)
        torch.testing.assert_close(tri[1], ref[1], **TOL)


def test_a_selection_reads_in_place_what_its_slots_select():
    q, k, v, g = _inputs(2, 4, 2, 16, 300)
    rows = [torch.randperm(250, generator=g)[:40].sort().values for _ in range(2)]
    sel = KeySelection.from_rows(rows, [250, 260])
    lengths = torch.tensor([255, 262])
    fast = gathered_decode_attention(q, k, v, sel, scale=0.3, length=lengths)
    slow = gathered_decode_attention(q, k, v, sel.slots(lengths), scale=0.3, backend="torch")
    torch.testing.assert_close(fast[0], slow[0], **TOL)
    torch.testing.assert_close(fast[1], slow[1], **TOL)
    with pytest.raises(ValueError, match="must leave the last 1 slot"):
        gathered_decode_attention(q, k, v, sel, scale=0.3, length=torch.tensor([250, 262]), backend="torch")


@pytest.mark.triton_interpret
def test_triton_rejects_non_power_of_two_head_size():
    q, k, v, _ = _inputs(1, 2, 1, 24, 10)
    with pytest.raises(ValueError, match="power of two"):
        gathered_decode_attention(q, k, v, None, scale=1.0, backend="triton")
