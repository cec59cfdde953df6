"""The diffusers adapter: an attention processor for Wan self-attention plus the layout pre-hook.

EchoAttention (reconstructed; not verified against the paper). ``EchoWanAttnProcessor`` subclasses
``WanAttnProcessor`` and is installed on ``attn1`` only; dense-routed heads still call
``dispatch_attention_fn`` with the user's backend. The processor cannot see the frame layout, so a forward
pre-hook on the transformer (:class:`EchoContext`) records ``(F, P)`` and the denoising-step index.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import torch
from diffusers.models.attention_dispatch import dispatch_attention_fn
from diffusers.models.transformers.transformer_wan import WanAttnProcessor, _get_qkv_projections

from hf_ext._registry import paper
from hf_ext.diffusers.echo_attention.config import EchoAttentionConfig
from hf_ext.diffusers.echo_attention.core import Allocation, EchoParams, Layout, sparse_echo_attention

logger = logging.getLogger(__name__)

DENSE, SPARSE, ECHO = 0, 1, 2
OPERATORS = ("dense", "sparse", "echo")


@dataclass
class StepContext:
    """Layout and denoising-step state a transformer's pre-hook shares with its processors.

    Attributes:
        block: Tile size ``b``.
        layout: ``(F, P, b)`` of the current call (video tokens only), set by the hook.
        step: Denoising-step index: the count of distinct timesteps in the current run (CFG's two calls at one
            timestep share it; a larger timestep than the last starts a new run).
    """

    block: int
    layout: Layout | None = None
    step: int = 0
    last_t: float | None = None

    def observe_timestep(self, timestep: Any) -> None:
        """Advance ``step`` when ``timestep`` (a scalar or batch tensor, or ``None``) moves to a new value."""
        if timestep is None:
            return
        t = float(torch.as_tensor(timestep).flatten()[0])
        if self.last_t is None or t > self.last_t:
            self.step = 0
        elif t < self.last_t:
            self.step += 1
        self.last_t = t


@dataclass
class EchoContext(StepContext):
    """State shared by the pre-hook and the processors of one transformer.

    Attributes:
        layout, step: see :class:`StepContext`.
        calibrating: Ignore the dense schedule (calibration evaluates the operators at every step).
        force_dense: Run every head densely (recording the dense reference).
        record: When not ``None``, processors append ``(q, k, v)`` ``[B, S, H, D]`` per layer here.
    """

    calibrating: bool = False
    force_dense: bool = False
    record: dict[int, list[tuple[torch.Tensor, ...]]] | None = None
    last_alloc: dict[int, tuple[list[int], Allocation]] = field(default_factory=dict)

    def pre_hook(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """``register_forward_pre_hook(with_kwargs=True)`` callback on the transformer."""
        x = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        pt, ph, pw = module.config.patch_size
        self.layout = Layout(x.shape[2] // pt, (x.shape[3] // ph) * (x.shape[4] // pw), self.block)
        self.observe_timestep(kwargs.get("timestep", args[1] if len(args) > 1 else None))


class EchoWanAttnProcessor(WanAttnProcessor):
    """Wan self-attention served by dense, Sparse and Echo operators per head.

    EchoAttention (reconstructed; not verified against the paper). Reuses the module's own projections,
    q/k RMS norms and RoPE (re-implemented from ``WanAttnProcessor.__call__``, diffusers 0.42.1), then routes
    each head: dense heads call ``dispatch_attention_fn`` (the user's backend applies), sparse and echo heads
    run :func:`~hf_ext.diffusers.echo_attention.core.sparse_echo_attention`. A call where every head is dense
    (``mode="dense"``, a dense layer, or a step before ``dense_first_steps``) is the stock processor exactly.

    Args:
        config: The method settings.
        layer: Transformer block index.
        context: The shared :class:`EchoContext` (filled by the pre-hook).
        params: The handle's ``EchoParams`` (theta and routes), shared by all layers.

    Example:
        >>> from hf_ext.diffusers import EchoAttentionConfig, apply_echo_attention
        >>> from hf_ext.testing import tiny_wan_transformer
        >>> dit = tiny_wan_transformer()
        >>> handle = apply_echo_attention(dit, EchoAttentionConfig(block_size=16, dense_layers=(), dense_first_steps=0))
        >>> type(dit.attn_processors["blocks.0.attn1.processor"]).__name__
        'EchoWanAttnProcessor'
        >>> handle.remove()
    """

    _paper = paper("echo_attention")

    def __init__(
        self, config: EchoAttentionConfig, layer: int, context: EchoContext, params: EchoParams
    ) -> None:
        super().__init__()
        self.config = config
        self.layer = layer
        self.context = context
        self.params = params

    def head_routes(self, heads: int) -> tuple[list[int], list[float]]:
        """Per-head (operator code, budget) for this call: the schedule, then calibrated routes, then ``mode``."""
        cfg, ctx = self.config, self.context
        scheduled = ctx.step < cfg.dense_first_steps and not ctx.calibrating
        if ctx.force_dense or cfg.mode == "dense" or self.layer in cfg.dense_layers or scheduled:
            return [DENSE] * heads, [1.0] * heads
        routes = self.params.routes(self.layer)
        if routes is not None:
            return routes
        op = SPARSE if cfg.mode == "sparse" else ECHO
        return [op] * heads, [cfg.budget] * heads

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
        if ctx.layout is None:
            raise RuntimeError(
                "EchoWanAttnProcessor was called without the layout pre-hook; install it with "
                "`apply_echo_attention(transformer, config)` rather than `set_attn_processor` alone."
            )
        ops, budgets = self.head_routes(attn.heads)
        if ctx.record is None and all(o == DENSE for o in ops):
            return super().__call__(attn, hidden_states, encoder_hidden_states, attention_mask, rotary_emb)
        layout = ctx.layout
        if layout.seq_len != hidden_states.shape[1]:
            raise ValueError(f"layout {layout} does not match the sequence length {hidden_states.shape[1]}.")
        self.params.check_layout(layout)
        query, key, value = self.qkv(attn, hidden_states, rotary_emb)
        if ctx.record is not None:
            ctx.record.setdefault(self.layer, []).append((query.detach(), key.detach(), value.detach()))
        out = torch.empty_like(query)
        dense = [h for h, o in enumerate(ops) if o == DENSE]
        routed = [h for h, o in enumerate(ops) if o != DENSE]
        if dense:
            out[:, :, dense] = dispatch_attention_fn(
                query[:, :, dense], key[:, :, dense], value[:, :, dense], attn_mask=attention_mask, dropout_p=0.0,
                is_causal=False, backend=self._attention_backend, parallel_config=None,
            ).to(out.dtype)  # fmt: skip
        if routed:
            out[:, :, routed] = self.run_routed(query, key, value, routed, ops, budgets).to(out.dtype)
        hidden_states = out.flatten(2, 3).type_as(query)
        return attn.to_out[1](attn.to_out[0](hidden_states))

    def run_routed(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        heads: list[int],
        ops: list[int],
        budgets: list[float],
    ) -> torch.Tensor:
        """Sparse/echo heads ``heads`` of ``[B, S, H, D]`` inputs -> ``[B, S, len(heads), D]``."""
        cfg, layout = self.config, self.context.layout
        assert layout is not None
        dev = query.device
        bud = torch.tensor([budgets[h] for h in heads], device=dev)
        is_echo = torch.tensor([ops[h] == ECHO for h in heads], device=dev)
        exact = torch.where(is_echo, bud * (1 - cfg.echo_share), bud)
        echo = torch.where(is_echo, bud * cfg.echo_share, torch.zeros_like(bud))
        theta = self.params.theta(self.layer, heads, layout, query.shape[-1], dev)
        q, k, v = (x[:, :, heads].transpose(1, 2) for x in (query, key, value))
        backend = "torch" if torch.is_grad_enabled() and theta[0].requires_grad else cfg.backend  # stage 3
        out, alloc = sparse_echo_attention(
            q, k, v, layout, exact, echo, theta, cfg.max_echo_distance, backend
        )
        self.context.last_alloc[self.layer] = (heads, alloc)
        return out.transpose(1, 2)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Wan's interleaved rotary embedding (``apply_rotary_emb`` inside ``WanAttnProcessor.__call__``)."""
    x1, x2 = x.unflatten(-1, (-1, 2)).unbind(-1)
    c, s = cos[..., 0::2], sin[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x1 * c - x2 * s
    out[..., 1::2] = x1 * s + x2 * c
    return out.type_as(x)
