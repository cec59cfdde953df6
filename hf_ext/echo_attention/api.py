"""Public entry points: :func:`apply_echo_attention` and :func:`calibrate_echo`.

EchoAttention (reconstructed; not verified against the paper).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from diffusers.models.attention_processor import CogVideoXAttnProcessor2_0
from diffusers.models.transformers.transformer_wan import WanAttnProcessor

from hf_ext.echo_attention.calibrate import (
    finetune_theta,
    fit_theta,
    record_dense,
    route_learned,
    route_static,
)
from hf_ext.echo_attention.config import EchoAttentionConfig
from hf_ext.echo_attention.handle import CONFIG_NAME, EchoAttentionHandle, EchoPipelineHandle
from hf_ext.echo_attention.params import EchoParams
from hf_ext.echo_attention.processor_cogvideox import CogVideoXContext, EchoCogVideoXAttnProcessor
from hf_ext.echo_attention.processor_wan import EchoWanAttnProcessor
from hf_ext.echo_attention.routed import OPERATORS, EchoContext, RoutedAttention

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Host:
    """How EchoAttention plugs into one transformer class.

    Attributes:
        blocks: Attribute holding the transformer blocks (each with an ``attn1``).
        stock: The host's own ``attn1`` processor class (the only one that may be replaced).
        processor: The EchoAttention processor class installed on ``attn1``.
        context: The context class whose pre-hook reads the latent layout and timestep.
    """

    blocks: str
    stock: type
    processor: type
    context: type


HOSTS = {
    "WanTransformer3DModel": Host("blocks", WanAttnProcessor, EchoWanAttnProcessor, EchoContext),
    "CogVideoXTransformer3DModel": Host(
        "transformer_blocks", CogVideoXAttnProcessor2_0, EchoCogVideoXAttnProcessor, CogVideoXContext
    ),
}
SUPPORTED = tuple(HOSTS)


def apply_echo_attention(
    transformer: Any,
    config: EchoAttentionConfig | None = None,
    *,
    calibration: str | os.PathLike[str] | None = None,
    share_context_with: EchoAttentionHandle | None = None,
) -> Any:
    """Install EchoAttention on a video DiT's self-attention (``attn1``) and add the layout pre-hook.

    EchoAttention (reconstructed; not verified against the paper). Cross-attention processors (``attn2``) are
    left as they are (same objects); ``handle.remove()`` restores everything.

    Pass a pipeline to patch every transformer it holds (Wan2.2 runs ``transformer`` for the high-noise steps
    and ``transformer_2`` for the rest): they share one step/layout context, so ``dense_first_steps`` counts
    the steps of the whole run, while theta and routes stay per transformer. ``share_context_with`` does the
    same for transformers patched one at a time.

    Args:
        transformer: A diffusers ``WanTransformer3DModel`` or ``CogVideoXTransformer3DModel`` (joint
            text-video attention: text rows and columns stay dense), or a pipeline holding them.
        config: *optional* settings (defaults to ``EchoAttentionConfig()``); not allowed with ``calibration``.
        calibration: *optional* folder written by ``handle.save_pretrained`` (for a pipeline: its folder of
            per-transformer folders).
        share_context_with: *optional* handle of another transformer (same host class and ``block_size``)
            whose step/layout context this one shares.

    Returns:
        An :class:`~hf_ext.echo_attention.handle.EchoAttentionHandle`, or for a pipeline an
        :class:`~hf_ext.echo_attention.handle.EchoPipelineHandle` over every transformer.

    Raises:
        TypeError: unsupported transformer class, or an ``attn1`` processor that is not the host's own
            (``WanAttnProcessor`` / ``CogVideoXAttnProcessor2_0``).
        ValueError: ``dense_layers`` out of range, an already patched transformer, a bad calibration folder,
            a pipeline without a supported transformer, or a ``share_context_with`` handle that was removed or
            differs in host class or ``block_size``.

    Example:
        >>> from hf_ext.testing import tiny_wan_transformer
        >>> dit = tiny_wan_transformer()
        >>> x, t, txt = torch.randn(1, 4, 4, 16, 16), torch.tensor([500]), torch.randn(1, 8, 32)
        >>> ref = dit(x, t, txt).sample
        >>> cfg = EchoAttentionConfig(block_size=16, dense_layers=(), dense_first_steps=0)
        >>> handle = apply_echo_attention(dit, cfg)
        >>> err = float((dit(x, t, txt).sample - ref).detach().norm() / ref.norm())
        >>> err < 1.0
        True
        >>> handle.remove()
        >>> torch.equal(dit(x, t, txt).sample, ref)
        True
    """
    if type(transformer).__name__ not in HOSTS and hasattr(transformer, "components"):
        return _apply_to_pipeline(transformer, config, calibration, share_context_with)
    name = type(transformer).__name__
    host = HOSTS.get(name)
    if host is None:
        raise TypeError(
            f"`transformer` must be one of {SUPPORTED}, got {name}. Other video DiTs are not supported yet."
        )
    meta = None
    if calibration is not None:
        if config is not None:
            raise ValueError(
                "Pass either `config` or `calibration` (which carries its own config), not both."
            )
        path = os.path.join(calibration, CONFIG_NAME)
        if not os.path.isfile(path):
            raise ValueError(f"`calibration` folder {str(calibration)!r} has no {CONFIG_NAME}.")
        with open(path) as fh:
            meta = json.load(fh)
        config = EchoAttentionConfig(**meta["config"])
    config = config or EchoAttentionConfig()
    blocks = getattr(transformer, host.blocks)
    n_layers = len(blocks)
    bad = [i for i in config.dense_layers if i >= n_layers]
    if bad:
        raise ValueError(f"`dense_layers` must index blocks in [0, {n_layers}), got {config.dense_layers!r}.")
    procs = transformer.attn_processors
    for key, proc in procs.items():
        if ".attn1." not in key:
            continue
        if isinstance(proc, RoutedAttention):
            raise ValueError(f"{key} already has a {type(proc).__name__}; call `handle.remove()` first.")
        if not isinstance(proc, host.stock):
            raise TypeError(
                f"{key} must be a {host.stock.__name__} to be replaced, got {type(proc).__name__}."
            )
    attn = blocks[0].attn1
    params = EchoParams(n_layers, attn.heads, attn.inner_dim // attn.heads).to(
        next(transformer.parameters()).device
    )
    context = host.context(block=config.block_size)
    if share_context_with is not None:
        other = share_context_with
        if (
            other.removed
            or type(other.context) is not type(context)
            or other.config.block_size != config.block_size
        ):
            raise ValueError(
                "`share_context_with` must be an installed handle of the same transformer class and "
                f"block_size, got a {'removed ' if other.removed else ''}handle of "
                f"{type(other.transformer).__name__} with "
                f"block_size={other.config.block_size} (this one: {name}, block_size={config.block_size})."
            )
        context = other.context
    new = {}
    for key, proc in procs.items():
        if ".attn1." not in key:
            new[key] = proc
            continue
        new[key] = host.processor(config, int(key.split(".")[1]), context, params)
        for attr in ("_attention_backend", "_parallel_config"):  # keep the user's backend choice (Wan)
            if hasattr(proc, attr):
                setattr(new[key], attr, getattr(proc, attr))
    transformer.set_attn_processor(dict(new))
    hook = transformer.register_forward_pre_hook(context.pre_hook, with_kwargs=True)
    handle = EchoAttentionHandle(transformer, config, context, params, dict(procs), hook)
    if meta is not None and calibration is not None:
        handle.load(calibration, meta)
    return handle


def _apply_to_pipeline(
    pipe: Any,
    config: EchoAttentionConfig | None,
    calibration: str | os.PathLike[str] | None,
    share_context_with: EchoAttentionHandle | None,
) -> EchoPipelineHandle:
    """:func:`apply_echo_attention` on every supported transformer of ``pipe`` (one shared context)."""
    names = [n for n, c in pipe.components.items() if type(c).__name__ in HOSTS]
    if not names:
        found = sorted(type(c).__name__ for c in pipe.components.values() if c is not None)
        raise ValueError(
            f"`transformer` must be a pipeline holding one of {SUPPORTED}, got components {found}."
        )
    handles: dict[str, EchoAttentionHandle] = {}
    shared = share_context_with
    for name in names:
        path = None if calibration is None else os.path.join(calibration, name)
        handles[name] = apply_echo_attention(
            pipe.components[name], config, calibration=path, share_context_with=shared
        )
        shared = shared or handles[name]
    return EchoPipelineHandle(handles)


def calibrate_echo(
    handle: EchoAttentionHandle | EchoPipelineHandle,
    source: Any,
    prompts: Sequence[str] | None = None,
    num_inference_steps: int = 4,
    *,
    stages: Sequence[int] = (1, 2, 3),
    stage3_steps: int = 20,
    lr: float = 1e-2,
    **pipe_kwargs: Any,
) -> dict[str, Any]:
    """Three-stage distillation of theta and routes against full attention (DiT weights untouched).

    EchoAttention (reconstructed; not verified against the paper). Stage 1 fits theta in closed form on the
    dense attention of the calibration calls, stage 2 sets per-head routes (``config.routing``), stage 3
    fine-tunes theta with Adam so the transformer output matches the dense output. ``config.mode`` is kept:
    under ``mode="sparse"`` stage 2 chooses between dense and sparse only (never echo) and stages 1 and 3,
    which fit echo's theta, are skipped; under ``mode="dense"`` nothing is routed. The fit belongs to the
    calibration layout ``(F, P)``: calibrating at several layouts keeps one fit per layout, and a layout
    without one runs the uncalibrated Sparse operator (with one warning).

    Args:
        handle: From :func:`apply_echo_attention` (a pipeline handle calibrates every transformer in turn).
        source: A diffusers pipeline (run on ``prompts`` to collect transformer calls) or a sequence of
            transformer keyword dicts (``hidden_states``, ``timestep``, ``encoder_hidden_states``, ...).
        prompts: Calibration prompts (pipeline source only).
        num_inference_steps: Pipeline steps per prompt.
        stages: Which stages to run (``(1, 3)`` calibrates echo without routing).
        stage3_steps: Adam steps of stage 3.
        lr: Adam learning rate of stage 3.
        **pipe_kwargs: Extra pipeline arguments (``height``, ``width``, ``num_frames``, ...).

    Returns:
        A report: ``layout``, ``routes`` (the per-head table), ``stage3_loss`` (echo mode) and, for static
        routing, the measured option ``errors``/``costs`` with their ``options`` (operator, budget); for a
        pipeline handle, one report per transformer name.

    Raises:
        RuntimeError: the handle was removed.
        ValueError: unknown stages, no calibration calls (an empty ``source``, or a pipeline source without
            prompts), or calibration latents that are not finite or do not tile into patches.
    """
    if isinstance(handle, EchoPipelineHandle):
        kw = dict(stages=stages, stage3_steps=stage3_steps, lr=lr, **pipe_kwargs)
        return {
            n: calibrate_echo(h, source, prompts, num_inference_steps, **kw)
            for n, h in handle.handles.items()
        }
    if handle.removed:
        raise RuntimeError(
            "`calibrate_echo` needs an installed handle, but this one was removed; apply again."
        )
    if not set(stages) <= {1, 2, 3}:
        raise ValueError(f"`stages` must be a subset of (1, 2, 3), got {tuple(stages)!r}.")
    calls = _collect_calls(handle, source, prompts, num_inference_steps, pipe_kwargs)
    tr, ctx, params, cfg = handle.transformer, handle.context, handle.params, handle.config
    targets, records = record_dense(tr, ctx, calls)
    layout = ctx.layout
    assert layout is not None
    routed = {i: r for i, r in records.items() if i not in cfg.dense_layers}
    report: dict[str, Any] = {"layout": (layout.frames, layout.tokens_per_frame), "calls": len(calls)}
    fit = params.bind(layout, next(tr.parameters()).device)
    echo = cfg.mode == "echo"  # theta only serves echo heads; other modes never route a head to echo
    if 1 in stages and echo:
        fit_theta(fit, routed, cfg)
    if 2 in stages and cfg.mode != "dense" and cfg.routing == "static":
        report.update(route_static(fit, routed, cfg))
    elif 2 in stages and cfg.mode != "dense":
        report["logits"] = route_learned(fit, routed, cfg)
    if 3 in stages and echo:
        report["stage3_loss"] = finetune_theta(tr, ctx, fit, calls, targets, stage3_steps, lr)
    report["routes"] = [
        {"layer": i, "head": h, "operator": OPERATORS[op], "budget": budget}
        for i in sorted(routed)
        if (r := fit.routes(i)) is not None
        for h, (op, budget) in enumerate(zip(*r))
    ]
    return report


def _collect_calls(
    handle: EchoAttentionHandle,
    source: Any,
    prompts: Sequence[str] | None,
    num_inference_steps: int,
    pipe_kwargs: dict[str, Any],
) -> list[dict[str, Any]]:
    """Transformer keyword calls: given directly, or recorded from dense pipeline runs on ``prompts``."""
    if not hasattr(source, "transformer"):
        given = [dict(kw) for kw in source]
        if not given:
            raise ValueError(
                f"`source` must be a pipeline or a non-empty sequence of transformer keyword dicts, got "
                f"{source!r}."
            )
        return given
    if not prompts:
        raise ValueError("`prompts` must be a non-empty list of strings when `source` is a pipeline.")
    calls: list[dict[str, Any]] = []

    def grab(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        kw = {
            k: v.detach().clone() if torch.is_tensor(v) else v
            for k, v in kwargs.items()
            if k != "return_dict"
        }
        if args:
            kw["hidden_states"] = args[0].detach().clone()
        calls.append(kw)

    hook = handle.transformer.register_forward_pre_hook(grab, with_kwargs=True)
    handle.context.force_dense = True
    try:
        with torch.no_grad():
            for prompt in prompts:
                source(prompt, num_inference_steps=num_inference_steps, output_type="latent", **pipe_kwargs)
    finally:
        hook.remove()
        handle.context.force_dense = False
    return calls
