"""The ``"hf_ext_vegas"`` attention function and the per-call ``VegasState``.

The function is registered with transformers' ``AttentionInterface`` and reads two extra forward kwargs,
``vegas_mode`` and ``vegas_state``:

* no state (pass-through): the host's SDPA call, unchanged;
* ``"prefill"`` / ``"verify"``: exact attention over the full cache (the host's SDPA; on an ``InPlaceCache`` a
  global layer's verify, and its prefill of a short prompt such as the last token of a prefilled one, runs
  ``hf_ext.kernels.chunked``, which also returns the score rows); on a global layer the selection
  ``I_l`` is then refreshed from this pass's scores, as a
  :class:`~hf_ext.kernels.chunked.KeySelection`: the selected slots, then the dense tail after them;
* ``"draft"`` on a global layer: the draft token's K/V are written to the cache like any token's (the verify
  overwrites them; the loop rolls the lengths back after drafting) and one decode attention reads the
  selection and the tail in place (``hf_ext.kernels.gathered_decode_attention``; nothing is copied). Quest
  chooses its pages per step and KV head and reads them with the tail the same way, in one softmax.
  Sliding-window layers attend over their window.

With an :class:`~hf_ext.vegas.cache.InPlaceCache` the rows of a batch may hold different lengths;
the function then builds each row's mask itself from the layers' lengths (the host's mask assumes equal rows),
so this implementation is registered without a mask function under :data:`ATTN_KEY_IN_PLACE`.

:func:`chunk_attention_forward` (``"hf_ext_chunk"``) puts the verify's kernel under plain decoding: the host's
attention, with ``chunk_attention`` in place of SDPA wherever that is exact. The benchmark's plain greedy runs
with it as well as with SDPA, so the kernel's speed is never credited to Vegas.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any, cast

import torch
from transformers.cache_utils import Cache

from hf_ext.kernels.chunked import KeySelection, chunk_attention, kernel_applies, pad_rows
from hf_ext.kernels.gathered_attention import gathered_decode_attention
from hf_ext.vegas.cache import InPlaceLayer
from hf_ext.vegas.config import VegasConfig
from hf_ext.vegas.core import (
    QuestPages,
    budget,
    score_row_index,
    streamingllm_indices,
    vegas_indices,
    vegas_indices_from_scores,
)

logger = logging.getLogger(__name__)

ATTN_KEY = "hf_ext_vegas"
ATTN_KEY_IN_PLACE = "hf_ext_vegas_in_place"
ATTN_KEY_CHUNK = "hf_ext_chunk"
MODES = ("prefill", "draft", "verify")


def visible_mask(
    lengths: list[int], q: int, kv: int, window: int | None, start: int = 0, device: Any = None
) -> torch.Tensor | None:
    """``[B, 1, q, kv - start]`` bool: query ``j`` of row ``b`` sits at slot ``lengths[b] - q + j`` and
    sees the slots up to itself (within ``window`` for a sliding layer), counted from ``start``; ``None``
    when plain (causal) SDPA over the ``kv`` slots is already exact."""
    if window is None and min(lengths) == kv and q in (1, kv):
        return None
    pos = torch.tensor(lengths, device=device)[:, None] - q + torch.arange(q, device=device)  # [B, q]
    slots = torch.arange(start, kv, device=device)
    mask = slots <= pos[..., None]
    if window is not None:
        mask &= slots > pos[..., None] - window
    return mask[:, None]


class VegasState:
    """Per-``generate`` state: the selection of every global layer and the KV counters.

    Args:
        config: The run's :class:`VegasConfig`.
        max_length: Generation ``max_length`` (prompt + new tokens), for the budget cap ``M``.
        global_layers: Indices of the full-attention layers (the others are sliding-window layers).
        cache: The decoding loop's cache (an ``InPlaceCache`` or a ``DynamicCache``).
    """

    def __init__(self, config: VegasConfig, max_length: int, global_layers: list[int], cache: Cache) -> None:
        self.config = config
        self.max_length = max_length
        self.global_layers = frozenset(global_layers)
        self.dense_layers = frozenset(sorted(global_layers)[: config.quest_dense_layers])
        self.cache = cache
        self.last: list[int] | None = None  # per row, the chunk index of the last real verify row
        # per row, the real prompt length of a ragged (left-padded) batch during its prefill, whose rows are
        # packed to the left of the chunk: row b scores with its query L_b - 1 and selects from [0, L_b)
        self.prompt_lengths: list[int] | None = None
        self.retired: list[bool] = []  # per row, set by the loop: finished, so its cache is no longer read
        self.valid_len: list[int] = []
        self.budget: list[int] = []
        self.selection: dict[int, KeySelection] = {}
        self.pages: dict[int, QuestPages] = {}
        self.entries = dict.fromkeys(MODES, 0.0)
        self.pairs = 0.0  # decode query rows x cache positions (attention and score products)
        self.score_reads = 0.0  # cache positions whose keys the verify's scoring pass reads
        self.selection_entries = 0.0
        self.runs: dict[int, float] = {}  # per layer, contiguous runs in the rows' selections (summed)
        self.selection_runs = 0.0  # runs the drafts read: each is a jump in the slot list (a scattered read)
        self._warned_degenerate = False
        # False when no draft will read a selection (the combined draft decoding by prompt lookup alone): the
        # verify then runs exact SDPA without scoring, and no selection is refreshed
        self.selecting = True

    # ---------------------------------------------------------------- called by the attention function
    def _selector(self, layer_idx: int) -> str:
        sel = self.config.selector
        return "full" if sel == "quest" and layer_idx in self.dense_layers else sel

    def _retired(self, batch: int) -> list[bool]:
        return self.retired or [False] * batch

    def live_lengths(self, n_keys: list[int], q: int) -> list[int]:
        """The entries a verify of ``q`` rows reads per row: all of a live row's ``n_keys``, only the first
        ``q`` slots of a retired one (its output is discarded; a finished sequence leaves the batch, as in
        vLLM, so it costs no cache reads)."""
        return [min(n, q) if r else n for n, r in zip(n_keys, self._retired(len(n_keys)))]

    def _last(self, rows: int, batch: int) -> list[int]:
        """Per row, the chunk index of the verify's last real row."""
        return self.last or [rows - 1] * batch

    def verify_attention(
        self, layer_idx: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float,
        n_keys: list[int], prefill: bool = False,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:  # fmt: skip
        """A global layer's verify (or a short prefill chunk) on the in-place cache through
        ``chunk_attention`` (one pass over the cache for all ``gamma + 1`` rows): ``[B, q, H_q, D]`` and, for
        the Vegas selector, its score rows' ``(logits [B, H_q, S, N], lse [B, H_q, S])``, which
        :meth:`refresh` selects from."""
        rows = None
        if self._selector(layer_idx) == "vegas":
            q, batch = query.shape[2], query.shape[0]
            if prefill and self.prompt_lengths is not None:
                rows = torch.tensor([[n - 1] for n in self.prompt_lengths], device=query.device)
            else:
                rows = score_row_index(q, None if prefill else self._last(q, batch), batch).to(query.device)
        lengths = torch.tensor(n_keys, device=key.device)
        out, lse, logits = chunk_attention(
            query, key, value, lengths, scale=scale, score_rows=rows, backend=self.config.backend
        )
        scores = None
        if rows is not None and logits is not None:
            scores = (logits, lse.gather(2, rows[:, None].expand(-1, lse.shape[1], -1)))
        return out.transpose(1, 2).contiguous(), scores

    def refresh(
        self,
        layer_idx: int,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        scale: float,
        n_keys: list[int],
        prefill: bool,
        scores: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> None:
        """Select ``I_l`` per row over ``[0, valid_len')`` (per verify); the layer's drafts read it, then
        every entry from ``valid_len'`` on, in place.

        ``n_keys[b]``: live cache entries of row ``b`` after this pass (the chunk included). ``scores``: the
        score rows' logits and logsumexps from the verify's own attention, when it returned them (the keys are
        then not read again).
        """
        cfg = self.config
        q, dev = query.shape[2], key.device
        if prefill and self.prompt_lengths is not None:  # score with each row's last real prompt query
            at = torch.tensor(self.prompt_lengths, device=dev) - 1
            query = query.gather(2, at[:, None, None, None].expand(-1, query.shape[1], 1, query.shape[3]))
            n_keys = list(self.prompt_lengths)
        valid = list(n_keys) if prefill else [n - q + 1 for n in n_keys]
        last = None if prefill else self._last(q, len(n_keys))
        seen = valid if last is None else [v + t for v, t in zip(valid, last)]
        ks = [budget(s, v, cfg.sparse_ratio, cfg.min_tokens, self.max_length) for s, v in zip(seen, valid)]
        retired = self._retired(len(valid))
        if any(k >= v for k, v, r in zip(ks, valid, retired) if not r) and not self._warned_degenerate:
            logger.warning(
                "Vegas budget %s >= selectable length %s: the draft reads the whole cache.", ks, valid
            )
            self._warned_degenerate = True
        sel = self._selector(layer_idx)
        tails = list(valid)  # the dense tail [tails[b], length) is read after the selection
        idx = None  # [B, n] selected slots, -1-padded
        if sel == "vegas" and scores is not None:
            idx = vegas_indices_from_scores(*scores, valid_len=valid, budgets=ks, mode=cfg.score_mode,
                                            backend=cfg.backend)  # fmt: skip
        elif sel == "vegas":
            idx = vegas_indices(query, key, last=last, valid_len=valid, budgets=ks, scale=scale,
                                mode=cfg.score_mode, backend=cfg.backend)  # fmt: skip
            if not prefill:
                self.score_reads += float(sum(seen))
                self.pairs += float(sum(seen)) * (1 if max(last or [0]) == 0 else 2) * query.shape[1]
        elif sel == "streamingllm":
            windows = [
                streamingllm_indices(v, s, cfg.sparse_ratio, cfg.min_tokens, cfg.sink_tokens, cfg.page_size)
                for v, s in zip(valid, seen)
            ]
            idx = pad_rows(windows).to(dev)
        elif sel == "full":
            tails = [0] * len(valid)
        else:  # quest: pages are chosen per draft step; the selection is the dense tail only
            pages = self.pages.setdefault(layer_idx, QuestPages(cfg.page_size))
            pages.extend(key, min(v for v, r in zip(valid, retired) if not r))
            tails = [pages.covered] * len(valid)
        if idx is None:
            idx = torch.full((len(valid), 1), -1, dtype=torch.long, device=dev)
        if any(retired):  # a finished row's drafts read their own entries only (its output is discarded)
            lengths = cast(InPlaceLayer, self.cache.layers[layer_idx]).lengths
            idx[torch.tensor(retired, device=dev)] = -1
            tails = [n - q if r else t for n, r, t in zip(lengths, retired, tails)]
        self.selection[layer_idx] = KeySelection.from_padded(idx, tails, validate=False)
        self.runs[layer_idx] = self.selection[layer_idx].runs()
        self.valid_len, self.budget = valid, ks

    def draft_attention(
        self, layer_idx: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float
    ) -> torch.Tensor:
        """One draft query ``[B, H_q, 1, D]`` attending to the layer's selection and the entries after it,
        read in place from the cache ``key``/``value`` ``[B, H_kv, N, D]``: ``[B, H_q, 1, D]``."""
        selection = self.selection[layer_idx]
        runs = self.runs[layer_idx]
        pages = self.pages.get(layer_idx) if self._selector(layer_idx) == "quest" else None
        chosen = pages.select(query, self.budget) if pages is not None else None
        if pages is not None and chosen is not None:  # Quest: this step's pages per KV head, then the tail
            slots, counts = chosen
            live = ~torch.tensor(self._retired(len(counts)), device=counts.device)
            selection = KeySelection(slots, counts * live, selection.tail_start, validate=False)
            runs = selection.runs()
            self.selection_entries += 2 * pages.n_pages * query.shape[0]
            self.pairs += 2 * pages.n_pages * query.shape[0] * query.shape[1]
        layer = self.cache.layers[layer_idx]
        lengths = torch.tensor(getattr(layer, "lengths", [key.shape[2]]), device=key.device)
        out, _ = gathered_decode_attention(
            query, key, value, selection, scale=scale, length=lengths, backend=self.config.backend
        )
        read = float(selection.positions(lengths).sum())
        self.entries["draft"] += read
        self.pairs += read * query.shape[1]
        self.selection_runs += runs
        return out


def _window(module: torch.nn.Module, layer: Any) -> int | None:
    if isinstance(layer, InPlaceLayer):
        return layer.sliding_window
    return getattr(module, "sliding_window", None) if getattr(layer, "is_sliding", False) else None


def vegas_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    vegas_mode: str | None = None,
    vegas_state: VegasState | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention with the signature of ``transformers.integrations.sdpa_attention.sdpa_attention_forward``.

    Shapes: ``query`` ``[B, H_q, q, D]``; ``key``/``value`` ``[B, H_kv, N, D]`` post-RoPE, after the cache
    update.
    Returns ``([B, q, H_q, D], None)`` like SDPA.

    Raises:
        TypeError: ``module`` has no ``layer_idx`` (the selection is stored per layer).
        ValueError: ``vegas_mode`` is not one of ``"prefill"``, ``"draft"``, ``"verify"``.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if vegas_state is None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    layer_idx = getattr(module, "layer_idx", None)
    if not isinstance(layer_idx, int):
        raise TypeError(
            f"Vegas needs attention modules with an int `layer_idx`; {type(module).__name__} has "
            f"{layer_idx!r}."
        )
    if vegas_mode not in MODES:
        raise ValueError(f"`vegas_mode` must be one of {MODES}, got {vegas_mode!r}.")
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    is_global = layer_idx in vegas_state.global_layers
    if vegas_mode == "draft" and is_global:
        out = vegas_state.draft_attention(layer_idx, query, key, value, scale)
        return out.transpose(1, 2).contiguous(), None
    layer = vegas_state.cache.layers[layer_idx]
    q, window = query.shape[2], _window(module, layer)
    scores = None
    short_prompt = vegas_mode == "prefill" and kernel_applies(query, key, value)  # <= 64 query vectors
    chunk = (vegas_mode == "verify" and vegas_state.selecting) or short_prompt
    if isinstance(layer, InPlaceLayer) and window is None and chunk:
        n_keys = vegas_state.live_lengths(layer.lengths, q)
        out, scores = vegas_state.verify_attention(
            layer_idx, query, key, value, scale, n_keys, prefill=vegas_mode == "prefill"
        )
        reads = list(n_keys)
    elif isinstance(layer, InPlaceLayer):
        n_keys = layer.lengths
        start = 0 if window is None else max(0, min(n_keys) - q - window + 1)
        mask = visible_mask(n_keys, q, key.shape[2], window, start, key.device)
        k, v = key[:, :, start:], value[:, :, start:]
        out, _ = sdpa_attention_forward(module, query, k, v, mask, dropout=dropout, scaling=scaling, **kwargs)
        reads = [min(n, window + q - 1) if window else n for n in n_keys]
    else:  # DynamicCache: exact-length rows and the host's mask
        n_keys = [key.shape[2]]
        out, _ = sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
        reads = n_keys
    vegas_state.entries[vegas_mode] += float(sum(reads))
    if vegas_mode != "prefill":
        vegas_state.pairs += float(sum(reads)) * q * query.shape[1]
    if is_global and vegas_mode != "draft" and vegas_state.selecting:
        vegas_state.refresh(
            layer_idx, query, key, value, scale, n_keys, prefill=vegas_mode == "prefill", scores=scores
        )
    return out, None


def chunk_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """SDPA's signature and result (``query`` ``[B, H_q, q, D]``, ``key``/``value`` ``[B, H_kv, N, D]`` ->
    ``([B, q, H_q, D], None)``), computed by :func:`~hf_ext.kernels.chunked.chunk_attention` where
    that is exact and its CPU kernel runs: no mask from the host (every row's query ``j`` sees the slots up to
    ``N - q + j``: an unpadded decode step, or a prefill with ``q == N``), a causal module, no dropout, and
    shapes the kernel takes (:func:`~hf_ext.kernels.chunked.kernel_applies`: CPU fp32, at most 64
    query vectors per KV head). Anything else goes to the host's SDPA unchanged."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    b, _, q, d = query.shape
    if (
        attention_mask is None
        and dropout == 0.0
        and getattr(module, "is_causal", True)
        and q <= key.shape[2]
        and kernel_applies(query, key, value)
    ):
        lengths = torch.full((b,), key.shape[2], dtype=torch.int64, device=query.device)
        scale = scaling if scaling is not None else d**-0.5
        out, _, _ = chunk_attention(query, key, value, lengths, scale=scale)
        return out.transpose(1, 2).contiguous(), None
    return sdpa_attention_forward(
        module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
    )


@contextlib.contextmanager
def attention_implementation(model: Any, key: str) -> Iterator[None]:
    """Run the block with ``model``'s attention implementation set to ``key``; the previous one is restored
    on exit, also after an exception."""
    previous = model.config._attn_implementation
    model.set_attn_implementation(key)
    try:
        yield
    finally:
        model.set_attn_implementation(previous)


def register_chunk_attention() -> str:
    """Register :func:`chunk_attention_forward` (with ``sdpa_mask``) and return its key, ``"hf_ext_chunk"``:
    ``model.set_attn_implementation(register_chunk_attention())``."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(ATTN_KEY_CHUNK, chunk_attention_forward)
    AttentionMaskInterface.register(ATTN_KEY_CHUNK, sdpa_mask)
    return ATTN_KEY_CHUNK


def register_vegas_attention(in_place: bool = False) -> str:
    """Register the Vegas attention with transformers and return its key.

    ``in_place=False``: ``"hf_ext_vegas"`` with ``sdpa_mask`` as its mask function (the host builds masks, as
    for SDPA); ``in_place=True``: ``"hf_ext_vegas_in_place"`` without one (the function masks ragged rows).
    """
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(ATTN_KEY, vegas_attention_forward)
    AttentionMaskInterface.register(ATTN_KEY, sdpa_mask)
    AttentionInterface.register(ATTN_KEY_IN_PLACE, vegas_attention_forward)
    return ATTN_KEY_IN_PLACE if in_place else ATTN_KEY
