"""``vegas_generate``: Vegas self-speculative decoding as a transformers ``custom_generate`` callable.

Each iteration drafts up to gamma tokens with the model itself, its global layers attending only to the
compact buffer built at the previous verify, crops the draft's sliding-window KV, then verifies
``[b, y_1..y_gamma_t]`` in one forward over the full cache. The verify keeps the host's SDPA output, so the
accepted tokens are the model's own: greedy output is token-identical to ``generate(do_sample=False)``, and
sampling uses the speculative rejection rule (arXiv 2211.17192) so the output distribution is the model's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer
from transformers.generation.utils import GenerateDecoderOnlyOutput, _speculative_sampling

from hf_ext._registry import paper
from hf_ext.benchmarking import Timer
from hf_ext.generation.vegas.attention import VegasState, register_vegas_attention
from hf_ext.generation.vegas.config import VegasConfig

logger = logging.getLogger(__name__)

_OWN_KWARGS = ("cache", "attention_mask", "position_ids", "use_cache", "logits_to_keep")


@dataclass
class VegasStats:
    """Counters of one ``vegas_generate`` call (decode only; the prefill forward is excluded).

    Attributes:
        iterations: Verify passes.
        drafted: Sum of draft lengths gamma_t.
        accepted: Sum of accepted draft tokens n_acc.
        emitted: Tokens emitted by the verify passes (accepted + bonus, after EOS/length truncation).
        kv_entries_draft: Cache positions read by draft forwards, summed over layers (per KV head).
        kv_entries_verify: Cache positions read by verify forwards, summed over layers (each position once).
        selection_entries: Quest's page min/max metadata reads (0 for the other selectors).
        draft_seconds: Wall-clock seconds spent in draft forwards (and the sliding-layer rollback).
        verify_seconds: Wall-clock seconds spent in verify forwards and acceptance.
        trace: Per iteration ``(n, valid_len, budget, gamma_t, n_acc)``: cache length at the draft's start,
            selectable length and budget of the selection the draft used, draft length, accepted count.
    """

    _paper = paper("vegas")

    iterations: int = 0
    drafted: int = 0
    accepted: int = 0
    emitted: int = 0
    kv_entries_draft: float = 0.0
    kv_entries_verify: float = 0.0
    selection_entries: float = 0.0
    draft_seconds: float = 0.0
    verify_seconds: float = 0.0
    trace: list[tuple[int, int, int, int, int]] = field(default_factory=list)

    @property
    def acceptance_rate(self) -> float:
        """alpha = accepted / drafted (1.0 when nothing was drafted)."""
        return self.accepted / self.drafted if self.drafted else 1.0

    @property
    def mean_accepted_length(self) -> float:
        """tau = emitted tokens per iteration, bonus included."""
        return self.emitted / self.iterations if self.iterations else 0.0

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
    if input_ids.shape[0] != 1:
        raise NotImplementedError(
            f"Vegas decodes one sequence at a time (per-sequence acceptance for batch > 1 is not "
            f"implemented); got "
            f"batch size {input_ids.shape[0]}. Loop over prompts instead."
        )
    if generation_config.output_attentions or generation_config.output_hidden_states:
        raise NotImplementedError(
            "Vegas does not return attentions or hidden states; unset those output flags."
        )
    mask = model_kwargs.get("attention_mask")
    if mask is not None and not bool((mask == 1).all()):
        raise NotImplementedError(
            "Vegas does not support padded inputs; pass an all-ones `attention_mask` or none."
        )
    cache = model_kwargs.get("cache")
    if not isinstance(cache, DynamicCache) or any(
        type(layer) not in (DynamicLayer, DynamicSlidingWindowLayer) for layer in cache.layers
    ):
        kinds = sorted({type(layer).__name__ for layer in getattr(cache, "layers", [])})
        raise ValueError(
            f"Vegas needs a croppable DynamicCache of full/sliding attention layers, got "
            f"{type(cache).__name__} "
            f"(layers: {kinds}). Leave `cache_implementation` unset (dynamic)."
        )


class _Loop:
    """One ``vegas_generate`` call: prefill, then draft / crop / verify / accept until a stop fires."""

    def __init__(
        self,
        model: Any,
        logits_processor: Any,
        stopping_criteria: Any,
        generation_config: Any,
        streamer: Any,
        config: VegasConfig,
        model_kwargs: dict[str, Any],
    ) -> None:
        self.model = model
        self.processor = logits_processor
        self.stopping = stopping_criteria
        self.gen = generation_config
        self.streamer = streamer
        self.config = config
        self.cache: DynamicCache = model_kwargs["cache"]
        self.extra = {k: v for k, v in model_kwargs.items() if k not in _OWN_KWARGS}
        self.global_layers = [i for i, layer in enumerate(self.cache.layers) if not layer.is_sliding]
        self.sliding_layers = [i for i, layer in enumerate(self.cache.layers) if layer.is_sliding]
        self.state = VegasState(config, generation_config.max_length, self.global_layers)
        self.stats = VegasStats()
        eos = generation_config._eos_token_tensor
        self.eos = None if eos is None else eos.flatten()
        ret = generation_config.return_dict_in_generate
        self.scores: tuple[torch.Tensor, ...] | None = () if ret and generation_config.output_scores else None
        self.raw: tuple[torch.Tensor, ...] | None = () if ret and generation_config.output_logits else None

    def forward(self, ids: torch.Tensor, start: int, cache: Any, mode: str, keep: int) -> Any:
        pos = torch.arange(start, start + ids.shape[1], device=ids.device)[None]
        inputs = self.model.prepare_inputs_for_generation(
            ids,
            cache=cache,
            position_ids=pos,
            use_cache=True,
            logits_to_keep=keep,
            vegas_mode=mode,
            vegas_state=self.state,
            is_first_iteration=mode == "prefill",
            **self.extra,
        )
        return self.model(**inputs, return_dict=True)

    def pick(self, scores: torch.Tensor) -> torch.Tensor:
        """``[B, V]`` processed scores -> ``[B, 1]`` token (argmax, or a sample when ``do_sample``)."""
        if self.gen.do_sample:
            return torch.multinomial(torch.softmax(scores, dim=-1), num_samples=1)
        return scores.argmax(dim=-1, keepdim=True)

    def is_eos(self, tok: torch.Tensor) -> bool:
        return self.eos is not None and bool(torch.isin(tok, self.eos.to(tok.device)).any())

    def record(self, processed: list[torch.Tensor], raw: list[torch.Tensor]) -> None:
        if self.scores is not None:
            self.scores += tuple(processed)
        if self.raw is not None:
            self.raw += tuple(raw)

    def done(self, input_ids: torch.Tensor) -> bool:
        return bool(self.stopping(input_ids, self.scores).all())

    def prefill(self, input_ids: torch.Tensor) -> torch.Tensor:
        past = self.cache.get_seq_length()
        out = self.forward(input_ids[:, past:], past, self.cache, "prefill", 1)
        if not self.cache.is_croppable:
            raise ValueError(
                f"Vegas needs a croppable cache to roll back drafts, got {type(self.cache).__name__}."
            )
        self.cache.activate_past_recording()
        raw = out.logits[:, -1].float()
        scores = self.processor(input_ids, raw)
        self.record([scores], [raw])
        return torch.cat([input_ids, self.pick(scores)], dim=-1)

    def draft(self, input_ids: torch.Tensor, gamma: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Draft up to ``gamma`` tokens; returns the extended ids and the processed draft scores."""
        t = input_ids.shape[1]
        view = self.state.draft_cache(self.cache)
        ids, scores = input_ids, []
        for j in range(gamma):
            out = self.forward(ids[:, -1:], t - 1 + j, view, "draft", 1)
            s = self.processor(ids, out.logits[:, -1].float())
            tok = self.pick(s)
            ids = torch.cat([ids, tok], dim=-1)
            scores.append(s)
            if self.is_eos(tok):
                break
        for i in self.sliding_layers:  # draft KV is not target KV: drop it before the verify
            cast(Any, self.cache.layers[i]).crop(-len(scores))
        return ids, scores

    def verify(
        self, ids: torch.Tensor, t: int, draft_scores: list[torch.Tensor]
    ) -> tuple[torch.Tensor, int, list, list]:
        """Verify ``ids[:, t-1:]``.

        Returns the emitted tokens ``[1, e]`` (after EOS/length truncation), the number of accepted draft
        tokens among them, and the emitted tokens' processed and raw scores.
        """
        gamma_t = ids.shape[1] - t
        out = self.forward(ids[:, t - 1 :], t - 1, self.cache, "verify", gamma_t + 1)
        raw = out.logits[:, -(gamma_t + 1) :].float()
        new = torch.stack([self.processor(ids[:, : t + i], raw[:, i]) for i in range(gamma_t + 1)], dim=1)
        if self.gen.do_sample and gamma_t:
            valid, n_match = _speculative_sampling(ids, torch.stack(draft_scores, dim=1), gamma_t, new)
        else:
            z = self.pick(new[0]).view(1, -1) if self.gen.do_sample else new.argmax(dim=-1)
            match = (ids[:, t:] == z[:, :-1]).long().cumprod(dim=-1)
            n_match = match.sum()
            valid = z[:, : int(n_match) + 1]
        valid = valid[:, : self.gen.max_length - t]
        if self.eos is not None:
            hits = torch.isin(valid[0], self.eos.to(valid.device)).nonzero()
            if hits.numel():
                valid = valid[:, : int(hits[0]) + 1]
        n = valid.shape[1]
        return valid, min(int(n_match), n), [new[:, i] for i in range(n)], [raw[:, i] for i in range(n)]

    def run(self, input_ids: torch.Tensor) -> torch.Tensor:
        input_ids = self.prefill(input_ids)
        if self.streamer is not None:
            self.streamer.put(input_ids[:, -1:].cpu())
        gamma = self.config.num_draft_tokens
        while not self.done(input_ids):
            t = input_ids.shape[1]
            gamma_t = max(0, min(gamma, self.gen.max_length - t - 1))
            before = (t - 1, self.state.valid_len, self.state.budget)
            with Timer(input_ids.device) as t_draft:
                ids, draft_scores = self.draft(input_ids, gamma_t) if gamma_t else (input_ids, [])
            gamma_t = len(draft_scores)
            with Timer(input_ids.device) as t_verify:
                valid, accepted, processed, raw = self.verify(ids, t, draft_scores)
                n_acc = valid.shape[1] - 1  # chunk entries after b that stay in the cache
                self.cache.crop(
                    -(gamma_t - n_acc)
                )  # also trims sliding-window layers when nothing is rejected
                self.state.keep_tail(n_acc)
            self.stats.draft_seconds += t_draft.seconds
            self.stats.verify_seconds += t_verify.seconds
            input_ids = torch.cat([input_ids, valid], dim=-1)
            if self.streamer is not None:
                self.streamer.put(valid.cpu())
            self.record(processed, raw)
            s = self.stats
            s.iterations += 1
            s.drafted += gamma_t
            s.accepted += accepted
            s.emitted += valid.shape[1]
            s.trace.append((*before, gamma_t, accepted))
        s = self.stats
        s.kv_entries_draft = self.state.entries["draft"]
        s.kv_entries_verify = self.state.entries["verify"]
        s.selection_entries = self.state.selection_entries
        if self.streamer is not None:
            self.streamer.end()
        return input_ids


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
    none); draft KV is rolled back with ``cache.crop`` (vLLM overwrites slots); the draft reads a compact
    buffer gathered once per verify (vLLM uses a page table); the StreamingLLM window is token-aligned; the
    Quest selector is a project baseline. Batch > 1 (per-sequence acceptance) is not implemented.

    Args:
        model: A decoder-only transformers causal LM whose attention modules carry ``layer_idx``.
        input_ids: ``[1, N]`` prompt (batch 1).
        logits_processor: Prepared by ``generate``; applied to draft and verify logits alike.
        stopping_criteria: Prepared by ``generate``.
        generation_config: Prepared by ``generate`` (``max_length``, ``do_sample``, ``eos_token_id``, ...).
        synced_gpus: Ignored (single process).
        streamer: Optional streamer; receives the emitted tokens.
        vegas_config (`VegasConfig`, *optional*): Defaults to ``VegasConfig()``.
        **model_kwargs: ``cache`` (a ``DynamicCache``), ``attention_mask`` (all ones or ``None``), ...

    Returns:
        :class:`VegasGenerateOutput` (with ``vegas_stats``) when ``return_dict_in_generate=True``, else the
        ``[1, N + new]`` token ids.

    Raises:
        TypeError: ``vegas_config`` is not a ``VegasConfig``; ``input_ids`` is not a LongTensor; an attention
            module lacks ``layer_idx``.
        ValueError: ``num_beams > 1``; a cache that cannot be cropped (static, quantized, linear attention).
        NotImplementedError: batch > 1, padded inputs, encoder-decoder models, attention/hidden-state outputs.

    Example:
        >>> from hf_ext.testing import tiny_llama
        >>> lm = tiny_llama(max_position_embeddings=256)
        >>> ids = torch.randint(3, 64, (1, 40))
        >>> cfg = VegasConfig(num_draft_tokens=4, min_tokens=8, sparse_ratio=0.1)
        >>> out = lm.generate(ids, custom_generate=vegas_generate, vegas_config=cfg, max_new_tokens=12,
        ...                   do_sample=False, return_dict_in_generate=True)
        >>> torch.equal(out.sequences, lm.generate(ids, max_new_tokens=12, do_sample=False))
        True
    """
    config = VegasConfig() if vegas_config is None else vegas_config
    if not isinstance(config, VegasConfig):
        raise TypeError(f"`vegas_config` must be a VegasConfig, got {type(vegas_config).__name__}.")
    _check_inputs(model, input_ids, generation_config, model_kwargs)
    loop = _Loop(
        model, logits_processor, stopping_criteria, generation_config, streamer, config, model_kwargs
    )
    previous = model.config._attn_implementation
    model.set_attn_implementation(register_vegas_attention())
    try:
        sequences = loop.run(input_ids)
    finally:
        model.set_attn_implementation(previous)
    if not generation_config.return_dict_in_generate:
        return cast(torch.LongTensor, sequences)
    return VegasGenerateOutput(
        sequences=cast(torch.LongTensor, sequences),
        scores=cast(Any, loop.scores),
        logits=cast(Any, loop.raw),
        cache=loop.cache,
        vegas_stats=loop.stats,
    )
