"""Sparse video-video attention for diffusers' ``CogVideoXTransformer3DModel`` (joint text-video attention).

EchoAttention (reconstructed; not verified against the paper), Sparse operator only. CogVideoX concatenates
``[text, video]`` tokens and runs one self-attention over them. :class:`SparseCogVideoXAttnProcessor` keeps
every text query and every text key dense, and serves only the video-query x video-key part with the
block-sparse tiles chosen by :func:`~hf_ext.diffusers.echo_attention.core.allocate` (``echo_frac = 0``).
The two video-query parts (dense over text keys, sparse over video keys) are merged exactly through their
log-sum-exps. A call that keeps every tile (``mode="dense"``, a dense layer, a step before
``dense_first_steps``, or ``budget=1``) is the stock ``CogVideoXAttnProcessor2_0`` exactly.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from diffusers.models.attention_processor import CogVideoXAttnProcessor2_0

from hf_ext._registry import paper
from hf_ext.diffusers.echo_attention.config import EchoAttentionConfig
from hf_ext.diffusers.echo_attention.core import Layout, allocate, tile_mass
from hf_ext.diffusers.echo_attention.processors import StepContext
from hf_ext.kernels.block_sparse_attention import block_sparse_attention

logger = logging.getLogger(__name__)

SUPPORTED_COGVIDEOX = ("CogVideoXTransformer3DModel",)


@dataclass
class CogVideoXContext(StepContext):
    """:class:`StepContext` whose pre-hook reads CogVideoX's ``[B, F, C, H, W]`` latents (``patch_size_t`` aware)."""

    def pre_hook(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """``register_forward_pre_hook(with_kwargs=True)`` callback; ``hidden_states`` is ``[B, F, C, H, W]``."""
        x = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        p, pt = module.config.patch_size, module.config.patch_size_t
        frames = x.shape[1] if pt is None else x.shape[1] // pt
        self.layout = Layout(frames, (x.shape[3] // p) * (x.shape[4] // p), self.block)
        self.observe_timestep(kwargs.get("timestep", args[2] if len(args) > 2 else None))


class SparseCogVideoXAttnProcessor(CogVideoXAttnProcessor2_0):
    """CogVideoX joint attention with dense text rows/columns and a block-sparse video-video part.

    EchoAttention (reconstructed; not verified against the paper). Re-implements the projections, q/k norms
    and RoPE of ``CogVideoXAttnProcessor2_0.__call__`` (diffusers 0.42.1). Text queries attend densely to all
    keys (SDPA); video queries attend densely to all text keys and to the video key tiles selected by the
    pooled estimate under ``config.budget`` (fraction of the video-video dense FLOPs, estimate included).

    Args:
        config: Settings; ``mode`` must be ``"sparse"`` or ``"dense"``.
        layer: Transformer block index.
        context: The shared :class:`CogVideoXContext` (filled by the pre-hook).
    """

    _paper = paper("echo_attention")

    def __init__(self, config: EchoAttentionConfig, layer: int, context: CogVideoXContext) -> None:
        super().__init__()
        self.config = config
        self.layer = layer
        self.context = context
        self.last_flops: torch.Tensor | None = None
        self._warned = False

    def is_dense(self) -> bool:
        """Whether this call keeps every tile (then the stock processor runs)."""
        cfg = self.config
        return (
            cfg.mode == "dense"
            or cfg.budget >= 1
            or self.layer in cfg.dense_layers
            or self.context.step < cfg.dense_first_steps
        )

    def __call__(
        self,
        attn: Any,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        image_rotary_emb: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.is_dense():
            return super().__call__(
                attn, hidden_states, encoder_hidden_states, attention_mask, image_rotary_emb
            )
        if attention_mask is not None or attn.is_cross_attention:
            if not self._warned:
                logger.warning(
                    "attention_mask/cross-attention is not supported by the sparse path; running dense."
                )
                self._warned = True
            return super().__call__(
                attn, hidden_states, encoder_hidden_states, attention_mask, image_rotary_emb
            )
        return self.sparse_call(
            attn, hidden_states, encoder_hidden_states, image_rotary_emb, self.config.budget
        )

    def qkv(
        self,
        attn: Any,
        hidden_states: torch.Tensor,
        text_len: int,
        image_rotary_emb: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Projections, q/k norms and RoPE (video tokens only) as in the stock processor: ``[B, H, T+S, D]``."""
        b = hidden_states.shape[0]
        query, key, value = attn.to_q(hidden_states), attn.to_k(hidden_states), attn.to_v(hidden_states)
        query, key, value = (
            x.view(b, -1, attn.heads, x.shape[-1] // attn.heads).transpose(1, 2) for x in (query, key, value)
        )
        if attn.norm_q is not None:
            query = attn.norm_q(query)
        if attn.norm_k is not None:
            key = attn.norm_k(key)
        if image_rotary_emb is not None:
            from diffusers.models.embeddings import apply_rotary_emb

            query[:, :, text_len:] = apply_rotary_emb(query[:, :, text_len:], image_rotary_emb)
            key[:, :, text_len:] = apply_rotary_emb(key[:, :, text_len:], image_rotary_emb)
        return query, key, value

    def sparse_call(
        self,
        attn: Any,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        image_rotary_emb: tuple[torch.Tensor, torch.Tensor] | None,
        budget: float,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The sparse path at ``budget`` (``>= 1`` keeps every video tile; equals the stock output to rounding)."""
        layout = self.context.layout
        if layout is None:
            raise RuntimeError(
                "SparseCogVideoXAttnProcessor was called without the layout pre-hook; install it with "
                "`apply_cogvideox_sparse_attention(transformer, config)` rather than `set_attn_processor` alone."
            )
        text_len = encoder_hidden_states.shape[1]
        if layout.seq_len != hidden_states.shape[1]:
            raise ValueError(
                f"layout {layout} does not match the {hidden_states.shape[1]} video tokens of this call."
            )
        x = torch.cat([encoder_hidden_states, hidden_states], dim=1)
        b, n, _ = x.shape
        query, key, value = self.qkv(attn, x, text_len, image_rotary_emb)
        d = query.shape[-1]
        scale = d**-0.5
        # Text queries: dense over every key.
        out_t = F.scaled_dot_product_attention(
            query[:, :, :text_len], key, value, dropout_p=0.0, is_causal=False
        )
        # Video queries x text keys: dense, with their log-sum-exp.
        qv, kv, vv = query[:, :, text_len:], key[:, :, text_len:], value[:, :, text_len:]
        logits = torch.einsum("bhsd,bhtd->bhst", qv.float(), key[:, :, :text_len].float()) * scale
        lse_vt = torch.logsumexp(logits, dim=-1)
        out_vt = torch.einsum(
            "bhst,bhtd->bhsd", (logits - lse_vt[..., None]).exp(), value[:, :, :text_len].float()
        )
        # Video queries x video keys: block-sparse over the selected tiles.
        qp, kp, vp = layout.pad(qv), layout.pad(kv), layout.pad(vv)
        p_hat = tile_mass(qp, kp, layout).flatten(0, 1)
        frac = torch.full((b * attn.heads,), float(budget), device=x.device)
        alloc = allocate(p_hat, layout, d, frac, torch.zeros_like(frac), self.config.max_echo_distance)
        self.last_flops = alloc.flops.detach()
        rows = (alloc.lut.view(b, attn.heads, *alloc.lut.shape[1:]), alloc.lut_count.view(b, attn.heads, -1))
        out_vv, lse_vv = block_sparse_attention(
            qp, kp, vp, *rows, layout.block, scale, layout.valid(x.device), backend=self.config.backend
        )
        out_vv, lse_vv = layout.unpad(out_vv).float(), layout.unpad(lse_vv)
        # Exact merge of the two softmax parts (text keys are always present, so lse is finite).
        lse = torch.logaddexp(lse_vv, lse_vt)
        out_v = out_vv * (lse_vv - lse).exp()[..., None] + out_vt * (lse_vt - lse).exp()[..., None]
        out = torch.cat([out_t, out_v.to(out_t.dtype)], dim=2)
        out = out.transpose(1, 2).reshape(b, n, attn.heads * d)
        out = attn.to_out[1](attn.to_out[0](out))
        encoder_out, out = out.split([text_len, n - text_len], dim=1)
        return out, encoder_out


class CogVideoXSparseHandle:
    """What :func:`apply_cogvideox_sparse_attention` returns; :meth:`remove` restores the stock processors.

    Attributes:
        transformer: The patched transformer.
        config: The settings.
        context: Layout and step state filled by the pre-hook.
        removed: Whether :meth:`remove` ran.
    """

    _paper = paper("echo_attention")

    def __init__(
        self,
        transformer: Any,
        config: EchoAttentionConfig,
        context: CogVideoXContext,
        original: dict[str, Any],
        hook: Any,
    ) -> None:
        self.transformer, self.config, self.context = transformer, config, context
        self._original, self._hook = original, hook
        self.removed = False

    @property
    def processors(self) -> dict[str, SparseCogVideoXAttnProcessor]:
        """The installed processors by name."""
        return {
            k: v
            for k, v in self.transformer.attn_processors.items()
            if isinstance(v, SparseCogVideoXAttnProcessor)
        }

    def remove(self) -> None:
        """Restore the original processor objects and drop the pre-hook (idempotent)."""
        if self.removed:
            return
        self.transformer.set_attn_processor(dict(self._original))
        self._hook.remove()
        self.removed = True


def apply_cogvideox_sparse_attention(transformer: Any, config: EchoAttentionConfig) -> CogVideoXSparseHandle:
    """Install :class:`SparseCogVideoXAttnProcessor` on every ``attn1`` of a ``CogVideoXTransformer3DModel``.

    EchoAttention (reconstructed; not verified against the paper), Sparse operator only; text stays dense.

    Args:
        transformer: A diffusers ``CogVideoXTransformer3DModel``.
        config: Settings with ``mode`` ``"sparse"`` or ``"dense"`` (``"echo"`` is not implemented here).

    Returns:
        A :class:`CogVideoXSparseHandle`; ``handle.remove()`` restores the original processors exactly.

    Raises:
        TypeError: not a ``CogVideoXTransformer3DModel``, a config that is not an ``EchoAttentionConfig``, or an
            ``attn1`` processor that is not a ``CogVideoXAttnProcessor2_0``.
        ValueError: ``mode="echo"``.

    Example:
        >>> from diffusers import CogVideoXTransformer3DModel
        >>> dit = CogVideoXTransformer3DModel(num_attention_heads=2, attention_head_dim=16, in_channels=4,
        ...     out_channels=4, text_embed_dim=32, num_layers=1, sample_width=8, sample_height=8,
        ...     sample_frames=9, time_embed_dim=16, max_text_seq_length=8)
        >>> h = apply_cogvideox_sparse_attention(dit, EchoAttentionConfig(mode="sparse", block_size=16))
        >>> type(dit.attn_processors["transformer_blocks.0.attn1.processor"]).__name__
        'SparseCogVideoXAttnProcessor'
        >>> h.remove()
    """
    name = type(transformer).__name__
    if name not in SUPPORTED_COGVIDEOX:
        raise TypeError(f"apply_cogvideox_sparse_attention supports {SUPPORTED_COGVIDEOX}, got {name}.")
    if not isinstance(config, EchoAttentionConfig):
        raise TypeError(f"`config` must be an EchoAttentionConfig, got {type(config).__name__}.")
    if config.mode == "echo":
        raise ValueError(
            "The CogVideoX adapter implements the Sparse operator only: use "
            "EchoAttentionConfig(mode='sparse', ...) or mode='dense' (mode='echo' is not supported here)."
        )
    original = dict(transformer.attn_processors)
    context = CogVideoXContext(block=config.block_size)
    new: dict[str, Any] = {}
    for key, proc in original.items():
        parts = key.split(".")
        if len(parts) == 4 and parts[0] == "transformer_blocks" and parts[2] == "attn1":
            if type(proc) is not CogVideoXAttnProcessor2_0:
                raise TypeError(f"{key} is a {type(proc).__name__}, expected CogVideoXAttnProcessor2_0.")
            new[key] = SparseCogVideoXAttnProcessor(config, int(parts[1]), context)
        else:
            new[key] = proc
    transformer.set_attn_processor(new)
    hook = transformer.register_forward_pre_hook(context.pre_hook, with_kwargs=True)
    return CogVideoXSparseHandle(transformer, config, context, original, hook)
