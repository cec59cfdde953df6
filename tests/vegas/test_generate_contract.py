"""The ``generate`` contract of ``vegas_generate`` against plain greedy ``generate`` on tiny Llama, Qwen2 and
Gemma-3: left-padded ragged batches, streamers, stopping criteria, stop strings, EOS lists and lengths."""

from __future__ import annotations

import threading

import pytest
import torch

from hf_ext.testing import requires, tiny_gemma3, tiny_llama, tiny_qwen2

pytestmark = requires("transformers")

ARCH = dict(
    hidden_size=32,
    intermediate_size=64,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
)
# with the 4 specials: the 64-token vocabulary; StopStringCriteria tokenizes "abcdef" to clean the vocab
WORDS = ["abcdef", *[f"w{i}x" for i in range(1, 60)]]


def _model(arch: str):
    # float64: a batched forward and a decode step reduce in different orders, and a float32 near-tie in a
    # random tiny model can flip one greedy token between two exact decoders
    if arch == "gemma3":  # 5 sliding layers (window 16) + 1 global layer
        return tiny_gemma3(num_hidden_layers=6, head_dim=8, **ARCH).double()
    return {"llama": tiny_llama, "qwen2": tiny_qwen2}[arch](**ARCH).double()


def _padded(lengths: list[int], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded ``input_ids`` and ``attention_mask`` ``[B, max(lengths)]`` (pad id 0)."""
    width, g = max(lengths), torch.Generator().manual_seed(seed)
    ids = torch.zeros(len(lengths), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        ids[row, width - n :] = torch.randint(4, 64, (n,), generator=g)
        mask[row, width - n :] = 1
    return ids, mask


def _cfg(**kw):
    from hf_ext import VegasConfig

    # the contract of the draft loop (tiny models would fall back)
    kw = {"num_draft_tokens": 4, "min_tokens": 16, "sparse_ratio": 0.1, "fallback": False, **kw}
    return VegasConfig(**kw)


def _vegas(lm, ids, **kw):
    from hf_ext import vegas_generate

    kw = {"max_new_tokens": 24, "do_sample": False, "return_dict_in_generate": True, **kw}
    return lm.generate(ids, custom_generate=vegas_generate, vegas_config=kw.pop("vegas_config", _cfg()), **kw)


@pytest.mark.parametrize(
    "arch",
    ["llama", pytest.param("qwen2", marks=pytest.mark.slow), pytest.param("gemma3", marks=pytest.mark.slow)],
)
def test_left_padded_ragged_batch_equals_plain_generate(arch):
    lm = _model(arch)
    ids, mask = _padded([150, 97, 40])
    ref = lm.generate(ids, attention_mask=mask, max_new_tokens=24, do_sample=False)
    out = _vegas(lm, ids, attention_mask=mask)
    assert torch.equal(out.sequences, ref)
    s = out.vegas_stats
    assert s.drafted > 0 and s.acceptance_rate > 0
    # each row decodes from its own length: the first iteration's cache lengths are the real prompt lengths
    assert [t[0] for t in s.trace[:3]] == [150, 97, 40]


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_short_ragged_prompts_prefill_through_the_chunk_kernel(arch):
    # at most 64 query vectors per KV head: the prefill's global layers run chunk_attention, whose score row
    # per batch row is that row's last real prompt token
    lm, (ids, mask) = _model(arch), _padded([20, 12, 17], seed=9)
    ref = lm.generate(ids, attention_mask=mask, max_new_tokens=16, do_sample=False)
    out = _vegas(lm, ids, attention_mask=mask, max_new_tokens=16, vegas_config=_cfg(min_tokens=4))
    assert torch.equal(out.sequences, ref)
    assert [t[:2] for t in out.vegas_stats.trace[:3]] == [(20, 20), (12, 12), (17, 17)]


def test_a_padded_batch_of_one_and_equal_padding_equal_the_unpadded_run():
    lm = _model("llama")
    ids, mask = _padded([60, 60])
    pad = torch.zeros(2, 7, dtype=torch.long)
    padded, padded_mask = torch.cat([pad, ids], 1), torch.cat([pad, mask], 1)
    ref = lm.generate(padded, attention_mask=padded_mask, max_new_tokens=16, do_sample=False)
    out = _vegas(lm, padded, attention_mask=padded_mask, max_new_tokens=16)
    assert torch.equal(out.sequences, ref)
    assert torch.equal(out.sequences[:, 7:], _vegas(lm, ids, max_new_tokens=16).sequences)
    first, first_mask = padded[:1], padded_mask[:1]
    one = _vegas(lm, first, attention_mask=first_mask, vegas_config=_cfg(cache="dynamic"))
    assert torch.equal(one.sequences, lm.generate(first, attention_mask=first_mask, max_new_tokens=24))


def test_eos_lists_and_max_length_on_a_padded_batch():
    lm = _model("llama")
    ids, mask = _padded([120, 80, 30], seed=1)
    free = lm.generate(ids, attention_mask=mask, max_new_tokens=24, do_sample=False)
    eos = [int(free[0, 120 + 9]), int(free[2, 120 + 14])]  # tokens greedy emits mid-run in two rows
    ref = lm.generate(ids, attention_mask=mask, max_length=140, eos_token_id=eos, do_sample=False)
    out = _vegas(lm, ids, attention_mask=mask, max_new_tokens=None, max_length=140, eos_token_id=eos)
    assert torch.equal(out.sequences, ref)
    assert bool((ref == lm.generation_config.pad_token_id)[:, 121:].any())  # some row stopped early


def _criterion(token: int):
    from transformers import StoppingCriteria

    class StopAfterToken(StoppingCriteria):
        """Stops a row once ``token`` is its last token (a user criterion, not an EOS one)."""

        def __call__(self, input_ids, scores, **kwargs):
            return input_ids[:, -1] == token

    return StopAfterToken()


def test_a_user_stopping_criterion_fires_inside_an_accepted_chunk():
    from transformers import StoppingCriteriaList

    lm, (ids, mask) = _model("llama"), _padded([90, 70], seed=2)
    tail = lm.generate(ids, attention_mask=mask, max_new_tokens=24, do_sample=False)[0, 90:].tolist()
    at = next(i for i in range(8, 24) if tail[i] not in tail[:i])  # row 0 first emits this token at `at`
    stop = StoppingCriteriaList([_criterion(tail[at])])
    ref = lm.generate(ids, attention_mask=mask, max_new_tokens=24, do_sample=False, stopping_criteria=stop)
    out = _vegas(lm, ids, attention_mask=mask, stopping_criteria=stop)
    assert torch.equal(out.sequences, ref)
    one = _vegas(lm, ids[:1], stopping_criteria=stop)
    assert torch.equal(one.sequences, ref[:1, : 90 + at + 1])
    assert max(t[4] for t in one.vegas_stats.trace) > 1  # chunks of several tokens were accepted


@pytest.mark.slow
def test_a_user_length_criterion_on_gemma3_stops_every_row_mid_chunk():
    from transformers import StoppingCriteria, StoppingCriteriaList

    class StopAtLength(StoppingCriteria):
        """Stops every row once the (padded) sequence holds ``n`` tokens."""

        def __init__(self, n):
            self.n = n

        def __call__(self, input_ids, scores, **kwargs):
            return torch.full((input_ids.shape[0],), input_ids.shape[-1] >= self.n, dtype=torch.bool)

    lm, (ids, mask) = _model("gemma3"), _padded([90, 70], seed=2)
    stop = StoppingCriteriaList([StopAtLength(90 + 11)])
    ref = lm.generate(ids, attention_mask=mask, max_new_tokens=24, do_sample=False, stopping_criteria=stop)
    out = _vegas(lm, ids, attention_mask=mask, stopping_criteria=stop)
    assert ref.shape[1] == 101
    assert torch.equal(out.sequences, ref)


def test_rows_that_stop_without_an_eos_criterion_go_on_decoding_as_in_transformers():
    from transformers import StoppingCriteriaList

    lm, (ids, mask) = _model("llama"), _padded([90, 70], seed=2)
    lm.generation_config.eos_token_id = None  # no EOS criterion: a stopped row is not padded
    free = lm.generate(ids, attention_mask=mask, max_new_tokens=24, do_sample=False)
    stop = StoppingCriteriaList([_criterion(int(free[1, 90 + 5]))])
    ref = lm.generate(ids, attention_mask=mask, max_new_tokens=24, do_sample=False, stopping_criteria=stop)
    assert ref.shape[1] < 90 + 24
    out = _vegas(lm, ids, attention_mask=mask, stopping_criteria=stop)
    assert torch.equal(out.sequences, ref)


def test_stop_strings_with_a_tokenizer():
    from transformers import StoppingCriteriaList, StopStringCriteria

    from hf_ext.testing.tokenizers import word_tokenizer

    tok, lm = word_tokenizer(WORDS), _model("qwen2")
    ids, _ = _padded([80], seed=3)
    tail = lm.generate(ids, max_new_tokens=24, do_sample=False)[0, 80:].tolist()
    at = next(i for i in range(4, 24) if tail[i] not in tail[:i])
    stop = tok.convert_ids_to_tokens(tail[at])
    ref = lm.generate(ids, max_new_tokens=24, do_sample=False, stop_strings=stop, tokenizer=tok)
    assert ref.shape[1] == 80 + at + 1
    # transformers drops `tokenizer` on its way to a callable custom_generate and then refuses `stop_strings`;
    # the same criterion passed as a stopping criterion is honoured
    with pytest.raises(ValueError, match="could not locate a tokenizer"):
        _vegas(lm, ids, stop_strings=stop, tokenizer=tok)
    criteria = StoppingCriteriaList([StopStringCriteria(tok, [stop])])
    assert torch.equal(_vegas(lm, ids, stopping_criteria=criteria).sequences, ref)


def test_text_iterator_streamer_ends_and_streams_the_output():
    from transformers import TextIteratorStreamer

    from hf_ext.testing.tokenizers import word_tokenizer

    tok, lm = word_tokenizer(WORDS), _model("llama")
    ids, _ = _padded([60], seed=4)
    streamer = TextIteratorStreamer(tok, skip_prompt=True, timeout=60, skip_special_tokens=True)
    result = {}
    worker = threading.Thread(target=lambda: result.update(out=_vegas(lm, ids, streamer=streamer)))
    worker.start()
    text = "".join(streamer)  # returns only once the streamer got its end()
    worker.join()
    ref = lm.generate(ids, max_new_tokens=24, do_sample=False)
    assert torch.equal(result["out"].sequences, ref)
    assert text.split() == tok.decode(ref[0, 60:], skip_special_tokens=True).split()


def test_a_streamer_gets_its_end_on_early_stop_and_on_an_error():
    from transformers.generation.streamers import BaseStreamer

    class Recorder(BaseStreamer):
        def __init__(self):
            self.chunks, self.ended = [], 0

        def put(self, value):
            self.chunks.append(value.reshape(-1).tolist())

        def end(self):
            self.ended += 1

    lm, (ids, _) = _model("llama"), _padded([50], seed=5)
    free = lm.generate(ids, max_new_tokens=24, do_sample=False)
    eos = int(free[0, 50 + 8])
    rec = Recorder()
    out = _vegas(lm, ids, streamer=rec, eos_token_id=eos)
    assert torch.equal(out.sequences, lm.generate(ids, max_new_tokens=24, do_sample=False, eos_token_id=eos))
    assert rec.ended == 1 and sum(rec.chunks, []) == out.sequences[0].tolist()  # prompt, then each token
    rec = Recorder()
    with pytest.raises(NotImplementedError, match="batch size 1"):
        _vegas(lm, ids.repeat(2, 1), streamer=rec)
    assert rec.ended == 1


def test_return_dict_and_plain_tensor_outputs_on_a_padded_batch():
    from hf_ext import VegasGenerateOutput

    lm, (ids, mask) = _model("llama"), _padded([40, 33])
    ref = lm.generate(
        ids, attention_mask=mask, max_new_tokens=8, do_sample=False, output_scores=True,
        return_dict_in_generate=True,
    )  # fmt: skip
    out = _vegas(lm, ids, attention_mask=mask, max_new_tokens=8, output_scores=True)
    assert isinstance(out, VegasGenerateOutput) and torch.equal(out.sequences, ref.sequences)
    torch.testing.assert_close(torch.stack(out.scores), torch.stack(ref.scores), atol=1e-8, rtol=1e-8)
    seq = _vegas(lm, ids, attention_mask=mask, max_new_tokens=8, return_dict_in_generate=False)
    assert torch.equal(seq, ref.sequences)


def test_bad_attention_masks_name_the_argument_and_the_row():
    lm, (ids, mask) = _model("llama"), _padded([30, 20])
    right = mask.flip(-1)
    with pytest.raises(ValueError, match=r"`attention_mask` must pad on the left .* row 1 is \[1, 1"):
        _vegas(lm, ids, attention_mask=right)
    empty = mask.clone()
    empty[1] = 0
    with pytest.raises(ValueError, match="`attention_mask` must pad on the left .* row 1"):
        _vegas(lm, ids, attention_mask=empty)
    from hf_ext.vegas.generate import left_padding

    with pytest.raises(ValueError, match=r"`attention_mask` must have the shape of `input_ids` \(2, 30\)"):
        left_padding(ids, mask[:, :5])


def test_the_byte_model_hand_computed():
    from hf_ext.vegas.core import expected_accepted_length, predicted_speedup

    assert expected_accepted_length(0.5, 2) == 1.75 and expected_accepted_length(1.0, 6) == 7.0
    # one global layer, weights 100 bytes, 10 bytes per position, context 50, batch 2, gamma 2, budget 10:
    # plain 100 + 2*10*51 = 1120 (the new token's own position too); draft 100 + 2*10*(10 + 1.5) = 330;
    # verify 100 + 2*10*53 = 1160
    ratio = predicted_speedup(
        weight_bytes=100, entry_bytes=10, windows=[None], context=50, batch=2, gamma=2, budget_k=10,
        acceptance=0.5,
    )  # fmt: skip
    assert ratio == pytest.approx(1120 * 1.75 / (2 * 330 + 1160))
    # a sliding layer reads its window in every forward (and the verify's extra rows): no saving there
    slid = predicted_speedup(
        weight_bytes=0, entry_bytes=1, windows=[8], context=50, batch=1, gamma=2, budget_k=10, acceptance=1.0
    )
    assert slid == pytest.approx(8 * 3 / (2 * 8 + 10))


def test_fallback_decodes_plainly_where_the_byte_model_predicts_a_loss():
    from hf_ext import VegasConfig
    from hf_ext.testing import tiny_llama

    lm = tiny_llama(**ARCH)  # batch 1, short prompt: the weights dominate each forward
    ids, _ = _padded([60], seed=6)
    ref = lm.generate(ids, max_new_tokens=12, do_sample=False)
    cfg = VegasConfig(num_draft_tokens=4, min_tokens=16, sparse_ratio=0.1)
    out = _vegas(lm, ids, vegas_config=cfg, max_new_tokens=12)
    s = out.vegas_stats
    assert torch.equal(out.sequences, ref)
    assert s.decision == "plain" and s.predicted_speedup < 1.0 and s.iterations == s.drafted == 0
    assert torch.equal(
        _vegas(lm, ids, vegas_config=cfg, max_new_tokens=12, return_dict_in_generate=False), ref
    )
    # batch 4 at 300 positions: the cache dominates, Vegas is predicted to win and drafts
    ids, mask = _padded([300, 280, 300, 260], seed=7)
    out = _vegas(lm, ids, vegas_config=cfg, attention_mask=mask, max_new_tokens=8)
    s = out.vegas_stats
    assert s.decision == "vegas" and s.predicted_speedup > 1.0 and s.drafted > 0
    assert torch.equal(
        out.sequences, lm.generate(ids, attention_mask=mask, max_new_tokens=8, do_sample=False)
    )
    off = _vegas(lm, ids[:1, -60:], max_new_tokens=4).vegas_stats  # fallback=False: no prediction
    assert off.decision == "vegas" and off.predicted_speedup is None


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_fallback_on_a_prefilled_in_place_cache_decodes_on_the_hosts_cache(arch):
    from transformers import DynamicCache

    from hf_ext import VegasConfig
    from hf_ext.vegas.cache import InPlaceCache

    lm = _model(arch)
    ids, _ = _padded([40, 40], seed=12)  # 40 positions: past gemma3's 16-token window
    cache = InPlaceCache(lm.config, 2, 80, dtype=torch.float64)
    with torch.no_grad():
        lm(input_ids=ids[:, :-1], cache=cache, use_cache=True)
    copied = cache.to_dynamic(lm.config)
    assert isinstance(copied, DynamicCache) and copied.get_seq_length() == 39
    cfg = VegasConfig(num_draft_tokens=4, min_tokens=16, sparse_ratio=0.1)
    out = _vegas(lm, ids, cache=cache, vegas_config=cfg, max_new_tokens=8)
    assert out.vegas_stats.decision == "plain"
    assert torch.equal(out.sequences, lm.generate(ids, max_new_tokens=8, do_sample=False))
    cache.set_lengths([39, 30])
    with pytest.raises(ValueError, match=r"lengths are \[39, 30\]"):
        cache.to_dynamic(lm.config)


def test_fallback_with_the_combined_draft_keeps_prompt_lookup_and_drops_sparse_drafts():
    from hf_ext import VegasConfig
    from hf_ext.testing import tiny_llama

    lm = tiny_llama(**ARCH)  # batch 1, short prompt: sparse drafts are predicted to lose
    ids, _ = _padded([40], seed=6)
    ids = torch.cat([ids, ids], 1)  # the prompt repeats: lookup has matches
    ref = lm.generate(ids, max_new_tokens=12, do_sample=False)
    cfg = VegasConfig(num_draft_tokens=4, min_tokens=16, sparse_ratio=0.1, lookup_ngram=2)
    out = _vegas(lm, ids, vegas_config=cfg, max_new_tokens=12)
    s = out.vegas_stats
    assert torch.equal(out.sequences, ref)
    assert s.decision == "lookup" and s.predicted_speedup < 1.0
    assert s.draft_forwards == 0 and s.lookup_drafts > 0 and s.drafted > 0  # every draft token was copied


def test_fallback_ends_the_streamer_once():
    from transformers import TextIteratorStreamer

    from hf_ext import VegasConfig
    from hf_ext.testing.tokenizers import word_tokenizer

    tok, lm = word_tokenizer(WORDS), _model("llama")
    ids, _ = _padded([40], seed=8)
    streamer = TextIteratorStreamer(tok, skip_prompt=True, timeout=60, skip_special_tokens=True)
    result = {}
    cfg = VegasConfig(num_draft_tokens=4, min_tokens=16, sparse_ratio=0.1)
    worker = threading.Thread(
        target=lambda: result.update(out=_vegas(lm, ids, vegas_config=cfg, streamer=streamer))
    )
    worker.start()
    text = "".join(streamer)
    worker.join()
    assert result["out"].vegas_stats.decision == "plain"
    assert streamer.text_queue.empty()  # one end: no second stop signal left behind
    assert text.split() == tok.decode(result["out"].sequences[0, 40:], skip_special_tokens=True).split()


def test_fallback_settings_are_validated():
    from hf_ext import VegasConfig

    with pytest.raises(TypeError, match="`fallback` must be a bool, got 'yes'"):
        VegasConfig(fallback="yes")
    with pytest.raises(ValueError, match="`fallback_acceptance` must be .*got 1.5"):
        VegasConfig(fallback_acceptance=1.5)


def test_lookup_draft_hand_computed():
    from hf_ext.vegas.core import lookup_draft

    assert lookup_draft([1, 2, 3, 4, 1, 2], max_ngram=2, count=5) == [3, 4, 1, 2]
    assert lookup_draft([1, 2, 3, 9, 2, 3], max_ngram=3, count=1) == [
        9
    ]  # the trigram misses, the bigram hits
    assert lookup_draft([4, 7, 5, 7, 6, 7], max_ngram=1, count=2) == [6, 7]  # the latest occurrence
    assert lookup_draft([1, 2, 3], max_ngram=2, count=4) == []


@pytest.mark.parametrize("arch", ["llama", pytest.param("gemma3", marks=pytest.mark.slow)])
def test_combined_draft_is_lossless_and_copies_where_the_text_repeats(arch):
    lm = _model(arch)
    ids, mask = _padded([70, 50], seed=10)
    ids = torch.cat([ids, ids[:, -50:]], 1)  # each row then repeats its last 50 tokens: lookup has matches
    mask = torch.cat([mask, mask[:, -50:]], 1)
    ref = lm.generate(ids, attention_mask=mask, max_new_tokens=24, do_sample=False)
    out = _vegas(lm, ids, attention_mask=mask, vegas_config=_cfg(lookup_ngram=3))
    assert torch.equal(out.sequences, ref)
    s = out.vegas_stats
    assert s.lookup_drafts > 0 and s.drafted > 0
    alone = _vegas(lm, ids, attention_mask=mask).vegas_stats
    assert alone.lookup_drafts == 0


def test_combined_draft_under_sampling_runs_the_rejection_rule():
    lm, (ids, _) = _model("llama"), _padded([40], seed=11)
    ids = torch.cat([ids, ids], 1)
    torch.manual_seed(0)
    out = _vegas(lm, ids, vegas_config=_cfg(lookup_ngram=2), do_sample=True, max_new_tokens=12)
    s = out.vegas_stats
    assert out.sequences.shape[1] <= 92 and s.lookup_drafts > 0 and 0 <= s.accepted <= s.drafted
    with pytest.raises(ValueError, match="`lookup_ngram` must be"):
        _cfg(lookup_ngram=-1)
