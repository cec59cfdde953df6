"""``EchoWanAttnProcessor``: EchoAttention on diffusers' ``WanTransformer3DModel`` self-attention (``attn1``).

EchoAttention (reconstructed; not verified against the paper). The processor mixes the shared per-head routing
(:class:`~hf_ext.echo_attention.routed.RoutedAttention`) into ``WanAttnProcessor``; dense-routed
heads still call ``dispatch_attention_fn`` with the user's backend.
"""

from __future__ import annotations

from typing import Any

import torch
from diffusers.models.attention_dispatch import dispatch_attention_fn
from diffusers.models.transformers.transformer_wan import WanAttnProcessor, _get_qkv_projections

from hf_ext._registry import paper
from hf_ext.echo_attention.routed import DENSE, RoutedAttention


class EchoWanAttnProcessor(RoutedAttention, WanAttnProcessor):
    """Wan self-attention served by dense, Sparse and Echo operators per head.

    EchoAttention (reconstructed; not verified against the paper). Reuses the module's own projections,
    q/k RMS norms and RoPE (re-implemented from ``WanAttnProcessor.__call__``, diffusers 0.42.1), then routes
    each head (:class:`RoutedAttention`): dense heads call ``dispatch_attention_fn`` (the user's backend
    applies), sparse and echo heads run :func:`~hf_ext.echo_attention.core.sparse_echo_attention`.
    A call where every head is dense (``mode="dense"``, a dense layer, or a step before ``dense_first_steps``)
    is the stock processor exactly.

    Args:
        config: The method settings.
        layer: Transformer block index.
        context: The shared :class:`EchoContext` (filled by the pre-hook).
        params: The handle's ``EchoParams`` (theta and routes), shared by all layers.

    Example:
        >>> from hf_ext import EchoAttentionConfig, apply_echo_attention
        >>> from hf_ext.testing import tiny_wan_transformer
        >>> dit = tiny_wan_transformer()
        >>> handle = apply_echo_attention(dit, EchoAttentionConfig(block_size=16, dense_layers=(),
        dense_first_steps=0))
        >>> type(dit.attn_processors["blocks.0.attn1.processor"]).__name__
        'EchoWanAttnProcessor'
        >>> handle.remove()
    """

    _paper = paper("echo_attention")

    def qkv(
        self, attn: Any, hidden_states: torch.Tensor, rotary_emb: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Projections, q/k norms, head split and RoPE as in ``WanAttnProcessor``: ``[B, S, H, D]`` each."""
        query, key, value = _get_qkv_projections(attn, hidden_states, None)  # type: ignore[arg-type]
        query, key = attn.norm_q(query), attn.norm_k(key)
        query, key, value = (x.unflatten(2, (attn.heads, -1)) for x in (query, key, value))
        if rotary_emb is not None:
            query, key = _rope(query, *rotary_emb), _rope(key, *rotary_emb)
        return query, key, value

    def __call__(
        self,
        attn: Any,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        rotary_emb: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        ctx = self.context
        if encoder_hidden_states is not None:
            return super().__call__(attn, hidden_states, encoder_hidden_states, attention_mask, rotary_emb)
        self.require_hook()
        ops, budgets = self.head_routes(attn.heads)
        if ctx.record is None and all(o == DENSE for o in ops):
            return super().__call__(attn, hidden_states, encoder_hidden_states, attention_mask, rotary_emb)
        self.current_layout(hidden_states.shape[1])
        query, key, value = self.qkv(attn, hidden_states, rotary_emb)
        self.record(query, key, value)
        out = torch.empty_like(query)
        dense = [h for h, o in enumerate(ops) if o == DENSE]
        routed = [h for h, o in enumerate(ops) if o != DENSE]
        if dense:
            q, k, v = (self.take_heads(x, dense) for x in (query, key, value))
            o = dispatch_attention_fn(
                q,
                k,
                v,
                attn_mask=attention_mask,
                dropout_p=0.0,
                is_causal=False,
                backend=self._attention_backend,
                parallel_config=None,
            )
            out = self.put_heads(out, dense, o)
        if routed:
            out = self.put_heads(out, routed, self.run_routed(query, key, value, routed, ops, budgets))
        hidden_states = out.flatten(2, 3).type_as(query)
        return attn.to_out[1](attn.to_out[0](hidden_states))


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Wan's interleaved rotary embedding (``apply_rotary_emb`` inside ``WanAttnProcessor.__call__``)."""
    x1, x2 = x.unflatten(-1, (-1, 2)).unbind(-1)
    c, s = cos[..., 0::2], sin[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x1 * c - x2 * s
    out[..., 1::2] = x1 * s + x2 * c
    return out.type_as(x)
