"""``VegasConfig``: the knobs of Vegas self-speculative decoding, validated on construction."""

from __future__ import annotations

from dataclasses import dataclass, field

from hf_ext._registry import paper
from hf_ext._validation import check_bool, check_choice, check_float, check_int, check_probability
from hf_ext.kernels._dispatch import BACKENDS

SELECTORS = ("vegas", "streamingllm", "quest", "full")
SCORE_MODES = ("weight", "logit")
CACHES = ("in_place", "dynamic")


@dataclass
class VegasConfig:
    """Settings of :func:`hf_ext.vegas.generate.vegas_generate`.

    Defaults follow the public reference run (gamma 6, ratio 0.07); the reference code's class default ratio
    is 0.05.

    Args:
        num_draft_tokens (`int`, *optional*, defaults to 6): Draft tokens gamma per iteration.
        sparse_ratio (`float`, *optional*, defaults to 0.07): Budget ratio rho in ``(0, 1]``; per global layer
            the draft reads ``k = min(clamp(ceil(seqlen * rho), min_tokens, M), valid_len)`` selected entries
            plus the recent tail, with ``M = max(ceil(max_length * rho), min_tokens)``.
        min_tokens (`int`, *optional*, defaults to 256): Budget floor m.
        score_mode (`str`, *optional*, defaults to ``"weight"``): ``"weight"`` (softmax probability per score
            row) or ``"logit"`` (scaled logit), pooled by a mean over heads and rows.
        selector (`str`, *optional*, defaults to ``"vegas"``): ``"vegas"`` (verify scores), ``"streamingllm"``
            (sink + window), ``"quest"`` (per-draft-step page top-k) or ``"full"`` (oracle, whole cache).
        sink_tokens (`int`, *optional*, defaults to 16): StreamingLLM sink block (vLLM's block size).
        page_size (`int`, *optional*, defaults to 16): Quest page size and StreamingLLM window granularity.
        quest_dense_layers (`int`, *optional*, defaults to 0): Quest only: the first global layers drafted
            densely (the Quest paper uses 2; 0 keeps budgets equal).
        backend (`str`, *optional*, defaults to ``"auto"``): Kernel backend for ``hf_ext.kernels``.
        fallback (`bool`, *optional*, defaults to `True`): Decode plainly (the host's own loop) when the byte
            model of :func:`~hf_ext.vegas.core.predicted_speedup` predicts Vegas below plain decoding for the
            call's model, prompt length, batch and budget; ``VegasStats.decision`` then reads ``"plain"``.
            With the combined draft (``lookup_ngram >= 1``) the call instead keeps its prompt-lookup drafts
            and drops the sparse ones (``"lookup"``). ``False`` always drafts.
        fallback_acceptance (`float`, *optional*, defaults to 0.8): Draft acceptance in ``[0, 1]`` the
            prediction assumes (Vegas accepted about 0.8 on Gemma-3-270M's copy prompt).
        lookup_ngram (`int`, *optional*, defaults to 0): The combined draft: with ``n >= 1``, a row whose last
            ``n`` (or fewer, down to 1) tokens occurred earlier in its prompt or output drafts the tokens that
            followed there (prompt lookup, no draft forward); other rows draft with Vegas's sparse attention.
            The verify is unchanged, so the output stays lossless. 0 drafts with Vegas only.
        cache (`str`, *optional*, defaults to ``"in_place"``): ``"in_place"`` decodes on an
            :class:`~hf_ext.vegas.cache.InPlaceCache` (preallocated, rollback by moving lengths,
            batch > 1 with per-row lengths); ``"dynamic"`` keeps ``generate``'s ``DynamicCache`` and rolls
            back with ``crop`` (batch 1). An ``InPlaceCache`` passed to ``generate`` is always used as is.

    Example:
        >>> VegasConfig(num_draft_tokens=4, sparse_ratio=0.1).selector
        'vegas'
    """

    _paper = paper("vegas")

    num_draft_tokens: int = field(default=6, metadata={"help": "Draft tokens per iteration (gamma)."})
    sparse_ratio: float = field(default=0.07, metadata={"help": "Per-layer KV budget ratio rho in (0, 1]."})
    min_tokens: int = field(default=256, metadata={"help": "Budget floor m (entries)."})
    score_mode: str = field(default="weight", metadata={"help": "'weight' or 'logit'."})
    selector: str = field(default="vegas", metadata={"help": "'vegas', 'streamingllm', 'quest' or 'full'."})
    sink_tokens: int = field(default=16, metadata={"help": "StreamingLLM sink tokens."})
    page_size: int = field(default=16, metadata={"help": "Quest page size / window granularity."})
    quest_dense_layers: int = field(
        default=0, metadata={"help": "Quest: leading global layers drafted densely."}
    )
    backend: str = field(default="auto", metadata={"help": "Kernel backend: 'auto', 'torch' or 'triton'."})
    cache: str = field(default="in_place", metadata={"help": "'in_place' (preallocated) or 'dynamic'."})
    lookup_ngram: int = field(
        default=0, metadata={"help": "Combined draft: n-gram size of prompt lookup (0 = Vegas drafts only)."}
    )
    fallback: bool = field(default=True, metadata={"help": "Decode plainly where Vegas is predicted slower."})
    fallback_acceptance: float = field(
        default=0.8, metadata={"help": "Acceptance the fallback's prediction assumes, in [0, 1]."}
    )

    def __post_init__(self) -> None:
        self.num_draft_tokens = check_int("num_draft_tokens", self.num_draft_tokens, low=1)
        self.sparse_ratio = check_float(
            "sparse_ratio", self.sparse_ratio, low=0, high=1, low_open=True, hint="E.g. sparse_ratio=0.07."
        )
        self.min_tokens = check_int("min_tokens", self.min_tokens, low=1)
        self.score_mode = check_choice("score_mode", self.score_mode, SCORE_MODES)
        self.selector = check_choice("selector", self.selector, SELECTORS)
        self.sink_tokens = check_int("sink_tokens", self.sink_tokens, low=0)
        self.page_size = check_int("page_size", self.page_size, low=1)
        self.quest_dense_layers = check_int("quest_dense_layers", self.quest_dense_layers, low=0)
        self.backend = check_choice("backend", self.backend, BACKENDS)
        self.cache = check_choice("cache", self.cache, CACHES)
        self.lookup_ngram = check_int("lookup_ngram", self.lookup_ngram, low=0)
        self.fallback = check_bool("fallback", self.fallback)
        self.fallback_acceptance = check_probability("fallback_acceptance", self.fallback_acceptance)
