"""Public entry points: :func:`apply_echo_attention`, :func:`calibrate_echo`, :class:`EchoAttentionHandle`.

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

from hf_ext._registry import paper
from hf_ext.diffusers.echo_attention.calibrate import (
    finetune_theta,
    fit_theta,
    record_dense,
    route_learned,
    route_static,
)
from hf_ext.diffusers.echo_attention.config import EchoAttentionConfig
from hf_ext.diffusers.echo_attention.layout import Layout
from hf_ext.diffusers.echo_attention.params import EchoParams
from hf_ext.diffusers.echo_attention.processor_cogvideox import CogVideoXContext, EchoCogVideoXAttnProcessor
from hf_ext.diffusers.echo_attention.processor_wan import EchoWanAttnProcessor
from hf_ext.diffusers.echo_attention.routed import OPERATORS, EchoContext, RoutedAttention

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
CONFIG_NAME = "echo_attention_config.json"
TENSORS_NAME = "echo_attention.safetensors"
THETA_KEYS = ("theta_a", "theta_c", "theta_u", "theta_w")


class EchoAttentionHandle:
    """What :func:`apply_echo_attention` returns: the installed processors, their shared state, and undo.

    EchoAttention (reconstructed; not verified against the paper).

    Attributes:
        transformer: The patched transformer.
        config: The settings.
        context: Layout and step state filled by the pre-hook.
        params: Theta and routes (:class:`~hf_ext.diffusers.echo_attention.core.EchoParams`).
        removed: Whether :meth:`remove` ran.
    """

    _paper = paper("echo_attention")

    def __init__(
        self,
        transformer: Any,
        config: EchoAttentionConfig,
        context: EchoContext,
        params: EchoParams,
        original: dict[str, Any],
        hook: Any,
    ) -> None:
        self.transformer, self.config, self.context, self.params = transformer, config, context, params
        self._original, self._hook = original, hook
        self.removed = False

    def remove(self) -> None:
        """Restore the original processor objects (all keys) and remove the pre-hook."""
        if self.removed:
            return
        self.transformer.set_attn_processor(dict(self._original))
        self._hook.remove()
        self.removed = True

    def stats(self) -> list[dict[str, Any]]:
        """Per (layer, head) of the last call: operator, FLOP fraction, exact/echoed/dropped tiles, echo
        coverage.

        Counts are for batch element 0; layers whose last call was all dense report ``"dense"``. FLOP
        fractions count the video-video part (joint models keep the text rows and columns dense on top).
        """
        rows = []
        for layer in range(self.params.num_layers):
            heads, alloc = self.params.last_alloc.get(layer, ([], None))
            for h in range(self.params.heads):
                row: dict[str, Any] = {"layer": layer, "head": h, "operator": "dense", "flops": 1.0}
                if alloc is not None and h in heads:
                    i = heads.index(h)
                    n_t = alloc.exact.shape[-1]
                    n_ex, n_ec = int(alloc.exact[i].sum()), int(alloc.echoed[i].sum())
                    op = self.params.routes(layer)
                    name = OPERATORS[op[0][h]] if op else self.config.mode
                    row.update(
                        operator=name,
                        flops=float(alloc.flops[i].detach()),
                        exact=n_ex,
                        echoed=n_ec,
                        dropped=n_t * n_t - n_ex - n_ec,
                        coverage=float(alloc.coverage[i].detach()),
                    )
                rows.append(row)
        return rows

    def save_pretrained(self, save_directory: str | os.PathLike[str]) -> None:
        """Write the config JSON and a safetensors file (theta, routes, calibration layout ``(F, P)``)."""
        from safetensors.torch import save_file

        os.makedirs(save_directory, exist_ok=True)
        p, lay = self.params, self.params.layout
        meta = {
            "config": self.config.to_dict(),
            "layout": None if lay is None else [lay.frames, lay.tokens_per_frame],
            "shape": [p.num_layers, p.heads, p.head_dim],
        }
        with open(os.path.join(save_directory, CONFIG_NAME), "w") as fh:
            json.dump(meta, fh, indent=2)
        tensors = {"route_op": p.route_op, "route_budget": p.route_budget}
        if p.a is not None and p.c is not None and p.u is not None and p.w is not None:
            tensors.update(zip(THETA_KEYS, (p.a, p.c, p.u, p.w)))
        save_file(
            {k: v.detach().cpu().contiguous() for k, v in tensors.items()},
            os.path.join(save_directory, TENSORS_NAME),
        )

    def _load(self, directory: str | os.PathLike[str], meta: dict[str, Any]) -> None:
        from safetensors.torch import load_file

        path = os.path.join(directory, TENSORS_NAME)
        if not os.path.isfile(path):
            raise ValueError(f"`calibration` folder {str(directory)!r} has no {TENSORS_NAME}.")
        tensors = load_file(path)
        need = ["route_op", "route_budget"] + (list(THETA_KEYS) if meta["layout"] is not None else [])
        missing = [k for k in need if k not in tensors]
        if missing:
            raise ValueError(f"`calibration` folder {str(directory)!r} is missing tensors {missing}.")
        p = self.params
        if meta["shape"] != [p.num_layers, p.heads, p.head_dim]:
            raise ValueError(
                f"`calibration` was saved for (layers, heads, head_dim) = {tuple(meta['shape'])}, this "
                f"transformer has {(p.num_layers, p.heads, p.head_dim)}."
            )
        p.route_op.copy_(tensors["route_op"])
        p.route_budget.copy_(tensors["route_budget"])
        if meta["layout"] is not None:
            dev = p.route_op.device
            frames, tokens = meta["layout"]
            p.bind(Layout(frames, tokens, self.config.block_size), dev)
            with torch.no_grad():
                for dst, key in zip((p.a, p.c, p.u, p.w), THETA_KEYS):
                    assert dst is not None
                    dst.copy_(tensors[key])


def apply_echo_attention(
    transformer: Any,
    config: EchoAttentionConfig | None = None,
    *,
    calibration: str | os.PathLike[str] | None = None,
    share_context_with: EchoAttentionHandle | None = None,
) -> EchoAttentionHandle:
    """Install EchoAttention on a video DiT's self-attention (``attn1``) and add the layout pre-hook.

    EchoAttention (reconstructed; not verified against the paper). Cross-attention processors (``attn2``) are
    left as they are (same objects); :meth:`EchoAttentionHandle.remove` restores everything.

    Wan2.2 pipelines run two transformers (``transformer`` for the high-noise steps, ``transformer_2`` for the
    rest): patch both, the second with ``share_context_with=<first handle>``, so the denoising-step index
    (``dense_first_steps``) counts the steps of the whole run and calibrating one handle through the pipeline
    runs both transformers densely. Theta and routes stay per transformer.

    Args:
        transformer: A diffusers ``WanTransformer3DModel`` or ``CogVideoXTransformer3DModel`` (joint
            text-video
            attention: text rows and columns stay dense).
        config: *optional* settings (defaults to ``EchoAttentionConfig()``); not allowed with ``calibration``.
        calibration: *optional* folder written by :meth:`EchoAttentionHandle.save_pretrained`.
        share_context_with: *optional* handle of the other transformer of a Wan2.2 pair (same host class and
            ``block_size``) whose step/layout context this one shares.

    Returns:
        The handle.

    Raises:
        TypeError: unsupported transformer class, or an ``attn1`` processor that is not the host's own
            (``WanAttnProcessor`` / ``CogVideoXAttnProcessor2_0``).
        ValueError: ``dense_layers`` out of range, an already patched transformer, a bad calibration folder,
            or a ``share_context_with`` handle that was removed or differs in host class or ``block_size``.

    Example:
        >>> from hf_ext.testing import tiny_wan_transformer
        >>> dit = tiny_wan_transformer()
        >>> x, t, txt = torch.randn(1, 4, 4, 16, 16), torch.tensor([500]), torch.randn(1, 8, 32)
        >>> ref = dit(x, t, txt).sample
        >>> handle = apply_echo_attention(dit, EchoAttentionConfig(block_size=16, dense_layers=(),
        dense_first_steps=0))
        >>> err = float((dit(x, t, txt).sample - ref).detach().norm() / ref.norm())
        >>> err < 1.0
        True
        >>> handle.remove()
        >>> torch.equal(dit(x, t, txt).sample, ref)
        True
    """
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
        handle._load(calibration, meta)
    return handle


def calibrate_echo(
    handle: EchoAttentionHandle,
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
    dense per-tile partials, stage 2 sets per-head routes (``config.routing``), stage 3 fine-tunes theta with
    Adam so the transformer output matches the dense output. Routes and theta are valid at the calibration
    layout ``(F, P)`` only.

    Args:
        handle: From :func:`apply_echo_attention`.
        source: A diffusers pipeline (run on ``prompts`` to collect transformer calls) or a sequence of
            transformer keyword dicts (``hidden_states``, ``timestep``, ``encoder_hidden_states``, ...).
        prompts: Calibration prompts (pipeline source only).
        num_inference_steps: Pipeline steps per prompt.
        stages: Which stages to run (``(1, 3)`` calibrates echo without routing).
        stage3_steps: Adam steps of stage 3.
        lr: Adam learning rate of stage 3.
        **pipe_kwargs: Extra pipeline arguments (``height``, ``width``, ``num_frames``, ...).

    Returns:
        A report: ``layout``, ``routes`` (the per-head table), ``stage3_loss`` and, for static routing,
        the measured option ``errors``/``costs``.

    Raises:
        RuntimeError: the handle was removed.
        ValueError: unknown stages, or a pipeline source without prompts.
    """
    if handle.removed:
        raise RuntimeError(
            "`calibrate_echo` needs an installed handle, but this one was removed; apply again."
        )
    if not set(stages) <= {1, 2, 3}:
        raise ValueError(f"`stages` must be a subset of (1, 2, 3), got {tuple(stages)!r}.")
    calls = _collect_calls(handle, source, prompts, num_inference_steps, pipe_kwargs)
    tr, ctx, params, cfg = handle.transformer, handle.context, handle.params, handle.config
    params.route_op.fill_(-1)
    params.layout = None  # recalibration may change the layout
    targets, records = record_dense(tr, ctx, calls)
    layout = ctx.layout
    assert layout is not None
    routed = {i: r for i, r in records.items() if i not in cfg.dense_layers}
    report: dict[str, Any] = {"layout": (layout.frames, layout.tokens_per_frame), "calls": len(calls)}
    params.bind(layout, params.route_op.device)
    if 1 in stages:
        fit_theta(params, routed, layout, cfg.max_echo_distance)
    if 2 in stages and cfg.routing == "static":
        report.update(route_static(params, routed, layout, cfg.budget, cfg.echo_share, cfg.max_echo_distance))
    elif 2 in stages:
        report["logits"] = route_learned(
            params, routed, layout, cfg.budget, cfg.echo_share, cfg.max_echo_distance
        )
    if 3 in stages:
        report["stage3_loss"] = finetune_theta(tr, ctx, params, calls, targets, stage3_steps, lr)
    report["routes"] = [
        {
            "layer": i,
            "head": h,
            "operator": OPERATORS[int(params.route_op[i, h])],
            "budget": float(params.route_budget[i, h]),
        }
        for i in sorted(routed)
        for h in range(params.heads)
        if int(params.route_op[i, h]) >= 0
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
        return [dict(kw) for kw in source]
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
