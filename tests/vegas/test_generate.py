"""End-to-end ``vegas_generate`` on tiny models: greedy identity, counters, host conformance, bad inputs."""

from __future__ import annotations

import pytest
import torch

from hf_ext.testing import requires, tiny_gemma3, tiny_llama, tiny_qwen2

pytestmark = requires("transformers")

SELECTORS = ("vegas", "streamingllm", "quest", "full")
ARCH = dict(
    hidden_size=32,
    intermediate_size=64,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
)


def _model(arch: str):
    if arch == "gemma3":  # 5 sliding layers (window 16) + 1 global layer
        return tiny_gemma3(num_hidden_layers=6, head_dim=8, **ARCH)
    return {"llama": tiny_llama, "qwen2": tiny_qwen2}[arch](**ARCH)


def _prompt(n: int = 150, seed: int = 0) -> torch.Tensor:
    return torch.randint(3, 64, (1, n), generator=torch.Generator().manual_seed(seed))


def _cfg(selector: str = "vegas", **kw):
    from hf_ext import VegasConfig

    kw = {
        "fallback": False,
        **kw,
    }  # these tests exercise the draft loop on models the byte model calls too small
    return VegasConfig(num_draft_tokens=4, min_tokens=16, sparse_ratio=0.1, selector=selector, **kw)


def _vegas(lm, ids, cfg=None, **kw):
    from hf_ext import vegas_generate

    kw = {"max_new_tokens": 24, "do_sample": False, "return_dict_in_generate": True, **kw}
    return lm.generate(ids, custom_generate=vegas_generate, vegas_config=cfg or _cfg(), **kw)


@pytest.mark.parametrize(
    "arch",
    ["llama", pytest.param("gemma3", marks=pytest.mark.slow), pytest.param("qwen2", marks=pytest.mark.slow)],
)
def test_every_selector_is_token_identical_to_greedy(arch):
    from hf_ext import VegasGenerateOutput

    lm, ids = _model(arch), _prompt()
    ref = lm.generate(ids, max_new_tokens=24, do_sample=False)
    for sel in SELECTORS:
        out = _vegas(lm, ids, _cfg(sel))
        assert isinstance(out, VegasGenerateOutput)
        assert torch.equal(out.sequences, ref), (arch, sel)
        assert out.vegas_stats.acceptance_rate == 1.0 if sel == "full" else out.vegas_stats.iterations > 0
    assert lm.config._attn_implementation == "sdpa"


@pytest.mark.parametrize("arch", ["llama", pytest.param("gemma3", marks=pytest.mark.slow)])
@pytest.mark.parametrize("selector", ["vegas", "quest"])
def test_batch_rows_equal_the_same_prompts_decoded_alone(arch, selector):
    # float64: batched and single-row kernels reduce in different orders, and a float32 near-tie in a
    # random tiny model can flip one greedy token between them (the order is not Vegas's to fix)
    lm = _model(arch).double()
    ids = torch.cat([_prompt(seed=s) for s in range(3)])
    out = _vegas(lm, ids, _cfg(selector))
    assert torch.equal(out.sequences, lm.generate(ids, max_new_tokens=24, do_sample=False))
    alone = [_vegas(lm, ids[i : i + 1], _cfg(selector)) for i in range(3)]
    for i, a in enumerate(alone):  # a row that stopped at EOS is padded in the batch, as generate pads it
        m = a.sequences.shape[1]
        assert torch.equal(out.sequences[i, :m], a.sequences[0])
        assert bool((out.sequences[i, m:] == lm.generation_config.pad_token_id).all())
    s = out.vegas_stats  # rows were ragged (different lengths in one iteration); counters sum over rows
    assert len({t[0] for t in s.trace}) > len(s.trace) // 3
    assert s.emitted == sum(a.vegas_stats.emitted for a in alone)


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_the_batched_greedy_path_decides_as_the_per_row_path(arch):
    # without a logits processor a forward's rows are picked and accepted with one batched argmax; a processor
    # that changes nothing forces the per-row path, which must give the same tokens and counters (ragged rows:
    # an EOS inside a draft, rows finishing at different iterations, the max_length cut)
    from transformers import LogitsProcessor, LogitsProcessorList

    class Unchanged(LogitsProcessor):
        def __call__(self, input_ids, scores):
            return scores

    lm = _model(arch).double()
    ids = torch.cat([_prompt(seed=s) for s in range(3)])
    eos = int(lm.generate(ids[:1], max_new_tokens=24, do_sample=False)[0, 150 + 9])
    fast = _vegas(lm, ids, eos_token_id=eos)
    slow = _vegas(lm, ids, eos_token_id=eos, logits_processor=LogitsProcessorList([Unchanged()]))
    assert torch.equal(fast.sequences, slow.sequences)
    assert torch.equal(fast.sequences, lm.generate(ids, max_new_tokens=24, do_sample=False, eos_token_id=eos))
    a, b = fast.vegas_stats, slow.vegas_stats
    counters = ("iterations", "drafted", "accepted", "emitted", "trace")
    assert [getattr(a, c) for c in counters] == [getattr(b, c) for c in counters]
    assert 0 < a.acceptance_rate < 1


def test_a_finished_row_leaves_the_batch(monkeypatch, caplog):
    import hf_ext.vegas.attention as attention

    calls = []
    real = attention.chunk_attention

    def spy(query, key, value, lengths, **kw):
        calls.append((query.shape[2], lengths.tolist()))
        return real(query, key, value, lengths, **kw)

    monkeypatch.setattr(attention, "chunk_attention", spy)
    lm = _model("llama").double()
    ids = torch.cat([_prompt(seed=s) for s in range(3)])
    out = _vegas(lm, ids, _cfg())
    assert torch.equal(out.sequences, lm.generate(ids, max_new_tokens=24, do_sample=False))
    s = out.vegas_stats
    retired = 3 * s.iterations - s.row_iterations  # verify passes over rows that had already finished
    assert retired > 0
    # a finished row's verify reads only the first q slots (its output is discarded), a live row all of them
    assert sum(n == q for q, lengths in calls for n in lengths) == lm.config.num_hidden_layers * retired
    assert all(n > 150 or n == q for q, lengths in calls for n in lengths)
    assert s.kv_entries_verify == sum(sum(lengths) for _, lengths in calls)
    assert "reads the whole cache" not in caplog.text  # a finished row's one-slot budget is not a warning


def test_dynamic_cache_path_is_token_identical():
    lm, ids = _model("llama"), _prompt()
    ref = lm.generate(ids, max_new_tokens=24, do_sample=False)
    out = _vegas(lm, ids, _cfg(cache="dynamic"))
    assert torch.equal(out.sequences, ref)
    assert type(out.cache).__name__ == "DynamicCache"
    assert out.vegas_stats.accepted == _vegas(lm, ids).vegas_stats.accepted


def test_some_drafts_are_rejected_so_the_rollback_is_exercised():
    out = _vegas(_model("llama"), _prompt(), min_new_tokens=24)
    stats = out.vegas_stats
    assert out.sequences.shape[1] == 174  # max_new_tokens is exact
    assert 0.0 < stats.acceptance_rate < 1.0
    assert stats.emitted == 23 and 1.0 <= stats.mean_accepted_length <= 5.0


def test_kv_counters_match_the_closed_form():
    lm = _model("llama")
    stats = _vegas(lm, _prompt()).vegas_stats
    layers = lm.config.num_hidden_layers
    draft = sum(sum(k + n - v + j for j in range(1, g + 1)) for n, v, k, g, _ in stats.trace)
    verify = sum(n + g + 1 for n, _, _, g, _ in stats.trace)
    assert stats.kv_entries_draft == layers * draft
    assert stats.kv_entries_verify == layers * verify
    assert stats.selection_entries == 0
    assert stats.kv_entries_read_per_token == pytest.approx(layers * (draft + verify) / stats.emitted)


@pytest.mark.parametrize("cache", ["in_place", "dynamic"])
def test_cost_counters_match_the_closed_form(cache):

    lm = _model("llama")
    stats = _vegas(lm, _prompt(), _cfg(cache=cache)).vegas_stats
    layers, heads = lm.config.num_hidden_layers, lm.config.num_attention_heads
    draft = sum(sum(k + n - v + j for j in range(1, g + 1)) for n, v, k, g, _ in stats.trace)
    verify = sum((g + 1) * (n + g + 1) for n, _, _, g, _ in stats.trace)
    seen = [n + 1 + g for n, _, _, g, _ in stats.trace]  # the first score row sees n + 1, the last n + 1 + g
    rows = [2 if g else 1 for *_, g, _ in stats.trace]
    if cache == "in_place":  # the verify's chunk_attention returns the score rows: no second read of the keys
        assert stats.score_key_reads == 0
        assert stats.query_key_pairs == layers * heads * (draft + verify)
    else:
        assert stats.score_key_reads == layers * sum(seen)
        assert stats.query_key_pairs == layers * heads * (
            draft + verify + sum(r * s for r, s in zip(rows, seen))
        )


def test_other_selectors_never_score_and_sparse_drafts_read_less_than_the_oracle():
    stats = {sel: _vegas(_model("llama"), _prompt(), _cfg(sel)).vegas_stats for sel in SELECTORS[1:]}
    assert all(s.score_key_reads == 0 and s.query_key_pairs > 0 for s in stats.values())
    per_draft = {sel: s.kv_entries_draft / s.draft_forwards for sel, s in stats.items()}
    assert 0 < per_draft["quest"] < per_draft["full"] and 0 < per_draft["streamingllm"] < per_draft["full"]


def test_quest_counts_selection_reads():
    stats = _vegas(_model("llama"), _prompt(), _cfg("quest")).vegas_stats
    assert stats.selection_entries > 0


def test_eos_inside_a_draft_truncates_like_greedy():
    lm, ids = _model("llama"), _prompt()
    free = lm.generate(ids, max_new_tokens=24, do_sample=False)
    eos = int(free[0, 150 + 12])  # a token greedy emits mid-run
    ref = lm.generate(ids, max_new_tokens=24, do_sample=False, eos_token_id=[eos, 63])
    out = _vegas(lm, ids, eos_token_id=[eos, 63])
    assert torch.equal(out.sequences, ref) and out.sequences.shape[1] < 174


@pytest.mark.slow
def test_generation_config_max_length_and_min_new_tokens():
    lm, ids = _model("gemma3"), _prompt()
    ref = lm.generate(ids, max_length=167, do_sample=False)
    assert torch.equal(_vegas(lm, ids, max_new_tokens=None, max_length=167).sequences, ref)
    eos = int(ref[0, 152])
    ref = lm.generate(ids, max_new_tokens=20, min_new_tokens=10, eos_token_id=eos, do_sample=False)
    out = _vegas(lm, ids, max_new_tokens=20, min_new_tokens=10, eos_token_id=eos)
    assert torch.equal(out.sequences, ref)


def test_plain_tensor_output_scores_and_explicit_all_ones_mask():
    lm, ids = _model("llama"), _prompt(100)
    ref = lm.generate(
        ids, max_new_tokens=10, do_sample=False, output_scores=True, return_dict_in_generate=True
    )
    seq = _vegas(
        lm, ids, max_new_tokens=10, attention_mask=torch.ones_like(ids), return_dict_in_generate=False
    )
    assert torch.equal(seq, ref.sequences)
    out = _vegas(lm, ids, max_new_tokens=10, output_scores=True)
    assert len(out.scores) == len(ref.scores) == ref.sequences.shape[1] - 100
    torch.testing.assert_close(torch.stack(out.scores), torch.stack(ref.scores), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_prefilled_cache_is_reused(arch):
    from transformers import DynamicCache

    lm, ids = _model(arch), _prompt()

    def prefilled():
        cache = DynamicCache(config=lm.config)
        with torch.no_grad():
            lm(ids[:, :-1], cache=cache)
        return cache

    ref = lm.generate(ids, max_new_tokens=20, do_sample=False)
    out = _vegas(lm, ids, cache=prefilled(), max_new_tokens=20)
    assert torch.equal(out.sequences, ref)
    # the last prompt token's prefill on the in-place cache runs chunk_attention and selects from its score
    # row; the dynamic path scores with SDPA and a second pass: the same selections, so the same acceptance
    dynamic = _vegas(lm, ids, _cfg(cache="dynamic"), cache=prefilled(), max_new_tokens=20)
    assert out.vegas_stats.trace == dynamic.vegas_stats.trace


def test_pass_through_attention_equals_sdpa():
    from hf_ext.vegas.attention import register_vegas_attention

    lm, ids = _model("gemma3"), _prompt()
    ref = lm.generate(ids, max_new_tokens=15, do_sample=False)
    lm.set_attn_implementation(register_vegas_attention())
    try:
        assert torch.equal(lm.generate(ids, max_new_tokens=15, do_sample=False), ref)
    finally:
        lm.set_attn_implementation("sdpa")


def test_attention_implementation_restored_after_an_exception():
    from transformers import LogitsProcessor, LogitsProcessorList

    class Boom(LogitsProcessor):
        calls = 0

        def __call__(self, input_ids, scores):
            Boom.calls += 1
            if Boom.calls > 3:
                raise RuntimeError("boom")
            return scores

    lm = _model("llama")
    with pytest.raises(RuntimeError, match="boom"):
        _vegas(lm, _prompt(), logits_processor=LogitsProcessorList([Boom()]))
    assert lm.config._attn_implementation == "sdpa"


def test_bad_inputs():
    from transformers import T5Config, T5ForConditionalGeneration

    lm, ids = _model("llama"), _prompt(50)
    with pytest.raises(TypeError, match="`vegas_config` must be a VegasConfig"):
        _vegas(lm, ids, {"selector": "vegas"})
    with pytest.raises(NotImplementedError, match="one sequence at a time"):
        _vegas(lm, ids.repeat(2, 1), _cfg(cache="dynamic"))
    with pytest.raises(ValueError, match="`num_beams` must be 1"):
        _vegas(lm, ids, num_beams=2)
    with pytest.raises(ValueError, match="StaticCache"):
        _vegas(lm, ids, cache_implementation="static")
    with pytest.raises(TypeError, match="LongTensor"):
        from hf_ext import vegas_generate

        vegas_generate(lm, ids.float(), None, None, lm.generation_config, cache=None)
    attn = lm.model.layers[1].self_attn
    attn.layer_idx = None
    try:
        with pytest.raises(TypeError, match="`layer_idx`"):
            _vegas(lm, ids)
    finally:
        attn.layer_idx = 1
    t5 = T5ForConditionalGeneration(
        T5Config(
            vocab_size=32, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2, decoder_start_token_id=0
        )
    ).eval()
    with pytest.raises(NotImplementedError, match="encoder-decoder"):
        _vegas(t5, torch.tensor([[3, 4, 5]]))
