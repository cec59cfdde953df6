"""``InPlaceCache``: a transformers ``Cache`` of preallocated K/V buffers with one length per batch row.

Every layer holds ``keys``/``values`` ``[B, H_kv, capacity, D]`` allocated once. ``update`` writes the new
entries of row ``b`` at ``[lengths[b], lengths[b] + q)`` in place and returns views of the first
``max(lengths)`` slots; rolling back is moving the lengths (:meth:`InPlaceCache.set_lengths`), with no copy
and no allocation. Rows may hold different lengths (ragged speculative acceptance): slots past a row's length
are stale and must be masked by the attention, as ``vegas_generate``'s attention does; the stock transformers
attention sees equal rows only (every row then holds the same length, as in ``generate``'s own loop).
Sliding-window layers keep the whole sequence too (their window is a mask), so rollback is the same move.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import torch
from transformers.cache_utils import Cache, CacheLayerMixin, DynamicCache

from hf_ext._registry import paper


class InPlaceLayer(CacheLayerMixin):
    """One layer's preallocated K/V with per-row lengths.

    Args:
        keys: ``[B, H_kv, capacity, D]`` buffer (its first ``lengths[b]`` slots of row ``b`` are live).
        values: Same shape as ``keys``.
        lengths: Live slots per row.
        sliding_window: Window of a sliding-window attention layer, ``None`` for a full-attention layer.
    """

    is_croppable = True
    keys: torch.Tensor
    values: torch.Tensor

    def __init__(
        self,
        keys: torch.Tensor,
        values: torch.Tensor,
        lengths: Sequence[int],
        sliding_window: int | None = None,
    ) -> None:
        super().__init__()
        self.keys, self.values = keys, values
        self.lengths = [int(n) for n in lengths]
        self.sliding_window = sliding_window
        self.is_sliding = sliding_window is not None
        self.is_initialized = True
        self.device = keys.device

    @property
    def capacity(self) -> int:
        return self.keys.shape[2]

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        """Nothing to do: the buffers exist from construction."""

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write ``[B, H_kv, q, D]`` at each row's length, advance the lengths, return the live views."""
        q = key_states.shape[2]
        starts = self.lengths
        end = max(starts) + q
        if end > self.capacity:
            raise ValueError(
                f"InPlaceCache is full: writing {q} entries after {max(starts)} needs {end} slots, the cache "
                f"holds {self.capacity}. Build it with a larger `max_cache_len`."
            )
        if min(starts) == max(starts):
            self.keys[:, :, starts[0] : end] = key_states
            self.values[:, :, starts[0] : end] = value_states
        else:
            rows = torch.arange(len(starts), device=self.device)[:, None]
            pos = torch.tensor(starts, device=self.device)[:, None] + torch.arange(q, device=self.device)
            self.keys[rows, :, pos] = key_states.transpose(1, 2)
            self.values[rows, :, pos] = value_states.transpose(1, 2)
        self.lengths = [n + q for n in starts]
        return self.keys[:, :, :end], self.values[:, :, :end]

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return max(self.lengths) + query_length, 0

    def get_seq_length(self) -> int:
        return max(self.lengths)

    def get_max_length(self) -> int:
        return self.capacity

    def crop(self, tokens_to_remove: int) -> None:
        """``crop(-n)`` drops the last ``n`` entries of every row; ``crop(n)`` keeps at most ``n``."""
        self.lengths = [
            max(0, n + tokens_to_remove) if tokens_to_remove < 0 else min(n, tokens_to_remove)
            for n in self.lengths
        ]

    def reset(self) -> None:
        self.lengths = [0] * len(self.lengths)


class InPlaceCache(Cache):
    """Preallocated per-layer K/V with per-row lengths, for ``generate`` and ``vegas_generate``.

    Args:
        config: The model config (its text config gives layers, KV heads, head size and layer types).
        batch_size: Rows ``B``.
        max_cache_len: Slots per row (prompt + new tokens; ``vegas_generate`` adds ``num_draft_tokens + 1``).
        dtype: Buffer dtype (the model's).
        device: Buffer device.

    Example:
        >>> from hf_ext.testing import tiny_llama
        >>> lm = tiny_llama()
        >>> ids = torch.randint(3, 64, (2, 10))
        >>> cache = InPlaceCache(lm.config, batch_size=2, max_cache_len=20)
        >>> torch.equal(lm.generate(ids, cache=cache, max_new_tokens=5, do_sample=False),
        ...             lm.generate(ids, max_new_tokens=5, do_sample=False))
        True
        >>> cache.lengths
        [14, 14]
    """

    _paper = paper("vegas")

    def __init__(
        self,
        config: Any,
        batch_size: int,
        max_cache_len: int,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> None:
        text = config.get_text_config(decoder=True)
        heads = text.num_key_value_heads
        head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
        types = getattr(text, "layer_types", None) or ["full_attention"] * text.num_hidden_layers
        unknown = sorted(set(types) - {"full_attention", "sliding_attention"})
        if unknown:
            raise ValueError(f"InPlaceCache holds full and sliding attention layers only, got {unknown}.")
        shape = (batch_size, heads, max_cache_len, head_dim)
        self.slots = [
            InPlaceLayer(
                torch.zeros(shape, dtype=dtype, device=device),  # never garbage: short rows of a ragged
                torch.zeros(
                    shape, dtype=dtype, device=device
                ),  # batch read past their length with zero weight
                [0] * batch_size,
                text.sliding_window if kind == "sliding_attention" else None,
            )
            for kind in types
        ]
        super().__init__(layers=cast(Any, self.slots))

    @property
    def lengths(self) -> list[int]:
        """Committed entries per row (the first layer's; every layer agrees between forwards)."""
        return list(self.slots[0].lengths)

    @property
    def capacity(self) -> int:
        """Slots per row."""
        return self.slots[0].capacity

    def set_lengths(self, lengths: Sequence[int], layers: Sequence[int] | None = None) -> None:
        """Move every layer's (or the listed layers') lengths: the rollback, no data moves."""
        for i in range(len(self.slots)) if layers is None else layers:
            self.slots[i].lengths = [int(n) for n in lengths]

    def rows(self, count: int, length: int, first: int = 0) -> InPlaceCache:
        """A cache over ``count`` rows' buffers from row ``first`` on (views, no copy), every length set to
        ``length``: decoding from a shared prefilled prefix, which decoding never overwrites."""
        held = self.slots[0].keys.shape[0]
        if count < 1 or not 0 <= first <= held - count:
            raise ValueError(f"`first`={first} and `count`={count} name rows outside this cache's {held}.")
        view = InPlaceCache.__new__(InPlaceCache)
        at = slice(first, first + count)
        view.slots = [
            InPlaceLayer(layer.keys[at], layer.values[at], [length] * count, layer.sliding_window)
            for layer in self.slots
        ]
        Cache.__init__(view, layers=cast(Any, view.slots))
        return view

    def to_dynamic(self, config: Any) -> DynamicCache:
        """The committed entries in the host's ``DynamicCache`` (equal rows; its sliding layers keep their
        window, as the host's own decoding does). Entries are shared until the host appends.

        Raises:
            ValueError: the rows hold different lengths (a ragged batch).
        """
        if len(set(self.lengths)) != 1:
            raise ValueError(f"Only equal rows copy into a DynamicCache; the lengths are {self.lengths}.")
        n, out = self.lengths[0], DynamicCache(config=config)
        if n:
            for dst, src in zip(cast(list[Any], out.layers), self.slots):
                dst.update(src.keys[:, :, :n], src.values[:, :, :n])
        return out

    @classmethod
    def from_cache(cls, cache: Cache, config: Any, max_cache_len: int) -> InPlaceCache:
        """Copy a prefilled ``DynamicCache`` (equal rows) into a new ``InPlaceCache``."""
        first = cast(Any, cache.layers[0])
        if first.keys is None:
            raise ValueError("The cache to copy holds nothing yet.")
        out = cls(
            config, first.keys.shape[0], max_cache_len, dtype=first.keys.dtype, device=first.keys.device
        )
        for dst, src in zip(out.slots, cast(list[Any], cache.layers)):
            if getattr(src, "is_sliding", False) and src.get_seq_length() > src.keys.shape[2]:
                raise ValueError("A sliding-window cache that already dropped entries cannot be copied.")
            dst.update(src.keys, src.values)
        return out
