"""Fitted state of EchoAttention on one transformer: echo parameters and per-head routes.

EchoAttention (reconstructed; not verified against the paper). Everything here is [reconstructed] from the
one-line description of the method (Sparse operator + Echo operator + per-head routing); see
``docs/methods/echo_attention.md``.
"""

from __future__ import annotations

import torch

from hf_ext.diffusers.echo_attention.allocation import Allocation
from hf_ext.diffusers.echo_attention.core import Theta, identity_theta
from hf_ext.diffusers.echo_attention.layout import Layout


class EchoParams(torch.nn.Module):
    """Fitted state of one transformer: echo parameters theta and per-head routes, with their layout.

    ``theta = (a, c, u, w)`` per (layer, head, frame offset ``delta``): ``a`` ``[L, H, 2F-1]``, ``c``
    ``[L, H, 2F-1, D]``, ``u``/``w`` ``[L, H, 2F-1]``; identity (``a=1``, rest 0) until stage 1 runs.
    ``route_op`` ``[L, H]`` holds 0/1/2 (dense/sparse/echo) or -1 (unrouted: use ``mode``), ``route_budget``
    the per-head FLOP budget. Both are valid only for the calibration ``layout`` ``(F, P)``. ``last_alloc``
    keeps, per layer, the routed heads and :class:`Allocation` of the last call (for ``handle.stats()``).
    """

    route_op: torch.Tensor
    route_budget: torch.Tensor

    def __init__(self, num_layers: int, heads: int, head_dim: int) -> None:
        super().__init__()
        self.num_layers, self.heads, self.head_dim = num_layers, heads, head_dim
        self.layout: Layout | None = None
        self.a: torch.nn.Parameter | None = None
        self.c: torch.nn.Parameter | None = None
        self.u: torch.nn.Parameter | None = None
        self.w: torch.nn.Parameter | None = None
        self.last_alloc: dict[int, tuple[list[int], Allocation]] = {}
        self.register_buffer("route_op", torch.full((num_layers, heads), -1, dtype=torch.long))
        self.register_buffer("route_budget", torch.ones(num_layers, heads))

    def bind(self, layout: Layout, device: torch.device | None = None) -> None:
        """Fix the calibration layout and reset theta to identity (shape ``2F-1`` offsets)."""
        self.layout = layout
        a, c, u, w = identity_theta(self.heads, layout, self.head_dim, device)
        rep = (self.num_layers,)
        self.a, self.c, self.u, self.w = (
            torch.nn.Parameter(x.expand(*rep, *x.shape).clone()) for x in (a, c, u, w)
        )

    def check_layout(self, layout: Layout) -> None:
        """Raise when theta/routes were fitted at another ``(F, P)``."""
        ref = self.layout
        if ref is not None and (ref.frames, ref.tokens_per_frame) != (layout.frames, layout.tokens_per_frame):
            raise ValueError(
                f"EchoAttention was calibrated for (F, P) = ({ref.frames}, {ref.tokens_per_frame}) but is "
                f"called with (F, P) = ({layout.frames}, {layout.tokens_per_frame}); routes and theta are "
                "layout-specific. "
                "Recalibrate at this layout (calibrate_echo) or use a handle without calibration."
            )

    def theta(
        self, layer: int, heads: list[int], layout: Layout, head_dim: int, device: torch.device
    ) -> Theta:
        """Theta rows of ``heads`` at ``layer`` (identity when unfitted)."""
        if self.a is None:
            return identity_theta(len(heads), layout, head_dim, device)
        assert self.c is not None and self.u is not None and self.w is not None
        return (self.a[layer, heads], self.c[layer, heads], self.u[layer, heads], self.w[layer, heads])

    def routes(self, layer: int) -> tuple[list[int], list[float]] | None:
        """Per-head (operator codes, budgets) of ``layer``, or ``None`` when unrouted."""
        op = self.route_op[layer]
        if bool((op < 0).any()):
            return None
        return op.tolist(), self.route_budget[layer].tolist()
