"""Per-head routing shared by the EchoAttention host processors, and the state their pre-hook fills.

EchoAttention (reconstructed; not verified against the paper). :class:`RoutedAttention` is mixed into each
host processor (``processor_wan.py``, ``processor_cogvideox.py``); dense-routed heads stay with the host's own
path. The processor cannot see the frame layout, so a forward pre-hook on the transformer
(:class:`EchoContext`)
records ``(F, P)`` and the denoising-step index.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

import torch

from hf_ext.echo_attention.config import EchoAttentionConfig
from hf_ext.echo_attention.core import sparse_echo_attention, split_budget
from hf_ext.echo_attention.layout import Layout
from hf_ext.echo_attention.params import EchoParams

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
    """One recorded self-attention call (calibration): video ``q, k, v`` ``[B, S, H, D]`` after norms and
    RoPE.

    Joint text-video models also record the text keys/values ``text_k, text_v`` ``[B, T, H, D]`` that every
    video query attends densely; ``None`` for video-only models (Wan).
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
        warned: Layouts already warned about (no calibration there: uncalibrated sparse).
    """

    calibrating: bool = False
    force_dense: bool = False
    record: dict[int, list[AttnRecord]] | None = None
    warned: set[tuple[int, int]] = field(default_factory=set)

    timestep_position: ClassVar[int] = 1  # positional index of ``timestep`` in the transformer's forward

    def frames_and_tokens(self, module: Any, x: torch.Tensor) -> tuple[int, int]:
        """``(F, P)`` of latents ``x`` ``[B, C, F, H, W]`` under ``config.patch_size = (p_t, p_h, p_w)``."""
        pt, ph, pw = module.config.patch_size
        f, h, w = (patches(x, dim, p) for dim, p in ((2, pt), (3, ph), (4, pw)))
        return f, h * w

    def pre_hook(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """``register_forward_pre_hook(with_kwargs=True)`` callback on the transformer.

        Raises:
            ValueError: latents with a NaN or infinite value, or a frame/height/width that is not a multiple
                of the patch size (the patch embedding would drop the remainder silently).
        """
        x = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        if not torch.compiler.is_compiling() and not bool(torch.isfinite(x).all()):
            bad = int((~torch.isfinite(x)).sum())
            raise ValueError(
                f"`hidden_states` must be finite, got {bad} NaN/inf value(s) in latents of shape "
                f"{tuple(x.shape)}; check the scheduler and the latents passed in."
            )
        self.layout = Layout(*self.frames_and_tokens(module, x), self.block)
        pos = self.timestep_position
        self.observe_timestep(kwargs.get("timestep", args[pos] if len(args) > pos else None))


def patches(x: torch.Tensor, dim: int, patch: int) -> int:
    """``x.shape[dim] // patch``; ``ValueError`` naming the size when ``patch`` does not divide it."""
    size = x.shape[dim]
    if size % patch:
        low = size - size % patch
        raise ValueError(
            f"`hidden_states` dim {dim} must be a multiple of the patch size {patch}, got {size} (latents of "
            f"shape {tuple(x.shape)}): the patch embedding would silently drop the last {size % patch}. "
            f"Use {low or patch} or {low + patch}."
        )
    return size // patch


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
        """The hook's layout for a call with ``seq_len`` video tokens."""
        layout = self.require_hook()
        if layout.seq_len != seq_len:
            raise ValueError(f"layout {layout} does not match the {seq_len} video tokens of this call.")
        return layout

    def head_routes(self, heads: int) -> tuple[list[int], list[float]]:
        """Per-head (operator code, budget) of this call: schedule, then calibrated routes, then ``mode``.

        A calibrated handle called at a layout it has no fit for runs every head with the uncalibrated Sparse
        operator at ``budget`` and logs one warning per layout.
        """
        cfg, ctx, params = self.config, self.context, self.params
        scheduled = ctx.step < cfg.dense_first_steps and not ctx.calibrating
        if ctx.force_dense or cfg.mode == "dense" or self.layer in cfg.dense_layers or scheduled:
            return [DENSE] * heads, [1.0] * heads
        layout = self.require_hook()
        if params.calibrated and params.fit(layout) is None and not ctx.calibrating:
            if (layout.frames, layout.tokens_per_frame) not in ctx.warned:
                ctx.warned.add((layout.frames, layout.tokens_per_frame))
                logger.warning(
                    "EchoAttention has no calibration for (F, P) = (%d, %d) (calibrated: %s); running the "
                    "uncalibrated Sparse operator at budget %s there. Run calibrate_echo at this layout to "
                    "add it.",
                    layout.frames,
                    layout.tokens_per_frame,
                    ", ".join(params.fits),
                    cfg.budget,
                )
            return [SPARSE] * heads, [cfg.budget] * heads
        routes = params.routes(self.layer, layout)
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
        lse [B, h, S])``, merged exactly by
        :func:`~hf_ext.echo_attention.core.sparse_echo_attention`.
        """
        cfg, layout = self.config, self.require_hook()
        exact, echo = split_budget(
            [budgets[h] for h in heads], [ops[h] == ECHO for h in heads], cfg.echo_share
        )
        theta = self.params.theta(self.layer, heads, layout, query.device)
        q, k, v = (self.take_heads(x, heads).transpose(1, 2) for x in (query, key, value))
        backend = "torch" if torch.is_grad_enabled() and theta[0].requires_grad else cfg.backend  # stage 3
        out, alloc = sparse_echo_attention(
            q,
            k,
            v,
            layout,
            exact,
            echo,
            theta,
            **cfg.operator_kwargs(),
            backend=backend,
            extra=extra,
        )
        self.params.last_alloc[self.layer] = (heads, [ops[h] for h in heads], alloc)
        return out.transpose(1, 2)

    def take_heads(self, x: torch.Tensor, heads: list[int], dim: int = 2) -> torch.Tensor:
        """``x`` restricted to ``heads`` along ``dim`` (a view when every head is taken)."""
        if heads == list(range(x.shape[dim])):
            return x
        return x.index_select(dim, self.params.heads_index(heads, x.device))

    def put_heads(self, out: torch.Tensor, heads: list[int], src: torch.Tensor, dim: int = 2) -> torch.Tensor:
        """``out`` with ``src`` written into ``heads`` along ``dim`` (``src`` when every head is given)."""
        if heads == list(range(out.shape[dim])):
            return src.to(out.dtype)
        return out.index_copy(dim, self.params.heads_index(heads, out.device), src.to(out.dtype))
