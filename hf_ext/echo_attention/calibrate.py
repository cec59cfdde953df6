"""Calibration loops of EchoAttention (reconstructed; not verified against the paper).

Stage 1 (closed-form theta, :func:`fit_theta`), stage 2 (routing: :func:`route_static` /
:func:`route_learned`) and stage 3 (Adam on theta against the dense transformer output,
:func:`finetune_theta`). The DiT weights never change. All three stages are [reconstructed].
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import torch

from hf_ext.echo_attention.config import EchoAttentionConfig
from hf_ext.echo_attention.core import (
    dense_partial,
    sparse_echo_attention,
    split_budget,
    static_route,
)
from hf_ext.echo_attention.fit import new_theta_stats, pooled_stats, solve_theta, stage1_stats
from hf_ext.echo_attention.params import LayoutFit
from hf_ext.echo_attention.routed import DENSE, ECHO, SPARSE, AttnRecord, EchoContext

logger = logging.getLogger(__name__)

QKV = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
Record = AttnRecord | QKV  # video q, k, v [B, S, H, D] (+ text k, v [B, T, H, D] for joint models)


def budget_options(budget: float) -> list[float]:
    """Per-head budgets ``{b/4, b/2, b, 2b, 4b} ∩ (0, 1]`` of the static router."""
    return [x for x in (budget / 4, budget / 2, budget, 2 * budget, 4 * budget) if 0 < x <= 1]


def record_dense(
    transformer: Any, context: EchoContext, calls: Sequence[dict[str, Any]]
) -> tuple[list[torch.Tensor], dict[int, list[Any]]]:
    """Run every call densely; return the transformer outputs and the per-layer :class:`AttnRecord` lists."""
    context.force_dense, context.record = True, {}
    outs = []
    try:
        with torch.no_grad():
            for kw in calls:
                outs.append(transformer(**kw, return_dict=False)[0].detach())
        return outs, context.record
    finally:
        context.force_dense, context.record = False, None


def fit_theta(fit: LayoutFit, records: dict[int, list[Record]], config: EchoAttentionConfig) -> None:
    """Stage 1: closed-form theta per (layer, head, frame offset) at ``fit.layout``.

    The pooled echo fits ``w``, the attention-mass-weighted gap between a tile's true log-sum-exp and its
    pooled-key estimate; the band echo regresses every member's tile partials on its possible representatives.
    Video-video partials only (text keys of joint models play no part in echo)."""
    layout = fit.layout
    heads, _, head_dim = fit.c.shape[1:]
    for layer, calls in records.items():
        stats = new_theta_stats(heads, 2 * layout.frames - 1, head_dim)
        for rec in calls:
            qp, kp, vp = (layout.pad(x.transpose(1, 2)) for x in AttnRecord(*rec)[:3])
            if config.echo_model == "pooled":
                pooled_stats(qp, kp, layout, config.echo_pool, stats)
            else:
                stage1_stats(qp, kp, vp, layout, config.max_echo_distance, stats)
        with torch.no_grad():
            for dst, src in zip((fit.a, fit.c, fit.u, fit.w), solve_theta(stats)):
                dst[layer] = src.to(dst.device)


def _option_outputs(
    fit: LayoutFit, layer: int, calls: list[Record], op: int, budget: float, config: EchoAttentionConfig
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Outputs ``[B, H, S, D]`` of one operator at one budget on every call (video queries; joint models merge
    the dense text-key partial exactly), and the mean FLOPs per head."""
    heads = fit.c.shape[1]
    exact, echo = split_budget([budget] * heads, [op == ECHO] * heads, config.echo_share)
    theta = (fit.a[layer], fit.c[layer], fit.u[layer], fit.w[layer])
    outs, flops = [], []
    for rec in calls:
        q, k, v, tk, tv = AttnRecord(*rec)
        with torch.no_grad():
            qh, kh, vh = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            extra = (
                None
                if tk is None or tv is None
                else dense_partial(qh, tk.transpose(1, 2), tv.transpose(1, 2))
            )
            out, alloc = sparse_echo_attention(
                qh,
                kh,
                vh,
                fit.layout,
                exact,
                echo,
                theta,
                **config.operator_kwargs(),
                backend="torch",
                extra=extra,
            )
        outs.append(out)
        flops.append(alloc.flops.view(-1, heads).mean(0))
    return outs, torch.stack(flops).mean(0)


def _dense_outputs(calls: list[Record]) -> list[torch.Tensor]:
    """Dense reference ``[B, H, S, D]`` of the video queries over all keys (``[text, video]`` for joint
    models)."""
    outs = []
    for rec in calls:
        q, k, v, tk, tv = AttnRecord(*rec)
        if tk is not None and tv is not None:
            k, v = torch.cat([tk, k], 1), torch.cat([tv, v], 1)
        outs.append(
            torch.nn.functional.scaled_dot_product_attention(
                q.transpose(1, 2).float(), k.transpose(1, 2).float(), v.transpose(1, 2).float()
            )
        )
    return outs


def _head_error(outs: list[torch.Tensor], dense: list[torch.Tensor]) -> torch.Tensor:
    """Relative L2 error per head ``[H]`` over all calls."""
    num = torch.stack([((o - d) ** 2).sum((0, 2, 3)) for o, d in zip(outs, dense)]).sum(0)
    den = torch.stack([(d**2).sum((0, 2, 3)) for d in dense]).sum(0)
    return (num / den).sqrt()


def allowed_operators(mode: str) -> tuple[int, ...]:
    """The operators stage 2 may route a head to under ``mode``: ``"echo"`` offers dense, sparse and echo;
    ``"sparse"`` (the sparse-only baseline) dense and sparse, never echo; ``"dense"`` dense only."""
    return {"echo": (DENSE, SPARSE, ECHO), "sparse": (DENSE, SPARSE), "dense": (DENSE,)}[mode]


def route_static(
    fit: LayoutFit, records: dict[int, list[Record]], config: EchoAttentionConfig
) -> dict[str, Any]:
    """Stage 2, static: measure every option's error and FLOPs per (layer, head), then solve the knapsack.

    Options per head: dense, and each operator ``config.mode`` allows (:func:`allowed_operators`: sparse,
    and echo only in ``mode="echo"``) at each of :func:`budget_options`.
    Returns the measured ``errors``/``costs`` ``[L_routed * H, O]``, the ``options`` (operator, budget) and
    the ``choice``.
    """
    ops = [op for op in allowed_operators(config.mode) if op != DENSE]
    options = [(DENSE, 1.0)] + [(op, b) for op in ops for b in budget_options(config.budget)]
    heads = fit.c.shape[1]
    layers = sorted(records)
    errs, costs = [], []
    for layer in layers:
        dense = _dense_outputs(records[layer])
        e_row, c_row = [torch.zeros(heads)], [torch.ones(heads)]
        for op, b in options[1:]:
            outs, fl = _option_outputs(fit, layer, records[layer], op, b, config)
            e_row.append(_head_error(outs, dense).cpu())
            c_row.append(fl.cpu())
        errs.append(torch.stack(e_row, -1))
        costs.append(torch.stack(c_row, -1))
    err, cost = torch.cat(errs), torch.cat(costs)
    choice = static_route(err, cost, config.budget)
    for i, layer in enumerate(layers):
        picked = [options[c] for c in choice[i * heads : (i + 1) * heads].tolist()]
        fit.set_routes(layer, [op for op, _ in picked], [b for _, b in picked])
    return {"errors": err, "costs": cost, "options": options, "choice": choice}


def route_learned(
    fit: LayoutFit,
    records: dict[int, list[Record]],
    config: EchoAttentionConfig,
    steps: int = 100,
    lambda_c: float = 10.0,
    lr: float = 0.1,
    seed: int = 0,
) -> torch.Tensor:
    """Stage 2, learned: per-head logits over (dense, sparse, echo) at ``budget``, trained with a
    Gumbel-softmax mixture (temperature annealed 1 -> 0.1) on ``||O_mix - O_dense||^2 / ||O_dense||^2`` plus
    ``lambda_c * max(0, E[FLOPs] - budget)``; the argmax is kept. Operators ``config.mode`` does not allow
    (:func:`allowed_operators`) get a ``-inf`` logit, so ``mode="sparse"`` never routes a head to echo.
    Returns the logits ``[L_routed, H, 3]``."""
    layers = sorted(records)
    heads = fit.c.shape[1]
    gen = torch.Generator().manual_seed(seed)
    per_layer = []
    for layer in layers:
        dense = _dense_outputs(records[layer])
        sp, c_sp = _option_outputs(fit, layer, records[layer], SPARSE, config.budget, config)
        ec, c_ec = _option_outputs(fit, layer, records[layer], ECHO, config.budget, config)
        per_layer.append((dense, sp, ec, torch.stack([torch.ones_like(c_sp), c_sp, c_ec], -1).cpu()))
    allowed = torch.tensor([op in allowed_operators(config.mode) for op in range(3)])
    mask = torch.where(allowed, 0.0, -math.inf)
    logits = torch.zeros(len(layers), heads, 3, requires_grad=True)
    opt = torch.optim.Adam([logits], lr=lr)
    for step in range(steps):
        tau = 0.1 ** (step / max(steps - 1, 1))
        loss = mixture_loss(logits + mask, per_layer, config.budget, lambda_c, tau, gen)
        opt.zero_grad()
        loss.backward()
        opt.step()
    choice = (logits.detach() + mask).argmax(-1)
    for i, layer in enumerate(layers):
        fit.set_routes(layer, choice[i].tolist(), [config.budget] * heads)
    return logits.detach() + mask


def mixture_loss(
    logits: torch.Tensor,
    per_layer: list[tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor], torch.Tensor]],
    budget: float,
    lambda_c: float,
    tau: float,
    gen: torch.Generator,
) -> torch.Tensor:
    """Learned-routing loss for logits ``[L, H, 3]`` over (dense, sparse, echo) outputs ``[B, H, S, D]``."""
    loss = logits.new_zeros(())
    exp_cost = []
    for i, (dense, sp, ec, cost) in enumerate(per_layer):
        g = -torch.log(-torch.log(torch.rand(logits.shape[1:], generator=gen).clamp(1e-9, 1 - 1e-9)))
        mix = ((logits[i] + g) / tau).softmax(-1)  # [H, 3]
        for d, s, e in zip(dense, sp, ec):
            o = torch.stack([d, s, e], -1)  # [B, H, S, D, 3]
            o_mix = (o * mix[None, :, None, None, :]).sum(-1)
            loss = loss + (((o_mix - d) ** 2).sum((0, 2, 3)) / (d**2).sum((0, 2, 3))).mean()
        exp_cost.append((logits[i].softmax(-1) * cost).sum(-1))
    excess = torch.relu(torch.cat(exp_cost).mean() - budget)
    return loss + lambda_c * excess


def finetune_theta(
    transformer: Any,
    context: EchoContext,
    fit: LayoutFit,
    calls: Sequence[dict[str, Any]],
    targets: Sequence[torch.Tensor],
    steps: int,
    lr: float = 1e-2,
) -> list[float]:
    """Stage 3: Adam on theta (routes frozen) so the transformer output with Echo matches the dense output.

    The loss is the MSE over calls, normalised by the dense output's mean square. The DiT's own parameters are
    frozen for the duration and restored afterwards. Returns the loss per step.
    """
    thetas = [fit.a, fit.c, fit.u, fit.w]
    if steps <= 0:
        return []
    frozen = [(p, p.requires_grad) for p in transformer.parameters()]
    for p, _ in frozen:
        p.requires_grad_(False)
    opt = torch.optim.Adam(thetas, lr=lr)
    history: list[float] = []
    context.calibrating = True
    try:
        for _ in range(steps):
            opt.zero_grad()
            total = 0.0
            for kw, y in zip(calls, targets):
                out = transformer(**kw, return_dict=False)[0]
                loss = ((out - y) ** 2).mean() / (y**2).mean().clamp_min(1e-12) / len(calls)
                if not loss.requires_grad:
                    logger.info("stage 3 skipped: no head is routed to echo, so theta has no effect")
                    return history
                loss.backward()
                total += float(loss.detach())
            opt.step()
            history.append(total)
    finally:
        context.calibrating = False
        for p, flag in frozen:
            p.requires_grad_(flag)
    logger.info("stage 3: loss %.4g -> %.4g over %d steps", history[0], history[-1], steps)
    return history


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """``||out - ref|| / ||ref||``."""
    return float((out.float() - ref.float()).norm() / ref.float().norm().clamp_min(1e-12))
