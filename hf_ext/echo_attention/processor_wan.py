"""``EchoWanAttnProcessor``: EchoAttention on diffusers' ``WanTransformer3DModel`` self-attention (``attn1``).

EchoAttention (reconstructed; not verified against the paper). The processor mixes the shared per-head routing
(:class:`~hf_ext.echo_attention.routed.RoutedAttention`) into ``WanAttnProcessor``; dense-routed
heads still call ``dispatch_attention_fn`` with the user's backend.
"""

from __future__ import annotations

from typing import Any

import torch
from diffusers.models.attention_dispatch import dispatch_attention_fn
from diffusers.models.embeddings import apply_rotary_emb
from diffusers.models.transformers.transformer_wan import WanAttnProcessor, _get_qkv_projections

from hf_ext._registry import paper
from hf_ext.echo_attention.routed import DENSE, RoutedAttention


class EchoWanAttnProcessor(RoutedAttention, WanAttnProcessor):
    """Wan self-attention served by dense, Sparse and Echo operators per head.

    EchoAttention (reconstructed; not verified against the paper). Query, key and value come from the
    module's own parts: diffusers' ``_get_qkv_projections`` (fused or not), ``attn.norm_q``/``attn.norm_k``
    and diffusers' ``apply_rotary_emb`` on Wan's ``(cos, sin)`` pair; the output goes through
    ``attn.to_out``. Only the attention in between is ours: each head is routed (:class:`RoutedAttention`),
    dense heads call ``dispatch_attention_fn`` (the user's backend applies), sparse and echo heads run
    :func:`~hf_ext.echo_attention.core.sparse_echo_attention`. A call where every head is dense
    (``mode="dense"``, a dense layer, or a step before ``dense_first_steps``) is the stock processor exactly.

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
        """Query, key and value ``[B, S, H, D]`` from the module's projections, q/k norms and Wan's RoPE.

        ``rotary_emb`` is Wan's ``(cos, sin)``, each ``[1, S, 1, D]`` with every frequency repeated for the
        two members of a channel pair, the layout diffusers' ``apply_rotary_emb`` (``use_real``, pairs on
        the last axis) rotates.
        """
        query, key, value = _get_qkv_projections(attn, hidden_states, None)  # type: ignore[arg-type]
        query, key = attn.norm_q(query), attn.norm_k(key)
        query, key, value = (x.unflatten(2, (attn.heads, -1)) for x in (query, key, value))
        if rotary_emb is not None:
            freqs: Any = tuple(f[0, :, 0] for f in rotary_emb)  # [S, D] each; diffusers types it a 1-tuple
            query, key = (apply_rotary_emb(x, freqs, sequence_dim=1) for x in (query, key))
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
