"""EchoAttention on diffusers' ``CogVideoXTransformer3DModel`` (joint text-video self-attention).

EchoAttention (reconstructed; not verified against the paper). CogVideoX concatenates ``[text T, video S]``
tokens and runs one self-attention over them. :class:`EchoCogVideoXAttnProcessor` keeps every text row and
column dense and serves the video-query x video-key part of sparse/echo heads with the shared per-head routing
(:class:`~hf_ext.echo_attention.routed.RoutedAttention`), the video indices offset by ``T``.
:class:`CogVideoXContext` reads the ``[B, F, C, H, W]`` latents in the transformer's pre-hook.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from diffusers.models.attention_processor import CogVideoXAttnProcessor2_0

from hf_ext._registry import paper
from hf_ext.echo_attention.core import dense_partial
from hf_ext.echo_attention.routed import DENSE, EchoContext, RoutedAttention, patches

logger = logging.getLogger(__name__)


@dataclass
class CogVideoXContext(EchoContext):
    """:class:`EchoContext` whose pre-hook reads CogVideoX's ``[B, F, C, H, W]`` latents (``patch_size_t``
    aware)
    and the ``timestep`` (third positional argument of ``CogVideoXTransformer3DModel.forward``)."""

    timestep_position: ClassVar[int] = 2

    def frames_and_tokens(self, module: Any, x: torch.Tensor) -> tuple[int, int]:
        """``(F, P)`` of ``x`` ``[B, F, C, H, W]`` under ``config.patch_size`` and ``config.patch_size_t``."""
        p, pt = module.config.patch_size, module.config.patch_size_t
        frames = x.shape[1] if pt is None else patches(x, 1, pt)
        return frames, patches(x, 3, p) * patches(x, 4, p)


class EchoCogVideoXAttnProcessor(RoutedAttention, CogVideoXAttnProcessor2_0):
    """EchoAttention (reconstructed; not verified against the paper) for CogVideoX joint text-video attention:
    dense, Sparse and Echo operators per head, text rows and columns kept dense.

    Query, key and value of the joint sequence ``[text T, video S]`` come from the module's own
    ``to_q``/``to_k``/``to_v``, ``norm_q``/``norm_k`` and diffusers' ``apply_rotary_emb`` (:meth:`qkv`), the
    output goes through ``attn.to_out``; only the attention in between is ours. Text queries and dense-routed
    heads attend densely to all keys (SDPA). For the video queries of sparse/echo heads, the part over the
    ``T`` text keys is an exact dense partial (output and fp32 log-sum-exp) merged by the LSE rule into the
    block-sparse video-video result before the echo terms [reconstructed]; budgets and FLOP fractions refer
    to the video-video part. A call where every head is dense is the stock processor exactly; an
    ``attention_mask`` runs the stock processor (with a one-time warning).

    Args:
        config: The method settings.
        layer: Transformer block index.
        context: The shared :class:`CogVideoXContext` (filled by the pre-hook).
        params: The handle's ``EchoParams`` (theta and routes), shared by all layers.

    Example:
        >>> from hf_ext import EchoAttentionConfig, apply_echo_attention
        >>> from hf_ext.testing import tiny_cogvideox_transformer
        >>> dit = tiny_cogvideox_transformer()
        >>> handle = apply_echo_attention(dit, EchoAttentionConfig(block_size=16, dense_layers=()))
        >>> type(dit.attn_processors["transformer_blocks.0.attn1.processor"]).__name__
        'EchoCogVideoXAttnProcessor'
        >>> handle.remove()
    """

    _paper = paper("echo_attention")
    _warned = False

    def qkv(
        self,
        attn: Any,
        hidden_states: torch.Tensor,
        text_len: int,
        image_rotary_emb: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Query, key and value ``[B, H, T+S, D]`` of the joint sequence from the module's own projections.

        ``attn.to_q``/``to_k``/``to_v`` and the optional ``attn.norm_q``/``norm_k`` act on all tokens;
        diffusers' ``apply_rotary_emb`` rotates the video tokens (positions ``text_len:``) only, since
        ``image_rotary_emb`` holds one ``(cos, sin)`` row per video token.
        """
        from diffusers.models.embeddings import apply_rotary_emb

        def heads_first(x: torch.Tensor) -> torch.Tensor:
            return x.unflatten(-1, (attn.heads, -1)).transpose(1, 2)

        query, key, value = (heads_first(proj(hidden_states)) for proj in (attn.to_q, attn.to_k, attn.to_v))
        query, key = (
            x if norm is None else norm(x) for x, norm in ((query, attn.norm_q), (key, attn.norm_k))
        )
        if image_rotary_emb is None:
            return query, key, value
        rope: Any = image_rotary_emb  # diffusers annotates the (cos, sin) pair as a 1-tuple

        def with_rope(x: torch.Tensor) -> torch.Tensor:
            video: Any = apply_rotary_emb(x[:, :, text_len:], rope)  # annotated as a pair, returns one tensor
            return torch.cat([x[:, :, :text_len], video], dim=2)

        return with_rope(query), with_rope(key), value

    def __call__(  # type: ignore[override]  # the stock processor returns (video, text) but is typed Tensor
        self,
        attn: Any,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        image_rotary_emb: Any = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        ctx = self.context
        self.require_hook()
        stock: tuple[Any, ...] = (
            attn,
            hidden_states,
            encoder_hidden_states,
            attention_mask,
            image_rotary_emb,
        )
        if attention_mask is not None or attn.is_cross_attention:
            if not self._warned:
                logger.warning(
                    "attention_mask/cross-attention is not supported by EchoAttention; running dense."
                )
                self._warned = True
            return self._stock(*stock)
        ops, budgets = self.head_routes(attn.heads)
        if ctx.record is None and all(o == DENSE for o in ops):
            return self._stock(*stock)
        self.current_layout(hidden_states.shape[1])
        text_len = encoder_hidden_states.shape[1]
        joint = torch.cat([encoder_hidden_states, hidden_states], dim=1)
        query, key, value = self.qkv(attn, joint, text_len, image_rotary_emb)
        video = [t[:, :, text_len:] for t in (query, key, value)]
        self.record(
            *(t.transpose(1, 2) for t in video),
            key[:, :, :text_len].transpose(1, 2),
            value[:, :, :text_len].transpose(1, 2),
        )
        out = torch.empty_like(query)
        dense = [h for h, o in enumerate(ops) if o == DENSE]
        routed = [h for h, o in enumerate(ops) if o != DENSE]
        if dense:
            q, k, v = (self.take_heads(x, dense, dim=1) for x in (query, key, value))
            out = self.put_heads(out, dense, F.scaled_dot_product_attention(q, k, v), dim=1)
        if routed:
            q, k, v = (self.take_heads(x, routed, dim=1) for x in (query, key, value))
            out_t = F.scaled_dot_product_attention(q[:, :, :text_len], k, v)
            extra = dense_partial(q[:, :, text_len:], k[:, :, :text_len], v[:, :, :text_len])
            vq, vk, vv = (t.transpose(1, 2) for t in video)
            out_v = self.run_routed(vq, vk, vv, routed, ops, budgets, extra=extra).transpose(1, 2)
            out = self.put_heads(out, routed, torch.cat([out_t, out_v.to(out_t.dtype)], 2), dim=1)
        out = attn.to_out[1](attn.to_out[0](out.transpose(1, 2).flatten(2)))
        return out[:, text_len:], out[:, :text_len]

    def _stock(self, *args: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """The stock ``CogVideoXAttnProcessor2_0.__call__`` (returns ``(video, text)`` hidden states)."""
        out: Any = CogVideoXAttnProcessor2_0.__call__(self, *args)
        return out  # type: ignore[no-any-return]
