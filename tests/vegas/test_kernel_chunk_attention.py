"""``chunk_attention``: hand-computed case, the C kernel against the reference (GQA, ragged rows, score rows,
a ``KeySelection`` read in place), the fallback without a compiler, bad inputs."""

from __future__ import annotations

import math

import pytest
import torch

from hf_ext.kernels import _native
from hf_ext.kernels.chunked import KeySelection, _reference, chunk_attention

SHAPES = [
    (1, 4, 4, 7, 64, 300),
    (2, 8, 2, 7, 32, 1000),
    (3, 4, 1, 1, 128, 77),
    (2, 16, 4, 16, 16, 130),
    (2, 4, 2, 7, 64, 34),  # the last block of keys starts past the first rows' last visible slot
    (1, 2, 2, 2, 256, 70),  # the largest head size the kernel takes
    (1, 2, 1, 3, 20, 50),  # a head size the kernel does not take (not a multiple of 8): the reference
]


def _inputs(b, hq, hkv, r, d, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    k, v = torch.randn(b, hkv, n + 5, d, generator=g), torch.randn(b, hkv, n + 5, d, generator=g)
    lengths = torch.tensor([n - 2 * i for i in range(b)])
    return torch.randn(b, hq, r, d, generator=g), k, v, lengths


def test_hand_computed_visibility_and_softmax():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]]).view(1, 1, 2, 2)
    k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [9.0, 9.0]]).view(1, 1, 4, 2)
    v = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0], [9.0, 9.0]]).view(1, 1, 4, 2)
    rows = torch.tensor([[0, 1]])
    out, lse, logits = chunk_attention(q, k, v, torch.tensor([3]), scale=1.0, score_rows=rows)
    # row 0 at slot 1 sees slots {0, 1}: logits (1, 0); row 1 at slot 2 sees {0, 1, 2}: logits (0, 1, 1)
    e = math.e
    torch.testing.assert_close(out[0, 0, 0], torch.tensor([e / (e + 1), 1 / (e + 1)]))
    torch.testing.assert_close(out[0, 0, 1], torch.tensor([1.0, 3 * e / (1 + 2 * e)]))
    torch.testing.assert_close(lse[0, 0], torch.tensor([math.log(e + 1), math.log(1 + 2 * e)]))
    assert logits[0, 0].tolist() == [[1.0, 0.0, float("-inf")], [0.0, 1.0, 1.0]]


@pytest.mark.parametrize(("b", "hq", "hkv", "r", "d", "n"), SHAPES)
def test_c_kernel_matches_the_reference(b, hq, hkv, r, d, n):
    q, k, v, lengths = _inputs(b, hq, hkv, r, d, n)
    rows = torch.tensor([[0, r - 1 - i % r] for i in range(b)])
    assert _native.load("chunk_attention") is not None  # the test machine has a C compiler
    fast = chunk_attention(q, k, v, lengths, scale=d**-0.5, score_rows=rows)
    ref = _reference(q, k, v, lengths, d**-0.5, rows)
    for got, want in zip(fast, ref):
        torch.testing.assert_close(got, want, atol=2e-6, rtol=2e-5)
    assert torch.equal(fast[2].isinf(), ref[2].isinf())


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_non_finite_slots_past_a_row_length_are_ignored(backend):
    q, k, v, lengths = _inputs(2, 4, 2, 3, 16, 40)  # row 1 holds 38 live slots of 40
    rows = torch.tensor([[0, 2], [0, 2]])
    clean = chunk_attention(q, k, v, lengths, scale=0.25, score_rows=rows, backend=backend)
    k[1, :, 38:], v[1, :, 38:] = float("nan"), float("-inf")
    dirty = chunk_attention(q, k, v, lengths, scale=0.25, score_rows=rows, backend=backend)
    for a, b in zip(clean, dirty):
        torch.testing.assert_close(b, a)


def test_reference_equals_per_row_sdpa():
    q, k, v, lengths = _inputs(2, 4, 2, 5, 16, 40)
    out, lse, _ = chunk_attention(q, k, v, lengths, scale=0.25, backend="torch")
    for b in range(2):
        n = int(lengths[b])
        ks, vs = k[b : b + 1, :, :n], v[b : b + 1, :, :n]
        mask = torch.ones(5, n, dtype=torch.bool).tril(n - 5)
        want = torch.nn.functional.scaled_dot_product_attention(
            q[b : b + 1], ks, vs, attn_mask=mask, scale=0.25, enable_gqa=True
        )
        torch.testing.assert_close(out[b : b + 1], want, atol=1e-6, rtol=1e-5)
    assert torch.isfinite(lse).all()


def _selection(lengths, r, seed=0, empty_row=None):
    """Per row a random ascending third of the slots before a tail of ``r + 3`` (none in ``empty_row``)."""
    g = torch.Generator().manual_seed(seed)
    tails = [int(n) - r - 3 for n in lengths]
    rows = [torch.randperm(t, generator=g)[: t // 3].sort().values for t in tails]
    if empty_row is not None:
        rows[empty_row] = rows[empty_row][:0]
    return KeySelection.from_rows(rows, tails), rows, tails


def test_from_padded_counts_and_runs_by_hand():
    sel = KeySelection.from_padded(torch.tensor([[0, 1, 2, 7, -1], [4, -1, -1, -1, -1]]), [9, 6])
    assert sel.counts.tolist() == [4, 1] and sel.indices.min() >= 0
    assert sel.runs() == 3  # row 0: {0, 1, 2}, {7}; row 1: {4}
    heads = KeySelection(torch.tensor([[[0, 1, 5], [0, 2, 4]]]), torch.tensor([3]), torch.tensor([8]))
    assert heads.runs() == (2 + 3) / 2  # per-head slots count the mean over the heads


def test_selection_equals_attention_over_the_selected_slots():
    q, k, v, lengths = _inputs(2, 4, 2, 3, 16, 90)
    sel, rows, tails = _selection(lengths, 3)
    out, lse, _ = chunk_attention(q, k, v, lengths, scale=0.25, selection=sel)
    for b in range(2):
        slots = torch.cat([rows[b], torch.arange(tails[b], int(lengths[b]))])
        n = len(slots)
        mask = torch.ones(3, n, dtype=torch.bool).tril(n - 3)  # the chunk is the last 3 of the row's slots
        want = torch.nn.functional.scaled_dot_product_attention(
            q[b : b + 1], k[b : b + 1, :, slots], v[b : b + 1, :, slots], attn_mask=mask, scale=0.25,
            enable_gqa=True,
        )  # fmt: skip
        torch.testing.assert_close(out[b : b + 1], want, atol=1e-6, rtol=1e-5)
    assert torch.isfinite(lse).all()


@pytest.mark.parametrize(("b", "hq", "hkv", "r", "d", "n"), [s for s in SHAPES if s[-1] > s[3] + 6])
def test_c_kernel_matches_the_reference_over_a_selection(b, hq, hkv, r, d, n):
    q, k, v, lengths = _inputs(b, hq, hkv, r, d, n)
    sel, _, _ = _selection(lengths, r, empty_row=b - 1 if b > 1 else None)
    rows = torch.tensor([[0, r - 1 - i % r] for i in range(b)])
    fast = chunk_attention(q, k, v, lengths, scale=d**-0.5, score_rows=rows, selection=sel)
    ref = chunk_attention(q, k, v, lengths, scale=d**-0.5, score_rows=rows, selection=sel, backend="torch")
    for got, want in zip(fast, ref):
        torch.testing.assert_close(got, want, atol=2e-6, rtol=2e-5)
    assert torch.equal(fast[2].isinf(), ref[2].isinf())


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_unselected_slots_are_never_read(backend):
    q, k, v, lengths = _inputs(2, 4, 2, 1, 16, 200)
    sel, rows, tails = _selection(lengths, 1)
    clean = chunk_attention(q, k, v, lengths, scale=0.25, selection=sel, backend=backend)
    for b in range(2):
        hidden = torch.ones(k.shape[2], dtype=torch.bool)
        hidden[rows[b]] = False
        hidden[tails[b] : int(lengths[b])] = False
        k[b, :, hidden], v[b, :, hidden] = float("nan"), float("inf")
    dirty = chunk_attention(q, k, v, lengths, scale=0.25, selection=sel, backend=backend)
    for a, d in zip(clean[:2], dirty[:2]):
        torch.testing.assert_close(d, a)


def test_per_head_selection_reads_each_heads_own_slots():
    q, k, v, lengths = _inputs(2, 4, 2, 1, 16, 120)
    g = torch.Generator().manual_seed(1)
    tails = [int(n) - 4 for n in lengths]
    idx = torch.stack(
        [torch.stack([torch.randperm(t, generator=g)[:30].sort().values for _ in range(2)]) for t in tails]
    )
    counts = torch.tensor([30, 20])
    sel = KeySelection(idx, counts, torch.tensor(tails))
    fast = chunk_attention(q, k, v, lengths, scale=0.25, selection=sel)
    ref = chunk_attention(q, k, v, lengths, scale=0.25, selection=sel, backend="torch")
    torch.testing.assert_close(fast[0], ref[0], atol=2e-6, rtol=2e-5)
    torch.testing.assert_close(fast[1], ref[1], atol=2e-6, rtol=2e-5)
    for b in range(2):
        for h in range(2):  # query heads 2h and 2h + 1 read KV head h
            slots = torch.cat([idx[b, h, : int(counts[b])], torch.arange(tails[b], int(lengths[b]))])
            ks, vs = k[b : b + 1, h : h + 1, slots], v[b : b + 1, h : h + 1, slots]
            want = torch.nn.functional.scaled_dot_product_attention(
                q[b : b + 1, 2 * h : 2 * h + 2], ks, vs, scale=0.25, enable_gqa=True
            )
            torch.testing.assert_close(fast[0][b : b + 1, 2 * h : 2 * h + 2], want, atol=1e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="holds 2 heads, the cache has 1 KV heads"):
        chunk_attention(q, k[:, :1], v[:, :1], lengths, scale=0.25, selection=sel)


@pytest.mark.parametrize(
    ("indices", "counts", "tail", "match"),
    [
        ([[3, 2]], [2], [5], "strictly ascending"),
        ([[1, 1]], [2], [5], "strictly ascending"),
        ([[1, 5]], [2], [5], r"in \[0, tail_start=5\)"),
        ([[-1, 2]], [2], [5], "strictly ascending"),
        ([[1, 2]], [3], [5], r"`counts` must lie in \[0, 2\]"),
        ([[1, 2]], [1], [-1], "`tail_start` be >= 0"),
        ([[1, 2]], [1, 1], [5], r"`counts`, `tail_start` \[B\]"),
    ],
)
def test_bad_selections(indices, counts, tail, match):
    with pytest.raises(ValueError, match=match):
        KeySelection(torch.tensor(indices), torch.tensor(counts), torch.tensor(tail))


def test_bad_selection_dtype_and_fit():
    with pytest.raises(ValueError, match="must be int64 tensors"):
        KeySelection(torch.tensor([[1]], dtype=torch.int32), torch.tensor([1]), torch.tensor([5]))
    q, k, v = torch.ones(1, 4, 2, 8), torch.ones(1, 2, 10, 8), torch.ones(1, 2, 10, 8)
    sel = KeySelection(torch.tensor([[1, 2]]), torch.tensor([2]), torch.tensor([5]))
    with pytest.raises(ValueError, match="must leave the last 2 slot"):
        chunk_attention(q, k, v, torch.tensor([6]), scale=1.0, selection=sel)
    two = KeySelection(torch.tensor([[1], [1]]), torch.tensor([1, 1]), torch.tensor([5, 5]))
    with pytest.raises(ValueError, match="`selection` holds 2 rows, the batch has 1"):
        chunk_attention(q, k, v, torch.tensor([8]), scale=1.0, selection=two)


def test_without_a_compiler_the_reference_answers(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    _native.load.cache_clear()
    try:
        q, k, v, lengths = _inputs(2, 4, 2, 3, 16, 50)
        with caplog.at_level("WARNING", logger="hf_ext.kernels._native"):
            got = chunk_attention(q, k, v, lengths, scale=0.25)
        assert "not built" in caplog.text
        torch.testing.assert_close(got[0], _reference(q, k, v, lengths, 0.25, None)[0])
    finally:
        _native.load.cache_clear()


def test_half_precision_and_large_groups_use_the_reference():
    q, k, v, lengths = _inputs(1, 4, 1, 20, 16, 60)  # 80 query vectors per KV head > 64
    out, _, _ = chunk_attention(q, k, v, lengths, scale=0.25)
    torch.testing.assert_close(out, _reference(q, k, v, lengths, 0.25, None)[0])
    half, _, _ = chunk_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), lengths, scale=0.25)
    assert half.dtype == torch.bfloat16 and torch.isfinite(half.float()).all()


@pytest.mark.parametrize(
    ("change", "exc", "match"),
    [
        (dict(q=torch.ones(1, 4, 2, 8, dtype=torch.long)), TypeError, "`q` must be a floating-point"),
        (dict(q=torch.ones(1, 3, 2, 8)), ValueError, "multiple of H_kv"),
        (dict(k=torch.ones(1, 2, 10, 4)), ValueError, "agree on batch and head size"),
        (dict(v=torch.ones(1, 2, 9, 8)), ValueError, r"`k`, `v` both \[B, H_kv, N, D\]"),
        (dict(lengths=torch.tensor([1])), ValueError, r"`lengths` must lie in \[R, N\]"),
        (dict(lengths=torch.tensor([11])), ValueError, r"`lengths` must lie in \[R, N\]"),
        (dict(lengths=torch.tensor([5], dtype=torch.int32)), ValueError, "`lengths` must be an int64"),
        (dict(score_rows=torch.tensor([[2]])), ValueError, "`score_rows` must index chunk rows"),
        (dict(backend="cuda"), ValueError, "`backend` must be one of"),
    ],
)
def test_bad_inputs(change, exc, match):
    args = dict(q=torch.ones(1, 4, 2, 8), k=torch.ones(1, 2, 10, 8), v=torch.ones(1, 2, 10, 8),
                lengths=torch.tensor([5]))  # fmt: skip
    args.update(change)
    kw = {key: args.pop(key) for key in ("score_rows", "backend") if key in args}
    with pytest.raises(exc, match=match):
        chunk_attention(args["q"], args["k"], args["k"] if "k" in change else args["v"], args["lengths"],
                        scale=1.0, **kw)  # fmt: skip


def test_a_shared_header_is_part_of_the_build_key(monkeypatch, tmp_path):
    import ctypes

    src = tmp_path / "csrc"
    src.mkdir()
    (src / "probe.c").write_text('#include "probe.h"\nint probe(void) { return VALUE; }\n')
    monkeypatch.setattr(_native, "SOURCES", src)
    monkeypatch.setenv("HF_EXT_CACHE", str(tmp_path / "cache"))
    _native.load.cache_clear()
    try:
        values = []
        for value in (1, 2):  # a header edit must rebuild the kernel, not reuse the cached one
            (src / "probe.h").write_text(f"#define VALUE {value}\n")
            _native.load.cache_clear()
            lib = _native.load("probe")
            assert lib is not None
            lib.probe.restype = ctypes.c_int
            values.append(lib.probe())
        assert values == [1, 2]
        assert len(list((tmp_path / "cache" / "kernels").glob("probe-*.so"))) == 2
    finally:
        _native.load.cache_clear()


def test_key_selection_validate_false_skips_the_checks():
    idx = torch.tensor([[3, 1]])  # not ascending: rejected when validated
    with pytest.raises(ValueError, match="strictly ascending"):
        KeySelection(idx, torch.tensor([2]), torch.tensor([5]))
    sel = KeySelection(idx, torch.tensor([2]), torch.tensor([5]), validate=False)
    assert sel.indices is idx
    ok = KeySelection.from_padded(torch.tensor([[1, 3, -1]]), [5], validate=False)
    assert ok.counts.tolist() == [2] and ok.indices.tolist() == [[1, 3, 0]]
