"""The diffusers adapter: per-head routing shared by the hosts, the Wan processor and the layout pre-hook.

EchoAttention (reconstructed; not verified against the paper). :class:`RoutedAttention` holds the routing
shared by every host processor; ``EchoWanAttnProcessor`` mixes it into ``WanAttnProcessor`` and is installed on
``attn1`` only; dense-routed heads still call ``dispatch_attention_fn`` with the user's backend. The processor
cannot see the frame layout, so a forward pre-hook on the transformer (:class:`EchoContext`) records ``(F, P)``
and the denoising-step index. The CogVideoX processor lives in ``cogvideox.py``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import torch
from diffusers.models.attention_dispatch import dispatch_attention_fn
from diffusers.models.transformers.transformer_wan import WanAttnProcessor, _get_qkv_projections

from hf_ext._registry import paper
from hf_ext.diffusers.echo_attention.config import EchoAttentionConfig
from hf_ext.diffusers.echo_attention.core import EchoParams, Layout, sparse_echo_attention, split_budget

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


class AttnRecord(NamedTuple):
    """One recorded self-attention call (calibration): video ``q, k, v`` ``[B, S, H, D]`` after norms and RoPE.

    Joint text-video models also record the text keys/values ``text_k, text_v`` ``[B, T, H, D]`` that every video
    query attends densely; ``None`` for video-only models (Wan).
    """

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    text_k: torch.Tensor | None = None
    text_v: torch.Tensor | None = None


@dataclass
class EchoContext(StepContext):
    """State shared by the pre-hook and the processors of one transformer (Wan layout: ``[B, C, F, H, W]``).

    Attributes:
        layout, step: see :class:`StepContext`.
        calibrating: Ignore the dense schedule (calibration evaluates the operators at every step).
        force_dense: Run every head densely (recording the dense reference).
        record: When not ``None``, processors append an :class:`AttnRecord` per layer here.
    """

    calibrating: bool = False
    force_dense: bool = False
    record: dict[int, list[AttnRecord]] | None = None

    timestep_position: ClassVar[int] = 1  # positional index of ``timestep`` in the transformer's forward

    def frames_and_tokens(self, module: Any, x: torch.Tensor) -> tuple[int, int]:
        """``(F, P)`` of the latents ``x`` ``[B, C, F, H, W]`` under ``config.patch_size`` ``(p_t, p_h, p_w)``."""
        pt, ph, pw = module.config.patch_size
        return x.shape[2] // pt, (x.shape[3] // ph) * (x.shape[4] // pw)

    def pre_hook(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """``register_forward_pre_hook(with_kwargs=True)`` callback on the transformer."""
        x = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        self.layout = Layout(*self.frames_and_tokens(module, x), self.block)
        pos = self.timestep_position
        self.observe_timestep(kwargs.get("timestep", args[pos] if len(args) > pos else None))


class RoutedAttention:
    """EchoAttention (reconstructed; not verified against the paper): per-head routing shared by the host
    processors (mixed in before the host's own processor class).

    Holds the settings, layer index, shared
    context and parameters; decides each head's operator (:meth:`head_routes`), records calibration inputs
    (:meth:`record`) and runs the sparse/echo heads (:meth:`run_routed`). The host subclass re-implements only
    its projection path and the dense heads.

    Args:
        config: The method settings.
        layer: Transformer block index.
        context: The shared :class:`EchoContext` (filled by the pre-hook).
        params: The handle's ``EchoParams`` (theta and routes), shared by all layers.
    """

    def __init__(
        self, config: EchoAttentionConfig, layer: int, context: EchoContext, params: EchoParams
    ) -> None:
        super().__init__()
        self.config = config
        self.layer = layer
        self.context = context
        self.params = params

    def require_hook(self) -> Layout:
        """The layout the pre-hook recorded; ``RuntimeError`` when the processor runs without the hook."""
        if self.context.layout is None:
            raise RuntimeError(
                f"{type(self).__name__} was called without the layout pre-hook; install it with "
                "`apply_echo_attention(transformer, config)` rather than `set_attn_processor` alone."
            )
        return self.context.layout

    def current_layout(self, seq_len: int) -> Layout:
        """The hook's layout for a call with ``seq_len`` video tokens, checked against the calibration layout."""
        layout = self.require_hook()
        if layout.seq_len != seq_len:
            raise ValueError(f"layout {layout} does not match the {seq_len} video tokens of this call.")
        self.params.check_layout(layout)
        return layout

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

    def record(self, *tensors: torch.Tensor) -> None:
        """Append an :class:`AttnRecord` of ``tensors`` (detached) when the context is recording."""
        if self.context.record is not None:
            rec = AttnRecord(*(x.detach() for x in tensors))
            self.context.record.setdefault(self.layer, []).append(rec)

    def run_routed(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        heads: list[int],
        ops: list[int],
        budgets: list[float],
        extra: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Sparse/echo heads ``heads`` of video ``[B, S, H, D]`` inputs -> ``[B, S, len(heads), D]``.

        ``extra`` (joint models): the ``heads``' dense partial over the text keys, ``(out [B, h, S, D],
        lse [B, h, S])``, merged exactly by :func:`~hf_ext.diffusers.echo_attention.core.sparse_echo_attention`.
        """
        cfg, layout = self.config, self.context.layout
        assert layout is not None
        dev = query.device
        bud = torch.tensor([budgets[h] for h in heads], device=dev)
        is_echo = torch.tensor([ops[h] == ECHO for h in heads], device=dev)
        exact, echo = split_budget(bud, is_echo, cfg.echo_share)
        theta = self.params.theta(self.layer, heads, layout, query.shape[-1], dev)
        q, k, v = (x[:, :, heads].transpose(1, 2) for x in (query, key, value))
        backend = "torch" if torch.is_grad_enabled() and theta[0].requires_grad else cfg.backend  # stage 3
        out, alloc = sparse_echo_attention(
            q, k, v, layout, exact, echo, theta, cfg.max_echo_distance, backend, extra=extra
        )
        self.params.last_alloc[self.layer] = (heads, alloc)
        return out.transpose(1, 2)


class EchoWanAttnProcessor(RoutedAttention, WanAttnProcessor):
    """Wan self-attention served by dense, Sparse and Echo operators per head.

    EchoAttention (reconstructed; not verified against the paper). Reuses the module's own projections,
    q/k RMS norms and RoPE (re-implemented from ``WanAttnProcessor.__call__``, diffusers 0.42.1), then routes
    each head (:class:`RoutedAttention`): dense heads call ``dispatch_attention_fn`` (the user's backend
    applies), sparse and echo heads run :func:`~hf_ext.diffusers.echo_attention.core.sparse_echo_attention`.
    A call where every head is dense (``mode="dense"``, a dense layer, or a step before ``dense_first_steps``)
    is the stock processor exactly.

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
            out[:, :, dense] = dispatch_attention_fn(
                query[:, :, dense], key[:, :, dense], value[:, :, dense], attn_mask=attention_mask, dropout_p=0.0,
                is_causal=False, backend=self._attention_backend, parallel_config=None,
            ).to(out.dtype)  # fmt: skip
        if routed:
            out[:, :, routed] = self.run_routed(query, key, value, routed, ops, budgets).to(out.dtype)
        hidden_states = out.flatten(2, 3).type_as(query)
        return attn.to_out[1](attn.to_out[0](hidden_states))


def dense_partial(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact softmax partial of ``q`` ``[B, h, S, D]`` over keys ``k, v`` ``[B, h, T, D]`` (scale ``D^-0.5``):
    ``(out [B, h, S, D], lse [B, h, S])`` in fp32, ready for the LSE merge of ``sparse_echo_attention(extra=...)``."""
    logits = torch.einsum("bhsd,bhtd->bhst", q.float(), k.float()) * q.shape[-1] ** -0.5
    lse = logits.logsumexp(-1)
    return torch.einsum("bhst,bhtd->bhsd", (logits - lse[..., None]).exp(), v.float()), lse


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Wan's interleaved rotary embedding (``apply_rotary_emb`` inside ``WanAttnProcessor.__call__``)."""
    x1, x2 = x.unflatten(-1, (-1, 2)).unbind(-1)
    c, s = cos[..., 0::2], sin[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x1 * c - x2 * s
    out[..., 1::2] = x1 * s + x2 * c
    return out.type_as(x)
