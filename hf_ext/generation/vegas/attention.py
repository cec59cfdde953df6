"""The ``"hf_ext_vegas"`` attention function, the per-call ``VegasState`` and the draft's compact cache view.

The function is registered with transformers' ``AttentionInterface`` (and ``sdpa_mask`` with
``AttentionMaskInterface``) and reads two extra forward kwargs, ``vegas_mode`` and ``vegas_state``:

* no state (pass-through) or a sliding-window layer: the host's SDPA call, unchanged;
* ``"prefill"`` / ``"verify"`` on a global layer: the host's SDPA output, then the layer's selection ``I_l``
  is refreshed from this pass's scores and gathered, with the chunk's tail, into one compact buffer;
* ``"draft"`` on a global layer: the layer's K/V arrive from :class:`CompactLayer` (the draft cache view
  appends the draft token to the compact buffer instead of the full cache), and one decode attention runs
  over that buffer (``hf_ext.kernels.gathered_decode_attention`` compact mode). Quest reads its pages from the
  full cache per step and merges them with the tail by log-sum-exp.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from transformers.cache_utils import Cache, CacheLayerMixin

from hf_ext.generation.vegas.config import VegasConfig
from hf_ext.generation.vegas.core import QuestPages, budget, streamingllm_indices, vegas_indices
from hf_ext.kernels.gathered_attention import gather_kv, gathered_decode_attention

logger = logging.getLogger(__name__)

ATTN_KEY = "hf_ext_vegas"
MODES = ("prefill", "draft", "verify")


class CompactLayer(CacheLayerMixin):
    """One global layer's draft KV: ``n_selected`` gathered entries, then the recent tail, in one buffer.

    ``keys``/``values`` are ``[B, H_kv, capacity, D]``; rows ``[0, length)`` are live. ``update`` appends in
    place (growing the buffer only if a draft outruns the capacity reserved at the verify).
    """

    is_sliding = False
    keys: torch.Tensor
    values: torch.Tensor

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, n_selected: int, length: int) -> None:
        super().__init__()
        self.keys, self.values = keys, values
        self.n_selected, self.length = n_selected, length
        self.is_initialized = True

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        """Never called: the buffer exists before any draft forward."""

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        end = self.length + key_states.shape[-2]
        if end > self.keys.shape[2]:
            room = self.keys.new_empty(*self.keys.shape[:2], end - self.keys.shape[2] + 8, self.keys.shape[3])
            self.keys, self.values = (
                torch.cat([self.keys, room], 2),
                torch.cat([self.values, room.clone()], 2),
            )
        self.keys[:, :, self.length : end] = key_states
        self.values[:, :, self.length : end] = value_states
        self.length = end
        return self.keys[:, :, :end], self.values[:, :, :end]

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.length + query_length, 0

    def get_seq_length(self) -> int:
        return self.length

    def get_max_length(self) -> int:
        return -1


class VegasState:
    """Per-``generate`` state: the selection of every global layer, the compact buffers and the KV counters.

    Args:
        config: The run's :class:`VegasConfig`.
        max_length: Generation ``max_length`` (prompt + new tokens), for the budget cap ``M``.
        global_layers: Indices of the full-attention layers (the others are sliding-window layers).
    """

    def __init__(self, config: VegasConfig, max_length: int, global_layers: list[int]) -> None:
        self.config = config
        self.max_length = max_length
        self.global_layers = frozenset(global_layers)
        self.dense_layers = frozenset(sorted(global_layers)[: config.quest_dense_layers])
        self.valid_len = 0
        self.budget = 0
        self.compact: dict[int, CompactLayer] = {}
        self.pages: dict[int, QuestPages] = {}
        self.full_kv: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.entries = dict.fromkeys(MODES, 0.0)
        self.selection_entries = 0.0
        self._warned_degenerate = False

    # ---------------------------------------------------------------- called by the decoding loop
    def draft_cache(self, cache: Cache) -> Cache:
        """A cache view for draft forwards: global layers -> compact buffers, sliding layers -> real ones."""
        layers = [self.compact.get(i, layer) for i, layer in enumerate(cache.layers)]
        return Cache(layers=layers)

    def keep_tail(self, n_accepted: int) -> None:
        """After a verify, keep the first ``n_accepted`` chunk entries after ``b`` in every compact buffer."""
        for layer in self.compact.values():
            layer.length = layer.n_selected + n_accepted

    # ---------------------------------------------------------------- called by the attention function
    def _selector(self, layer_idx: int) -> str:
        sel = self.config.selector
        return "full" if sel == "quest" and layer_idx in self.dense_layers else sel

    def refresh(
        self,
        layer_idx: int,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        scale: float,
        prefill: bool,
    ) -> None:
        """Select ``I_l`` over ``[0, valid_len')`` and build the layer's compact buffer (once per verify)."""
        cfg = self.config
        b, n_keys = key.shape[0], key.shape[2]
        valid = n_keys if prefill else n_keys - query.shape[2] + 1
        k = budget(n_keys, valid, cfg.sparse_ratio, cfg.min_tokens, self.max_length)
        if k >= valid and not self._warned_degenerate:
            logger.warning(
                "Vegas budget %d >= selectable length %d: the draft reads the whole cache.", k, valid
            )
            self._warned_degenerate = True
        sel = self._selector(layer_idx)
        dev = key.device
        if sel == "vegas":
            idx = vegas_indices(
                query,
                key,
                prefill=prefill,
                valid_len=valid,
                k=k,
                scale=scale,
                mode=cfg.score_mode,
                backend=cfg.backend,
            )
        elif sel == "streamingllm":
            idx = streamingllm_indices(
                valid, n_keys, cfg.sparse_ratio, cfg.min_tokens, cfg.sink_tokens, cfg.page_size
            )
            idx = idx.to(dev)[None].expand(b, -1)
        elif sel == "full":
            idx = torch.arange(valid, device=dev)[None].expand(b, -1)
        else:  # quest: pages are chosen per draft step; the buffer holds the tail only
            self.pages.setdefault(layer_idx, QuestPages(cfg.page_size)).extend(key, valid)
            self.full_kv[layer_idx] = (key, value)
            idx = torch.empty(b, 0, dtype=torch.long, device=dev)
        rows = torch.cat([idx, torch.arange(valid, n_keys, device=dev)[None].expand(b, -1)], dim=1)
        capacity = rows.shape[1] + 2 * cfg.num_draft_tokens + 1
        if rows.shape[1]:
            k_c, v_c = gather_kv(key, value, rows, capacity, backend=cfg.backend)
        else:
            k_c, v_c = (
                key.new_empty(*key.shape[:2], capacity, key.shape[3]),
                value.new_empty(*key.shape[:2], capacity, key.shape[3]),
            )
        self.compact[layer_idx] = CompactLayer(k_c, v_c, n_selected=idx.shape[1], length=rows.shape[1])
        self.valid_len, self.budget = valid, k

    def draft_attention(
        self, layer_idx: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float
    ) -> torch.Tensor:
        """One draft query attending to the compact buffer ``key``/``value``: ``[B, H_q, 1, D]``."""
        backend = self.config.backend
        out, lse = gathered_decode_attention(query, key, value, None, scale=scale, backend=backend)
        read = key.shape[2]
        pages = self.pages.get(layer_idx) if self._selector(layer_idx) == "quest" else None
        idx = pages.select(query, self.budget) if pages is not None else None
        if pages is not None and idx is not None:
            full_k, full_v = self.full_kv[layer_idx]
            out_p, lse_p = gathered_decode_attention(query, full_k, full_v, idx, scale=scale, backend=backend)
            lse_all = torch.logaddexp(lse, lse_p)
            out = (
                torch.exp(lse - lse_all)[..., None, None] * out.float()
                + torch.exp(lse_p - lse_all)[..., None, None] * out_p.float()
            ).to(query.dtype)
            read += idx.shape[-1]
            self.selection_entries += 2 * pages.n_pages
        self.entries["draft"] += read
        return out


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
    update. Returns ``([B, q, H_q, D], None)`` like SDPA.

    Raises:
        TypeError: ``module`` has no ``layer_idx`` (the selection is stored per layer).
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    layer_idx = getattr(module, "layer_idx", None)
    if vegas_state is not None and not isinstance(layer_idx, int):
        raise TypeError(
            f"Vegas needs attention modules with an int `layer_idx`; {type(module).__name__} has "
            f"{layer_idx!r}."
        )
    if vegas_state is None or layer_idx not in vegas_state.global_layers:
        if vegas_state is not None and vegas_mode in ("draft", "verify"):
            vegas_state.entries[vegas_mode] += key.shape[2]
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    if vegas_mode == "draft":
        out = vegas_state.draft_attention(layer_idx, query, key, value, scale)
        return out.transpose(1, 2).contiguous(), None
    if vegas_mode not in ("prefill", "verify"):
        raise ValueError(f"`vegas_mode` must be one of {MODES}, got {vegas_mode!r}.")
    out, _ = sdpa_attention_forward(
        module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
    )
    vegas_state.entries[vegas_mode] += key.shape[2]
    vegas_state.refresh(layer_idx, query, key, value, scale, prefill=vegas_mode == "prefill")
    return out, None


def register_vegas_attention() -> str:
    """Register ``"hf_ext_vegas"`` with transformers' attention and mask interfaces; returns the key."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(ATTN_KEY, vegas_attention_forward)
    AttentionMaskInterface.register(ATTN_KEY, sdpa_mask)
    return ATTN_KEY
