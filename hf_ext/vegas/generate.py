"""``vegas_generate``: Vegas self-speculative decoding as a transformers ``custom_generate`` callable.

Each iteration drafts up to gamma tokens with the model itself, its global layers attending only to the
selection made at the previous verify and the entries after it (read in place), rolls back the draft's KV,
then verifies ``[b, y_1..y_gamma_t]`` in one forward with exact attention over the full cache (SDPA, or on an
``InPlaceCache`` the ``chunk_attention`` kernel), so the accepted tokens are the model's own: greedy output is
token-identical to ``generate(do_sample=False)``, and sampling uses the speculative rejection rule
(arXiv 2211.17192) so the output distribution is the model's.

The default cache is an :class:`~hf_ext.vegas.cache.InPlaceCache`: K/V preallocated once, rollback
by moving each row's length, and batches whose rows accept different numbers of tokens (each row keeps its
own length; the attention masks the stale slots of shorter rows, as vLLM's slot rollback does). A row that
has finished stays in the batch tensors until the last one does, but its verify reads only its chunk's first
slots and its drafts their own entries, so it costs no cache reads (vLLM removes finished sequences from its
batch).
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer
from transformers.generation.stopping_criteria import MaxLengthCriteria
from transformers.generation.utils import GenerateDecoderOnlyOutput

from hf_ext._registry import paper
from hf_ext._timing import Timer
from hf_ext.vegas.attention import VegasState, attention_implementation, register_vegas_attention
from hf_ext.vegas.cache import InPlaceCache
from hf_ext.vegas.config import VegasConfig
from hf_ext.vegas.core import budget, greedy_accept, lookup_draft, predicted_speedup, speculative_accept

logger = logging.getLogger(__name__)

_OWN_KWARGS = ("cache", "attention_mask", "position_ids", "use_cache", "logits_to_keep")


@dataclass
class VegasStats:
    """Counters of one ``vegas_generate`` call (decode only; the prefill forward is excluded).

    Sums run over the rows of a batch: a forward of ``B`` rows counts one forward and ``B`` row-iterations.

    Attributes:
        iterations: Verify passes (forwards).
        row_iterations: Verify passes summed over the rows still decoding.
        draft_forwards: Draft forwards.
        drafted: Sum of draft lengths gamma_t over rows.
        accepted: Sum of accepted draft tokens n_acc over rows.
        emitted: Tokens emitted by the verify passes (accepted + bonus, after EOS/length truncation).
        kv_entries_draft: Cache positions read by draft forwards, summed over layers and rows (per KV head).
        kv_entries_verify: Cache positions read by verify forwards, summed over layers and rows (each once).
        selection_entries: Quest's page min/max metadata reads (0 for the other selectors).
        query_key_pairs: Query-head rows times cache positions multiplied (draft and verify attention, the
            verify's score rows when scored separately, Quest's page bounds), summed over layers and rows: the
            attention's arithmetic, which a verify of ``gamma + 1`` rows multiplies over the same bytes.
        score_key_reads: Cache positions whose keys the verify's scoring pass reads again (Vegas only).
        selection_runs: Contiguous runs of selected positions the drafts read (each run starts with a jump in
            the row's slot list, a scattered read), summed over layers, rows and draft steps.
        draft_seconds: Wall-clock seconds spent in draft forwards (device-synchronised).
        verify_seconds: Wall-clock seconds spent in verify forwards and acceptance.
        trace: Per iteration and row ``(n, valid_len, budget, gamma_t, n_acc)``: cache length at the draft's
            start, selectable length and budget of the selection the draft used, draft length, accepted count.
        lookup_drafts: Row-iterations drafted by prompt lookup (``VegasConfig(lookup_ngram=n)``), not by the
            model; their tokens count in ``drafted`` and ``accepted`` too.
        decision: ``"vegas"`` (drafted and verified); when ``VegasConfig(fallback=True)`` and the cost
            model predicted sparse drafts slower than plain decoding, ``"lookup"`` with the combined draft
            (``lookup_ngram >= 1``: rows draft by prompt lookup only, a row without a match decodes one token
            per verify) or else ``"plain"`` (the host's plain decoding loop ran and every counter above is 0).
        predicted_speedup: The byte model's predicted tokens/s ratio of Vegas over plain decoding for this
            call (:func:`~hf_ext.vegas.core.predicted_speedup`); ``None`` with ``fallback=False``.
    """

    _paper = paper("vegas")

    iterations: int = 0
    row_iterations: int = 0
    draft_forwards: int = 0
    drafted: int = 0
    accepted: int = 0
    emitted: int = 0
    kv_entries_draft: float = 0.0
    kv_entries_verify: float = 0.0
    selection_entries: float = 0.0
    query_key_pairs: float = 0.0
    score_key_reads: float = 0.0
    selection_runs: float = 0.0
    draft_seconds: float = 0.0
    verify_seconds: float = 0.0
    trace: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    lookup_drafts: int = 0
    decision: str = "vegas"
    predicted_speedup: float | None = None

    @property
    def acceptance_rate(self) -> float:
        """alpha = accepted / drafted (1.0 when nothing was drafted)."""
        return self.accepted / self.drafted if self.drafted else 1.0

    @property
    def mean_accepted_length(self) -> float:
        """tau = emitted tokens per row-iteration, bonus included."""
        return self.emitted / self.row_iterations if self.row_iterations else 0.0

    @property
    def forwards(self) -> int:
        """Decode forwards (drafts + verifies); each reads every weight once."""
        return self.draft_forwards + self.iterations

    @property
    def kv_entries(self) -> float:
        """All decode-time cache positions read (draft + verify), summed over layers."""
        return self.kv_entries_draft + self.kv_entries_verify

    @property
    def kv_entries_read_per_token(self) -> float:
        """KV positions read per emitted token, summed over layers."""
        return self.kv_entries / self.emitted if self.emitted else 0.0


@dataclass
class VegasGenerateOutput(GenerateDecoderOnlyOutput):
    """``GenerateDecoderOnlyOutput`` plus ``vegas_stats`` (:class:`VegasStats`)."""

    _paper = paper("vegas")

    vegas_stats: VegasStats | None = None


def _check_inputs(model: Any, input_ids: Any, generation_config: Any, model_kwargs: dict[str, Any]) -> None:
    if getattr(model.config, "is_encoder_decoder", False):
        raise NotImplementedError(
            f"Vegas supports decoder-only causal LMs (Llama, Qwen2, Gemma3, ...), not the encoder-decoder "
            f"{type(model).__name__}."
        )
    if not isinstance(input_ids, torch.Tensor) or input_ids.dtype != torch.long:
        got = input_ids.dtype if isinstance(input_ids, torch.Tensor) else type(input_ids).__name__
        raise TypeError(f"`input_ids` must be a LongTensor (torch.long), got {got}.")
    if generation_config.num_beams > 1:
        raise ValueError(
            f"`num_beams` must be 1 with Vegas (speculative decoding), got {generation_config.num_beams}."
        )
    for m in model.modules():
        if type(m).__name__.endswith("Attention") and not isinstance(getattr(m, "layer_idx", None), int):
            raise TypeError(
                f"Vegas needs attention modules with an int `layer_idx` (the selection is per layer); "
                f"{type(m).__name__} has {getattr(m, 'layer_idx', None)!r}."
            )
    if generation_config.output_attentions or generation_config.output_hidden_states:
        raise NotImplementedError(
            "Vegas does not return attentions or hidden states; unset those output flags."
        )
    cache = model_kwargs.get("cache")
    if isinstance(cache, InPlaceCache):
        return
    if not isinstance(cache, DynamicCache) or any(
        type(layer) not in (DynamicLayer, DynamicSlidingWindowLayer) for layer in cache.layers
    ):
        kinds = sorted({type(layer).__name__ for layer in getattr(cache, "layers", [])})
        raise ValueError(
            f"Vegas needs an InPlaceCache or a croppable DynamicCache of full/sliding attention layers, got "
            f"{type(cache).__name__} (layers: {kinds}). Leave `cache_implementation` unset."
        )


def left_padding(input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> list[int]:
    """Per row, the count of left-padding positions that ``attention_mask`` ``[B, N]`` marks (zeros, then
    ones, as ``generate`` expects a decoder-only batch); all zeros without a mask.

    Raises:
        ValueError: the mask's shape is not ``input_ids``'s, or a row is not left-padded (a zero after a one,
            or no one at all).
    """
    if attention_mask is None:
        return [0] * input_ids.shape[0]
    if tuple(attention_mask.shape) != tuple(input_ids.shape):
        raise ValueError(
            f"`attention_mask` must have the shape of `input_ids` {tuple(input_ids.shape)}, got "
            f"{tuple(attention_mask.shape)}."
        )
    mask = attention_mask.to(torch.long)
    pads = (mask == 0).sum(-1)
    left = torch.arange(mask.shape[1], device=mask.device)[None] >= pads[:, None]
    bad = (mask != left.long()).any(-1) | (pads == mask.shape[1])
    if bool(bad.any()):
        row = int(bad.nonzero()[0, 0])
        raise ValueError(
            f"`attention_mask` must pad on the left (zeros, then at least one one, per row), as decoder-only "
            f"batches are padded for generate; row {row} is {mask[row].tolist()}. Set the tokenizer's "
            "`padding_side='left'`."
        )
    return [int(p) for p in pads]


def predict(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    max_length: int,
    config: VegasConfig,
) -> float:
    """:func:`~hf_ext.vegas.core.predicted_speedup` for one call: the model's weight and cache bytes, the
    longest prompt as the context, the batch, gamma and the budget at that context."""
    text = model.config.get_text_config(decoder=True)
    params = {id(p): p for p in model.parameters()}
    weight = sum(p.numel() * p.element_size() for p in params.values())
    inputs, outputs = model.get_input_embeddings(), model.get_output_embeddings()
    if inputs is not None and (outputs is None or outputs.weight is not inputs.weight):
        weight -= inputs.weight.numel() * inputs.weight.element_size()  # a lookup reads B rows, not the table
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    element = next(iter(params.values())).element_size()
    types = getattr(text, "layer_types", None) or ["full_attention"] * text.num_hidden_layers
    windows = [text.sliding_window if t == "sliding_attention" else None for t in types]
    context = input_ids.shape[1] - min(left_padding(input_ids, attention_mask))
    k = budget(context, context, config.sparse_ratio, config.min_tokens, max_length)
    return predicted_speedup(
        weight_bytes=weight,
        entry_bytes=2 * text.num_key_value_heads * head_dim * element,
        windows=windows,
        context=context,
        batch=input_ids.shape[0],
        gamma=config.num_draft_tokens,
        budget_k=context if config.selector == "full" else k,
        acceptance=config.fallback_acceptance,
    )


def _generate_streamer(frame: Any) -> Any:
    """The ``streamer`` given to the ``generate`` call whose frame is ``frame``, else ``None``.

    transformers 5.25 hands a callable ``custom_generate`` only the extra arguments of its own signature and
    drops ``streamer``, although ``generate`` has already streamed the prompt to it; without this its
    consumer would wait for an ``end()`` that never comes.
    """
    if frame is None or frame.f_code.co_name != "generate":
        return None
    return frame.f_locals.get("streamer")


class _EndOnce:
    """A streamer's proxy that passes ``put`` on and ``end`` once (the host's loop ends it too)."""

    def __init__(self, streamer: Any) -> None:
        self.streamer, self.ended = streamer, False

    def put(self, value: torch.Tensor) -> None:
        self.streamer.put(value)

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            self.streamer.end()


class _Loop:
    """One ``vegas_generate`` call: prefill, then draft / roll back / verify / accept until all rows stop."""

    def __init__(
        self,
        model: Any,
        input_ids: torch.Tensor,
        logits_processor: Any,
        stopping_criteria: Any,
        generation_config: Any,
        streamer: Any,
        config: VegasConfig,
        model_kwargs: dict[str, Any],
        sparse_drafts: bool = True,
    ) -> None:
        self.model = model
        self.processor = logits_processor
        # greedy with no logits processor: the scores are the raw logits, so each forward's rows are picked
        # and accepted with one argmax for the batch instead of per-row tensor calls
        self.raw_greedy = not generation_config.do_sample and not logits_processor
        self.stopping = stopping_criteria
        self.gen = generation_config
        self.streamer = streamer
        self.config = config
        self.cache = self._cache(model_kwargs["cache"], input_ids)
        self.in_place = isinstance(self.cache, InPlaceCache)
        batch = input_ids.shape[0]
        if batch > 1 and not self.in_place:
            raise NotImplementedError(
                f"Vegas on a DynamicCache decodes one sequence at a time; got batch size {batch}. Use the "
                "default VegasConfig(cache='in_place') for batches."
            )
        if batch > 1 and streamer is not None:
            raise NotImplementedError("Streaming supports batch size 1 only, as in transformers.")
        self.pads = left_padding(input_ids, model_kwargs.get("attention_mask"))
        if max(self.pads) and self.cache.get_seq_length() > 0:
            raise NotImplementedError(
                f"Vegas reuses a prefilled cache for unpadded prompts only; got left padding {self.pads} in "
                "`attention_mask`. Pass the prompts without a prefilled cache."
            )
        self.extra = {k: v for k, v in model_kwargs.items() if k not in _OWN_KWARGS}
        self.global_layers = [i for i, layer in enumerate(self.cache.layers) if not layer.is_sliding]
        self.state = VegasState(config, generation_config.max_length, self.global_layers, self.cache)
        self.state.selecting = sparse_drafts
        self.stats = VegasStats(decision="vegas" if sparse_drafts else "lookup")
        eos = generation_config._eos_token_tensor
        self.eos = set() if eos is None else {int(t) for t in eos.flatten()}
        # transformers pads the rows that finished when an EOS criterion is there; without one they go on
        # decoding until every row has stopped
        self.pad_finished = any(hasattr(c, "eos_token_id") for c in stopping_criteria)
        # the verify already cuts at EOS and max_length; any other criterion (stop strings, a user's) may fire
        # inside an accepted chunk, so each of its prefixes is checked, as one-token decoding would
        self.check_prefixes = any(
            not (isinstance(c, MaxLengthCriteria) or hasattr(c, "eos_token_id")) for c in stopping_criteria
        )
        pad = generation_config._pad_token_tensor
        self.pad = int(pad) if pad is not None else (min(self.eos) if self.eos else 0)
        ret = generation_config.return_dict_in_generate
        self.keep_scores = bool(ret and generation_config.output_scores)
        self.keep_logits = bool(ret and generation_config.output_logits)
        self.scores: list[list[torch.Tensor]] = [[] for _ in range(batch)]
        self.raw: list[list[torch.Tensor]] = [[] for _ in range(batch)]

    def _cache(self, cache: Any, input_ids: torch.Tensor) -> Any:
        """The loop's cache: an ``InPlaceCache`` passed in (checked for room), ``generate``'s ``DynamicCache``
        with ``cache="dynamic"`` or when a sliding layer of a prefilled one already dropped entries (it
        cannot be copied), else a new ``InPlaceCache`` (a copy of the prefilled entries, if any)."""
        capacity = self.gen.max_length + self.config.num_draft_tokens + 1
        if isinstance(cache, InPlaceCache):
            if cache.capacity < capacity:
                raise ValueError(
                    f"The InPlaceCache holds {cache.capacity} slots per row; this call needs "
                    f"{capacity} (max_length {self.gen.max_length} + num_draft_tokens + 1)."
                )
            return cache
        if self.config.cache == "dynamic":
            return cache
        if cache.get_seq_length() > 0:
            dropped = any(
                layer.is_sliding and layer.get_seq_length() > layer.keys.shape[2] for layer in cache.layers
            )
            return cache if dropped else InPlaceCache.from_cache(cache, self.model.config, capacity)
        dtype = next(self.model.parameters()).dtype
        return InPlaceCache(
            self.model.config, input_ids.shape[0], capacity, dtype=dtype, device=input_ids.device
        )

    # ------------------------------------------------------------------------------------------ helpers
    def forward(self, ids: torch.Tensor, starts: list[int], cache: Any, mode: str, keep: int) -> torch.Tensor:
        """Logits ``[B, keep, V]`` (fp32) of ``ids`` ``[B, q]`` placed at per-row positions ``starts``."""
        q = ids.shape[1]
        pos = torch.tensor(starts, device=ids.device)[:, None] + torch.arange(q, device=ids.device)
        out = self.model(
            input_ids=ids,
            cache=cache,
            position_ids=pos,
            use_cache=True,
            logits_to_keep=keep,
            vegas_mode=mode,
            vegas_state=self.state,
            return_dict=True,
            **self.extra,
        )
        return cast(torch.Tensor, out.logits[:, -keep:].float())

    def process(self, ids: torch.Tensor, extra: list[int], raw: torch.Tensor) -> torch.Tensor:
        """One row's processed scores ``[V]`` after the prefix ``ids`` ``[t]`` and then the tokens ``extra``.
        The prefix is built only when a logits processor is there to read it (without one the scores are the
        raw logits, as ``LogitsProcessorList`` returns them): copying the whole row for every token would cost
        time that grows with the context."""
        if not self.processor:
            return raw
        prefix = torch.cat([ids, ids.new_tensor(extra)]) if extra else ids
        return cast(torch.Tensor, self.processor(prefix[None], raw[None])[0])

    def pick(self, scores: torch.Tensor) -> int:
        """A token from processed scores ``[V]``: argmax, or a sample when ``do_sample``."""
        if self.gen.do_sample:
            return int(torch.multinomial(torch.softmax(scores, dim=-1), num_samples=1))
        return int(scores.argmax())

    def stopped(self, ids: torch.Tensor) -> bool:
        return bool(self.stopping(ids[None], None).all()) or (bool(self.eos) and int(ids[-1]) in self.eos)

    def stop_at(self, ids: torch.Tensor, emitted: list[int]) -> int | None:
        """How many of ``emitted`` (appended to the row ``ids``) are kept up to the first token at which the
        stopping criteria fire, or ``None`` when they do not."""
        for i in range(1, len(emitted) + 1) if self.check_prefixes else [len(emitted)] if emitted else []:
            if self.stopped(torch.cat([ids, ids.new_tensor(emitted[:i])])):
                return i
        return None

    def lookup(self, rows: list[torch.Tensor], gammas: list[int]) -> list[list[int]]:
        """Per row, up to ``gammas[b]`` prompt-lookup candidates from its own tokens (padding excluded), or
        ``[]`` (no recurring n-gram, or the combined draft is off)."""
        n = self.config.lookup_ngram
        if not n:
            return [[] for _ in rows]
        return [
            lookup_draft(ids[p:].tolist(), n, g) if g else [] for ids, p, g in zip(rows, self.pads, gammas)
        ]

    def certain(self, token: int) -> torch.Tensor:
        """Draft scores ``[V]`` of a copied token: the draft drew it with probability 1 (for the sampling
        rule: accepted with the target's probability of it, else resampled from the target without it)."""
        scores = torch.full((self.vocab,), float("-inf"), device=self.device)
        scores[token] = 0.0
        return scores

    def positions(self, rows: list[torch.Tensor]) -> list[int]:
        """Per row, the position (and cache slot) of its last token: left padding is not cached."""
        return [len(ids) - 1 - p for ids, p in zip(rows, self.pads)]

    def set_lengths(self, lengths: list[int], layers: list[int] | None = None, drop: int = 0) -> None:
        """Roll the cache back: move the lengths (in place) or crop ``drop`` entries (dynamic, batch 1)."""
        if self.in_place:
            self.cache.set_lengths(lengths, layers)
        else:
            for i in range(len(self.cache.layers)) if layers is None else layers:
                self.cache.layers[i].crop(-drop)

    def record(self, b: int, tokens: list[int], scores: list[torch.Tensor], raw: list[torch.Tensor]) -> None:
        if self.keep_scores:
            self.scores[b] += scores
        if self.keep_logits:
            self.raw[b] += raw
        if self.streamer is not None:
            self.streamer.put(torch.tensor([tokens]))

    # ------------------------------------------------------------------------------------------ phases
    def prefill(self, input_ids: torch.Tensor) -> list[torch.Tensor]:
        past = self.cache.get_seq_length()
        if self.in_place and len(set(self.cache.lengths)) > 1:
            raise ValueError(f"The InPlaceCache passed to generate holds ragged rows {self.cache.lengths}.")
        batch, lengths = input_ids.shape[0], [input_ids.shape[1] - p for p in self.pads]
        if len(set(lengths)) == 1:  # equal rows: their common left padding is not cached
            tail = input_ids[:, self.pads[0] + past :]
            logits = self.forward(tail, [past] * batch, self.cache, "prefill", 1)[:, 0]
        else:
            # a ragged batch is packed to the left (row b's tokens at slots [0, L_b), then filler that no
            # prompt token attends to under causal attention) and prefilled in one forward; each row keeps L_b
            width, keep = max(lengths), max(lengths) - min(lengths) + 1
            filler = [ids[-1:].expand(width - n) for ids, n in zip(input_ids, lengths)]
            packed = torch.stack([torch.cat([ids[p:], f]) for ids, p, f in zip(input_ids, self.pads, filler)])
            self.state.prompt_lengths = lengths
            try:
                out = self.forward(packed, [0] * batch, self.cache, "prefill", keep)
            finally:
                self.state.prompt_lengths = None
            logits = out[torch.arange(batch), torch.tensor(lengths) - min(lengths)]
            self.set_lengths(lengths)
        if not self.cache.is_croppable:
            raise ValueError(
                f"Vegas needs a croppable cache to roll back drafts, got {type(self.cache).__name__}."
            )
        if not self.in_place:
            self.cache.activate_past_recording()
        self.vocab, self.device = logits.shape[-1], logits.device
        rows = []
        for b, ids in enumerate(input_ids):
            scores = self.process(ids, [], logits[b])
            tok = self.pick(scores)
            self.record(b, [tok], [scores], [logits[b]])
            rows.append(torch.cat([ids, ids.new_tensor([tok])]))
        return rows

    def draft(
        self, rows: list[torch.Tensor], gammas: list[int]
    ) -> tuple[list[list[int]], list[list[torch.Tensor]]]:
        """Draft up to ``gammas[b]`` tokens per row; returns the tokens and their processed scores."""
        n = self.positions(rows)
        tokens: list[list[int]] = [[] for _ in rows]
        scores: list[list[torch.Tensor]] = [[] for _ in rows]
        live = [g > 0 for g in gammas]
        feed = [int(ids[-1]) for ids in rows]
        device = rows[0].device
        steps = 0
        while any(live):
            logits = self.forward(
                torch.tensor(feed, device=device)[:, None], [m + steps for m in n], self.cache, "draft", 1
            )
            steps += 1
            self.stats.draft_forwards += 1
            picks = logits[:, 0].argmax(-1).tolist() if self.raw_greedy else None
            for b, ids in enumerate(rows):
                if not live[b]:
                    continue
                s = self.process(ids, tokens[b], logits[b, 0])
                tok = picks[b] if picks is not None else self.pick(s)
                tokens[b].append(tok)
                scores[b].append(s)
                feed[b] = tok
                live[b] = len(tokens[b]) < gammas[b] and tok not in self.eos
        # draft KV is not target KV: roll every layer back; the verify writes the same slots
        self.set_lengths(n, drop=steps)
        return tokens, scores

    def verify(
        self, rows: list[torch.Tensor], tokens: list[list[int]], draft_scores: list[list[torch.Tensor]]
    ) -> list[tuple[list[int], int, list[torch.Tensor], list[torch.Tensor]]]:
        """Verify every row's ``[b, y_1..y_gamma_t]`` in one forward.

        Returns per row the emitted tokens (after EOS/length truncation), how many of them are accepted draft
        tokens, and their processed and raw scores; nothing for a retired (finished) row.
        """
        n = self.positions(rows)
        width = 1 + max(len(t) for t in tokens)
        chunk = [[int(ids[-1]), *t, *[int(ids[-1])] * (width - 1 - len(t))] for ids, t in zip(rows, tokens)]
        self.state.last = [len(t) for t in tokens]
        ids_chunk = torch.tensor(chunk, device=rows[0].device)
        logits = self.forward(ids_chunk, n, self.cache, "verify", width)
        if self.raw_greedy:  # a row's matches past its own drafts are matches of the padding: capped below
            argmax = logits.argmax(-1)
            matches, argmax_rows = greedy_accept(ids_chunk[:, 1:], argmax)[0].tolist(), argmax.tolist()
        out: list[tuple[list[int], int, list[torch.Tensor], list[torch.Tensor]]] = []
        for b, (ids, t) in enumerate(zip(rows, tokens)):
            if self.state.retired and self.state.retired[b]:
                out.append(([], 0, [], []))
                continue
            g = len(t)
            if self.raw_greedy:
                target = logits[b, : g + 1]
                n_acc = min(matches[b], g)
                bonus = argmax_rows[b][n_acc]
            else:
                target = torch.stack([self.process(ids, t[:i], logits[b, i]) for i in range(g + 1)])
                draft = torch.tensor([t], dtype=torch.long, device=target.device)
                if self.gen.do_sample:
                    q = torch.softmax(torch.stack(draft_scores[b]), -1) if g else target[:0]
                    n_acc, bonus = speculative_accept(draft, q[None], torch.softmax(target, -1)[None])
                else:
                    n_acc, bonus = greedy_accept(draft, target.argmax(-1)[None])
            kept = [*t[: int(n_acc)], int(bonus)][: self.gen.max_length - len(ids)]
            hits = [i for i, tok in enumerate(kept) if tok in self.eos]
            kept = kept[: hits[0] + 1] if hits else kept
            e = len(kept)
            out.append(
                (kept, min(int(n_acc), e), [target[i] for i in range(e)], [logits[b, i] for i in range(e)])
            )
        return out

    def finished(self, rows: list[torch.Tensor], stops: list[int | None]) -> list[bool]:
        """Per row, whether it stops decoding. ``stops[b]``: the row's length when the criteria fired. Without
        an EOS criterion a stopped row goes on decoding, as in transformers, until every row has stopped; the
        output is then cut at the longest stop."""
        if self.pad_finished:
            return [t is not None for t in stops]
        limit = self.gen.max_length if None in stops else max(cast(list[int], stops))
        return [len(r) >= limit for r in rows]

    def run(self, input_ids: torch.Tensor) -> torch.Tensor:
        rows = self.prefill(input_ids)
        stops: list[int | None] = [len(ids) if self.stopped(ids) else None for ids in rows]
        done = self.finished(rows, stops)
        gamma, s = self.config.num_draft_tokens, self.stats
        while not all(done):
            n = self.positions(rows)
            gammas = [
                0 if d else max(0, min(gamma, self.gen.max_length - len(r) - 1)) for d, r in zip(done, rows)
            ]
            used = list(zip(self.state.valid_len or n, self.state.budget or n))
            self.state.retired = list(done)
            with Timer(input_ids.device) as t_draft:
                copied = self.lookup(rows, gammas)
                gammas = [0 if c or not self.state.selecting else g for c, g in zip(copied, gammas)]
                tokens, draft_scores = (
                    self.draft(rows, gammas) if max(gammas) else ([[] for _ in rows], [[] for _ in rows])
                )
                for b, c in enumerate(copied):
                    if c:
                        tokens[b], draft_scores[b] = c, [self.certain(t) for t in c]
                        s.lookup_drafts += 1
            with Timer(input_ids.device) as t_verify:
                results = self.verify(rows, tokens, draft_scores)
                kept = [0 if d else len(r[0]) for d, r in zip(done, results)]
                width = 1 + max(len(t) for t in tokens)
                self.set_lengths([m + k for m, k in zip(n, kept)], drop=width - kept[0])
            s.draft_seconds += t_draft.seconds
            s.verify_seconds += t_verify.seconds
            s.iterations += 1
            for b, (emitted, accepted, scores, raw) in enumerate(results):
                if done[b]:
                    continue
                cut = self.stop_at(rows[b], emitted) if stops[b] is None else None
                if cut is not None:
                    stops[b] = len(rows[b]) + cut
                    if self.pad_finished or len(rows) == 1:  # the row's output ends at the stop
                        emitted, scores, raw = emitted[:cut], scores[:cut], raw[:cut]
                        accepted = min(accepted, cut)
                self.record(b, emitted, scores, raw)
                rows[b] = torch.cat([rows[b], rows[b].new_tensor(emitted)])
                s.row_iterations += 1
                s.drafted += len(tokens[b])
                s.accepted += accepted
                s.emitted += len(emitted)
                s.trace.append((n[b], *used[b], len(tokens[b]), accepted))
            done = self.finished(rows, stops)
        if not self.pad_finished:  # rows that went on decoding past their stop end with the longest one
            end = max(cast(list[int], stops))
            rows = [r[:end] for r in rows]
            self.scores = [r[: end - input_ids.shape[1]] for r in self.scores]
            self.raw = [r[: end - input_ids.shape[1]] for r in self.raw]
        s.kv_entries_draft = self.state.entries["draft"]
        s.kv_entries_verify = self.state.entries["verify"]
        s.selection_entries = self.state.selection_entries
        s.query_key_pairs = self.state.pairs
        s.score_key_reads = self.state.score_reads
        s.selection_runs = self.state.selection_runs
        width = max(len(r) for r in rows)
        return torch.stack([torch.cat([r, r.new_full((width - len(r),), self.pad)]) for r in rows])

    def outputs(self, kind: str) -> tuple[torch.Tensor, ...] | None:
        """``scores``/``logits`` as transformers returns them: one ``[B, V]`` per step (``-inf`` once a row
        stopped)."""
        per_row = self.scores if kind == "scores" else self.raw
        if not (self.keep_scores if kind == "scores" else self.keep_logits):
            return None
        steps = max(len(r) for r in per_row)
        filler = torch.full_like(per_row[0][0], float("-inf"))
        return tuple(torch.stack([r[i] if i < len(r) else filler for r in per_row]) for i in range(steps))


def vegas_generate(
    model: Any,
    input_ids: torch.LongTensor,
    logits_processor: Any,
    stopping_criteria: Any,
    generation_config: Any,
    synced_gpus: bool = False,
    streamer: Any = None,
    vegas_config: VegasConfig | None = None,
    **model_kwargs: Any,
) -> VegasGenerateOutput | torch.LongTensor:
    """Vegas decoding loop, passed to ``model.generate(..., custom_generate=vegas_generate)``.

    Called by transformers like ``GenerationMixin._sample``; ``vegas_config`` is routed from ``generate``'s
    keyword arguments. The model runs the ``"hf_ext_vegas"`` attention for the duration of the call (the
    previous implementation is restored afterwards, also on error). A cache passed to ``generate`` that
    already holds the first ``p`` prompt tokens is reused: the prefill then runs only on the remaining prompt
    tokens.

    [reconstructed] parts: sliding-window layers are drafted densely over their window (the paper's model has
    none); draft KV is rolled back by moving each row's length in the preallocated cache (vLLM overwrites its
    slots; the ``DynamicCache`` path crops); the draft reads its selection in place through an index list
    (vLLM reads through its page table); the StreamingLLM window is token-aligned; the
    Quest selector is a project baseline. Rows of a batch accept independently (per-row lengths, masked).

    With ``VegasConfig(fallback=True)`` (the default) the call first predicts Vegas's speed over plain
    decoding (:func:`~hf_ext.vegas.core.predicted_speedup`) and, below 1.0, runs the host's own decoding loop
    instead (``vegas_stats.decision == "plain"``; an ``InPlaceCache`` passed in is copied into the host's
    ``DynamicCache`` first, which the output then holds), or with the combined draft (``lookup_ngram >= 1``)
    keeps its prompt-lookup drafts and drops the sparse ones (``"lookup"``).

    Args:
        model: A decoder-only transformers causal LM whose attention modules carry ``layer_idx``.
        input_ids: ``[B, N]`` prompts, left-padded where ``attention_mask`` marks padding.
        logits_processor: Prepared by ``generate``; applied to draft and verify logits alike.
        stopping_criteria: Prepared by ``generate``.
        generation_config: Prepared by ``generate`` (``max_length``, ``do_sample``, ``eos_token_id``, ...).
        synced_gpus: Ignored (single process).
        streamer: Optional streamer; receives the emitted tokens.
        vegas_config (`VegasConfig`, *optional*): Defaults to ``VegasConfig()``.
        **model_kwargs: ``cache`` (``generate``'s ``DynamicCache``, possibly prefilled, or an
            ``InPlaceCache``), ``attention_mask`` (left padding, or ``None``), ...

    Returns:
        :class:`VegasGenerateOutput` (with ``vegas_stats``) when ``return_dict_in_generate=True``, else the
        ``[1, N + new]`` token ids.

    Raises:
        TypeError: ``vegas_config`` is not a ``VegasConfig``; ``input_ids`` is not a LongTensor; an attention
            module lacks ``layer_idx``.
        ValueError: ``num_beams > 1``; a cache other than ``DynamicCache``/``InPlaceCache`` (static,
            quantized, linear attention); an ``InPlaceCache`` without room for ``max_length + gamma + 1``; an
            ``attention_mask`` that is not left padding.
        NotImplementedError: batch > 1 on the ``DynamicCache`` path or with a streamer, padding with a
            prefilled cache, encoder-decoder models, attention/hidden-state outputs.

    Example:
        >>> from hf_ext.testing import tiny_llama
        >>> lm = tiny_llama(max_position_embeddings=256)
        >>> ids = torch.randint(3, 64, (1, 40))
        >>> cfg = VegasConfig(num_draft_tokens=4, min_tokens=8, sparse_ratio=0.1, fallback=False)
        >>> out = lm.generate(ids, custom_generate=vegas_generate, vegas_config=cfg, max_new_tokens=12,
        ...                   do_sample=False, return_dict_in_generate=True)
        >>> torch.equal(out.sequences, lm.generate(ids, max_new_tokens=12, do_sample=False))
        True
    """
    if streamer is None:
        frame = inspect.currentframe()
        streamer = _generate_streamer(frame.f_back if frame is not None else None)
    stream = None if streamer is None else _EndOnce(streamer)
    try:  # generate has streamed the prompt: the streamer gets its end, also on an error
        config = VegasConfig() if vegas_config is None else vegas_config
        if not isinstance(config, VegasConfig):
            raise TypeError(f"`vegas_config` must be a VegasConfig, got {type(vegas_config).__name__}.")
        _check_inputs(model, input_ids, generation_config, model_kwargs)
        ratio = None
        if config.fallback:
            mask = model_kwargs.get("attention_mask")
            ratio = predict(model, input_ids, mask, generation_config.max_length, config)
        sparse = ratio is None or ratio >= 1.0
        if not sparse and not config.lookup_ngram:
            logger.info("Vegas predicted at %.2fx plain decoding here: decoding plainly.", ratio)
            cache = model_kwargs.get("cache")
            if isinstance(cache, InPlaceCache) and len(set(cache.lengths)) == 1:
                # the host's attention on the in-place cache reads every sliding layer's whole history under
                # a mask; its own cache keeps only their window
                model_kwargs = {**model_kwargs, "cache": cache.to_dynamic(model.config)}
            plain = model._sample(
                input_ids,
                logits_processor=logits_processor,
                stopping_criteria=stopping_criteria,
                generation_config=generation_config,
                synced_gpus=synced_gpus,
                streamer=stream,
                **model_kwargs,
            )
            if not generation_config.return_dict_in_generate:
                return cast(torch.LongTensor, plain)
            return VegasGenerateOutput(
                **dict(plain), vegas_stats=VegasStats(decision="plain", predicted_speedup=ratio)
            )
        loop = _Loop(
            model,
            input_ids,
            logits_processor,
            stopping_criteria,
            generation_config,
            stream,
            config,
            model_kwargs,
            sparse_drafts=sparse,
        )
        if not sparse:
            logger.info("Vegas predicted at %.2fx plain decoding here: prompt-lookup drafts only.", ratio)
        with attention_implementation(model, register_vegas_attention(in_place=loop.in_place)):
            sequences = loop.run(input_ids)
        loop.stats.predicted_speedup = ratio
    finally:
        if stream is not None:
            stream.end()
    if not generation_config.return_dict_in_generate:
        return cast(torch.LongTensor, sequences)
    return VegasGenerateOutput(
        sequences=cast(torch.LongTensor, sequences),
        scores=cast(Any, loop.outputs("scores")),
        logits=cast(Any, loop.outputs("logits")),
        cache=loop.cache,
        vegas_stats=loop.stats,
    )
