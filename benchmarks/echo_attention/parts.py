"""The two parts of ``hf-ext bench echo_attention``: operators on synthetic Q/K/V, and tiny DiTs end to end.

Benchmark-only code (EchoAttention, reconstructed; not verified against the paper). Every arm of a setting
runs in one process; times are medians of interleaved repeats
(:func:`~benchmarks.harness.interleaved_times`).
"""

from __future__ import annotations

import copy
import logging
import statistics
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

import torch

from benchmarks.echo_attention.data import (
    BenchHost,
    blob_latents,
    content_dependent,
    rel_err,
    synthetic_qkv,
    window_mask,
)
from benchmarks.harness import interleaved_times
from hf_ext.echo_attention.api import apply_echo_attention, calibrate_echo
from hf_ext.echo_attention.calibrate import fit_theta, route_static
from hf_ext.echo_attention.config import EchoAttentionConfig
from hf_ext.echo_attention.core import identity_theta, sparse_echo_attention, split_budget
from hf_ext.echo_attention.layout import Layout
from hf_ext.echo_attention.params import EchoParams
from hf_ext.echo_attention.routed import DENSE, ECHO, RoutedAttention

logger = logging.getLogger(__name__)

SPARSE_ROW = "sparse-only (matched FLOPs)"
WINDOW_ROW = "static window (radial-style)"
BAND_SHARE = 0.25  # the band echo needs a larger share: a representative costs a whole exact tile
STAGE3_LR = 0.1
SCALED_PREFIX = "sparse-only ("
# sparse-only also at these multiples of echo's FLOPs: its error at echo's step time is interpolated between
# them, and the budget below echo's keeps that time bracketed when echo's step is the faster one
TIME_MATCH = (0.85, 1.15, 1.3)


def variants(block: int) -> dict[str, EchoAttentionConfig]:
    """The echo models compared: the pooled echo (default), a finer pooled echo, and the band echo."""
    base = EchoAttentionConfig(block_size=block, dense_layers=(), dense_first_steps=0)
    return {
        "echo": base,
        "echo (pooled 16)": replace(base, echo_pool=16, echo_share=0.15),
        "echo (band)": replace(base, echo_model="band", echo_share=BAND_SHARE),
    }


# ------------------------------------------------------------------------------------- attention level


def attention_rows(
    drifts: list[float], budgets: list[float], seeds_cal: list[int], seeds_eval: list[int], repeats: int
) -> list[dict[str, Any]]:
    """Part A: every arm on synthetic video-like Q/K/V (F=8, P=256, H=4, D=64), fitted on ``seeds_cal`` and
    measured on ``seeds_eval``; attention time ratios on the first held-out seed."""
    heads, d = 4, 64
    layout = Layout(8, 256, 64)
    rows: list[dict[str, Any]] = []
    for drift in drifts:
        cal = [tuple(x.transpose(1, 2) for x in synthetic_qkv(s, drift)) for s in seeds_cal]
        ev = [synthetic_qkv(s, drift) for s in seeds_eval]
        for budget in budgets:
            logger.info("part A: drift %s, budget %s", drift, budget)
            arms = _attention_arms(layout, heads, d, budget, {0: cal})
            acc: dict[str, dict[str, list[float]]] = {}
            times: dict[str, list[float]] = {}
            for j, (q, k, v) in enumerate(ev):
                dense = torch.nn.functional.scaled_dot_product_attention(q, k, v)
                calls = {name: partial(fn, q, k, v) for name, fn in arms.items()}
                flops = {}
                for name, fn in calls.items():
                    out, fl, cov = fn()
                    flops[name] = fl
                    rec = acc.setdefault(name, {"rel_err": [], "flop_ratio": [], "coverage": []})
                    rec["rel_err"].append(rel_err(out, dense))
                    rec["flop_ratio"].append(fl)
                    rec["coverage"].append(cov)
                    if name == "echo":  # sparse-only at the FLOPs echo actually spent
                        calls[SPARSE_ROW] = partial(_operator, q, k, v, layout, [fl] * heads, [0.0] * heads)
                if j == 0:
                    sdpa = partial(torch.nn.functional.scaled_dot_product_attention, q, k, v)
                    times = interleaved_times({"dense": sdpa, **calls}, repeats=repeats)
            t_dense = statistics.median(times["dense"])
            common = {"part": "A", "drift": drift, "budget": budget}
            dense_row = {"rel_err": 0.0, "flop_ratio": 1.0, "attn_time_ratio": 1.0}
            # the reference (error 0 by definition, full FLOPs), not a baseline at the same budget
            rows.append({"system": "dense (SDPA)", "is_baseline": False, **common, **dense_row})
            for name, rec in acc.items():
                rows.append(
                    {
                        "system": name,
                        "is_baseline": name in (SPARSE_ROW, WINDOW_ROW),
                        **common,
                        "rel_err": statistics.mean(rec["rel_err"]),
                        "flop_ratio": statistics.mean(rec["flop_ratio"]),
                        "attn_time_ratio": t_dense / statistics.median(times[name]),
                        "coverage": statistics.mean(rec["coverage"]),
                    }
                )
    return rows


ArmFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, float, float]]


def _attention_arms(
    layout: Layout, heads: int, d: int, budget: float, records: dict[int, list[Any]]
) -> dict[str, ArmFn]:
    """Operator arms ``(q, k, v) -> (out, mean FLOP fraction, mean coverage)`` fitted on ``records``."""
    arms: dict[str, ArmFn] = {}
    for name, cfg in variants(layout.block).items():
        cfg = replace(cfg, budget=budget)
        fit = EchoParams(1, heads, d).bind(layout)
        fit_theta(fit, records, cfg)
        theta = (fit.a[0], fit.c[0], fit.u[0], fit.w[0])
        exact, echo = split_budget([budget] * heads, [True] * heads, cfg.echo_share)
        arms[name] = partial(_operator, layout=layout, exact=exact, echo=echo, theta=theta, config=cfg)
        if name == "echo":
            arms[SPARSE_ROW] = arms[name]  # a placeholder after echo: re-bound to echo's FLOPs on every seed
            route_static(fit, records, cfg)
            ops, buds = fit.routes(0) or ([ECHO] * heads, [budget] * heads)
            arms["routed (static)"] = partial(
                _routed, layout=layout, ops=ops, budgets=buds, theta=theta, config=cfg
            )
    mask, _ = window_mask(layout, d, budget)
    arms[WINDOW_ROW] = partial(
        _operator, layout=layout, exact=[budget] * heads, echo=[0.0] * heads, mask=mask
    )
    return arms


def _operator(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    layout: Layout,
    exact: list[float],
    echo: list[float],
    theta: Any = None,
    config: EchoAttentionConfig | None = None,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, float, float]:
    """One operator on ``[1, H, S, D]``: ``(out, mean FLOP fraction, mean echo coverage)``."""
    cfg = config or EchoAttentionConfig(block_size=layout.block)
    theta = theta if theta is not None else identity_theta(q.shape[1], layout, q.shape[-1])
    with torch.no_grad():
        out, alloc = sparse_echo_attention(
            q,
            k,
            v,
            layout,
            exact,
            echo,
            theta,
            **cfg.operator_kwargs(),
            backend="torch",
            exact_mask=mask,
        )
    return out, float(alloc.flops.mean()), float(alloc.coverage.mean())


def _routed(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    layout: Layout,
    ops: list[int],
    budgets: list[float],
    theta: Any,
    config: EchoAttentionConfig,
) -> tuple[torch.Tensor, float, float]:
    """Per-head routed attention on ``[1, H, S, D]`` (dense heads via SDPA)."""
    heads = q.shape[1]
    out = torch.empty_like(q)
    flops, cov = [1.0] * heads, [0.0] * heads
    dense = [h for h in range(heads) if ops[h] == DENSE]
    routed = [h for h in range(heads) if ops[h] != DENSE]
    if dense:
        out[:, dense] = torch.nn.functional.scaled_dot_product_attention(
            q[:, dense], k[:, dense], v[:, dense]
        )
    if routed:
        exact, echo = split_budget(
            [budgets[h] for h in routed], [ops[h] == ECHO for h in routed], config.echo_share
        )
        th = tuple(t[routed] for t in theta)
        with torch.no_grad():
            qr, kr, vr = (x[:, routed] for x in (q, k, v))
            o, alloc = sparse_echo_attention(
                qr,
                kr,
                vr,
                layout,
                exact,
                echo,
                th,
                **config.operator_kwargs(),
                backend="torch",
            )
        out[:, routed] = o
        for i, h in enumerate(routed):
            flops[h], cov[h] = float(alloc.flops[i]), float(alloc.coverage[i])
    return out, statistics.mean(flops), statistics.mean(cov)


# ------------------------------------------------------------------------------------------ end to end


def e2e_rows(
    host: BenchHost,
    frames: int,
    budget: float,
    block: int,
    stage3_steps: int,
    seed: int,
    repeats: int,
    only: set[str] | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Every arm (or the arms in ``only``) on ``host``'s tiny DiT at one frame count: forward error, per-layer
    attn1 error, 4-step loop error, counted FLOPs, and step times of all arms interleaved (each arm on its own
    copy of the DiT). ``only`` must keep ``"echo"`` and sparse-only at matched FLOPs."""
    base = content_dependent(host, seed)
    txt = torch.randn(1, 8, 32, generator=torch.Generator().manual_seed(seed + 1))
    x0 = blob_latents(seed + 10, frames)
    noise = host.latents(torch.randn(x0.shape, generator=torch.Generator().manual_seed(seed + 11)))
    x_t = 0.5 * host.latents(x0) + 0.5 * noise
    calls = []
    for i, tt in enumerate((300, 700)):
        xc = blob_latents(seed + 20 + i, frames)
        nc = torch.randn(xc.shape, generator=torch.Generator().manual_seed(seed + 30 + i))
        lat = host.latents((1 - tt / 1000) * xc + tt / 1000 * nc)
        calls.append({"hidden_states": lat, "timestep": torch.tensor([tt]), "encoder_hidden_states": txt})
    step = partial(_forward, x=x_t, t=torch.tensor([500]), txt=txt)
    ref_layers: dict[int, torch.Tensor] = {}
    ref_out = _with_attn1_outputs(host, base, step, ref_layers)
    ref_lat = _sample(base, noise, txt)
    common = {
        "part": host.part,
        "model": host.model,
        "frames": frames,
        "block_size": block,
        "seq_len": x0.shape[2] * 256,
        "budget": budget,
    }
    arms: dict[str, tuple[Any, Any]] = {}
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    echo_flops = budget
    configs: list[tuple[str, EchoAttentionConfig | None, tuple[int, ...]]]
    configs = [(n, c, (1, 3)) for n, c in variants(block).items()]
    configs.insert(1, ("routed (static)", variants(block)["echo"], (1, 2, 3)))
    configs += [(SPARSE_ROW, None, ())]
    configs += [(_scaled_budget(m), None, ()) for m in TIME_MATCH]
    configs += [(WINDOW_ROW, None, ())]
    configs = [c for c in configs if only is None or c[0] in only]
    for name, cfg, stages in configs:
        logger.info("part %s (%s): F=%d, %s", host.part, host.model, frames, name)
        if cfg is None:  # baselines: sparse at (multiples of) echo's counted FLOPs, the window at the budget
            scaled = dict(zip(map(_scaled_budget, TIME_MATCH), TIME_MATCH))
            arm_budget = budget if name == WINDOW_ROW else min(echo_flops * scaled.get(name, 1.0), 1.0)
            cfg = replace(variants(block)["echo"], mode="sparse")
        else:
            arm_budget = budget
        dit = copy.deepcopy(base)
        handle = apply_echo_attention(dit, replace(cfg, budget=arm_budget))
        if name == WINDOW_ROW:
            mask, _ = window_mask(Layout(frames, 256, block), dit_head_dim(host, dit), budget)
            for proc in dit.attn_processors.values():
                if isinstance(proc, RoutedAttention):
                    proc.run_routed = _window_runner(proc, mask)  # type: ignore[method-assign]
        if stages:
            report = calibrate_echo(handle, calls, stages=stages, stage3_steps=stage3_steps, lr=STAGE3_LR)
            if "errors" in report:
                routes = ", ".join(
                    f"{r['layer']}.{r['head']}:{r['operator']}@{r['budget']:.3g}" for r in report["routes"]
                )
                notes.append(f"Part {host.part} ({host.model}) F={frames}: static routes {routes}")
        layers: dict[int, torch.Tensor] = {}
        out = _with_attn1_outputs(host, dit, step, layers)
        stats = handle.stats()
        flops = statistics.mean(r["flops"] for r in stats)
        if name == "echo":
            echo_flops = flops
        handle.config.dense_first_steps = 1
        lat = _sample(dit, noise, txt)
        handle.config.dense_first_steps = 0
        arms[name] = (dit, handle)
        rows.append(
            {
                "system": name,
                "is_baseline": name in (SPARSE_ROW, WINDOW_ROW),
                **common,
                "rel_err": rel_err(out, ref_out),
                **{f"attn1_err_L{i}": rel_err(layers[i], ref_layers[i]) for i in ref_layers},
                "latents_rel_l2": rel_err(lat, ref_lat),
                "flop_ratio": flops,
                "coverage": statistics.mean(r.get("coverage", 0.0) for r in stats),
            }
        )
    times = interleaved_times(
        {"dense": partial(step, base), **{n: partial(step, dit) for n, (dit, _) in arms.items()}},
        repeats=repeats,
    )
    med = {n: statistics.median(t) for n, t in times.items()}
    for row in rows:
        row["step_time_ratio"] = med["dense"] / med[row["system"]]
        row["time_vs_sparse"] = med[SPARSE_ROW] / med[row["system"]]
        row["step_s"] = med[row["system"]]
    sparse_curve = [r for r in rows if r["system"] == SPARSE_ROW or r["system"].startswith(SCALED_PREFIX)]
    for row in rows:
        if row["system"] == "echo":
            row["sparse_err_at_time"], row["time_bracketed"] = _error_at_time(sparse_curve, row["step_s"])
    for _, handle in arms.values():
        handle.remove()
    dense_row = {
        "system": "dense (SDPA)",
        "is_baseline": False,  # the reference, not a baseline at the same budget
        **common,
        "rel_err": 0.0,
        "latents_rel_l2": 0.0,
        "flop_ratio": 1.0,
        "step_time_ratio": 1.0,
        "step_s": med["dense"],
    }
    return [dense_row, *rows], notes


def _scaled_budget(factor: float) -> str:
    return f"{SCALED_PREFIX}{factor:g}x echo's FLOPs)"


def _error_at_time(curve: list[dict[str, Any]], step_s: float) -> tuple[float, bool]:
    """Sparse-only's forward error at step time ``step_s``, interpolated linearly between the measured
    (step time, error) points of its budgets; ``bracketed`` is False when ``step_s`` lies outside them (the
    nearest point is then returned, which overstates sparse-only's error when echo is slower than all)."""
    pts = sorted((r["step_s"], r["rel_err"]) for r in curve)
    if step_s <= pts[0][0] or step_s >= pts[-1][0]:
        near = pts[0] if step_s <= pts[0][0] else pts[-1]
        return near[1], False
    for (t0, e0), (t1, e1) in zip(pts, pts[1:]):
        if t0 <= step_s <= t1:
            return e0 + (e1 - e0) * (step_s - t0) / max(t1 - t0, 1e-12), True
    return pts[-1][1], False


def dit_head_dim(host: BenchHost, dit: Any) -> int:
    attn = getattr(dit, host.blocks)[0].attn1
    return int(attn.inner_dim // attn.heads)


def _forward(dit: Any, x: torch.Tensor, t: torch.Tensor, txt: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return dit(hidden_states=x, timestep=t, encoder_hidden_states=txt, return_dict=False)[0]


def _with_attn1_outputs(host: BenchHost, dit: Any, step: Any, into: dict[int, torch.Tensor]) -> torch.Tensor:
    """``step(dit)`` with every block's attn1 output (video rows) recorded into ``into``."""

    def grab(i: int) -> Callable[..., None]:
        def hook(mod: Any, args: Any, out: Any) -> None:
            into[i] = (out[0] if isinstance(out, tuple) else out).detach()  # CogVideoX: (video, text)

        return hook

    hooks = [blk.attn1.register_forward_hook(grab(i)) for i, blk in enumerate(getattr(dit, host.blocks))]
    try:
        return step(dit)
    finally:
        for h in hooks:
            h.remove()


def _sample(dit: Any, noise: torch.Tensor, txt: torch.Tensor, n_steps: int = 4) -> torch.Tensor:
    """A ``FlowMatchEulerDiscreteScheduler`` loop of ``n_steps`` from ``noise``: the final latents."""
    from diffusers import FlowMatchEulerDiscreteScheduler

    sched: Any = FlowMatchEulerDiscreteScheduler(shift=3.0)
    sched.set_timesteps(n_steps)
    lat = noise.clone()
    for t in sched.timesteps:
        lat = sched.step(_forward(dit, lat, t[None], txt), t, lat, return_dict=False)[0]
    return lat


def _window_runner(proc: Any, mask: torch.Tensor) -> Callable[..., torch.Tensor]:
    """Replace a processor's routed path by the fixed static-window pattern (baseline only)."""

    def run(
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        heads: list[int],
        ops: list[int],
        budgets: list[float],
        extra: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        layout = proc.require_hook()
        q, k, v = (proc.take_heads(x, heads).transpose(1, 2) for x in (query, key, value))
        full = [1.0] * len(heads)
        theta = identity_theta(len(heads), layout, q.shape[-1])
        out, alloc = sparse_echo_attention(
            q, k, v, layout, full, [0.0] * len(heads), theta, backend="torch", exact_mask=mask, extra=extra
        )
        proc.params.last_alloc[proc.layer] = (heads, [ops[h] for h in heads], alloc)
        return out.transpose(1, 2)

    return run
