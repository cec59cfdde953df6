"""Fitted state of EchoAttention on one transformer: echo parameters and per-head routes, per layout.

EchoAttention (reconstructed; not verified against the paper). Theta and routes depend on the token layout
``(F, P)`` (the frame offsets and the tiles), so each calibrated layout keeps its own :class:`LayoutFit`; a
layout without one runs uncalibrated (see ``routed.py``).
"""

from __future__ import annotations

import torch

from hf_ext.echo_attention.allocation import Allocation
from hf_ext.echo_attention.core import Theta, identity_theta
from hf_ext.echo_attention.layout import Layout

Routes = tuple[list[int], list[float]]


def layout_key(layout: Layout | tuple[int, int]) -> str:
    """``"FxP"``: the key of a layout in :class:`EchoParams` and in saved calibrations."""
    f, p = (layout.frames, layout.tokens_per_frame) if isinstance(layout, Layout) else layout
    return f"{f}x{p}"


class LayoutFit(torch.nn.Module):
    """Theta and routes fitted at one layout ``(F, P)``.

    ``theta = (a, c, u, w)`` per (layer, head, frame offset ``delta``): ``a`` ``[L, H, 2F-1]``, ``c``
    ``[L, H, 2F-1, D]``, ``u``/``w`` ``[L, H, 2F-1]``; identity (``a=1``, rest 0) until stage 1 runs.
    ``route_op`` ``[L, H]`` holds 0/1/2 (dense/sparse/echo) or -1 (unrouted: use ``mode``), ``route_budget``
    the per-head FLOP budget; :meth:`routes` serves them from a host copy made when they are set, so a layer
    call reads nothing back from the device.
    """

    route_op: torch.Tensor
    route_budget: torch.Tensor

    def __init__(
        self, num_layers: int, heads: int, head_dim: int, layout: Layout, device: torch.device | None
    ):
        super().__init__()
        self.layout = layout
        a, c, u, w = (
            x.expand(num_layers, *x.shape).clone() for x in identity_theta(heads, layout, head_dim, device)
        )
        self.a, self.c, self.u, self.w = (torch.nn.Parameter(x) for x in (a, c, u, w))
        self.register_buffer("route_op", torch.full((num_layers, heads), -1, dtype=torch.long, device=device))
        self.register_buffer("route_budget", torch.ones(num_layers, heads, device=device))
        self._routes: list[Routes | None] = [None] * num_layers

    def set_routes(self, layer: int, ops: list[int], budgets: list[float]) -> None:
        """Route every head of ``layer`` (operator codes and per-head budgets)."""
        self.route_op[layer] = torch.tensor(ops)
        self.route_budget[layer] = torch.tensor(budgets)
        self._routes[layer] = (list(ops), [float(b) for b in budgets])

    def refresh_routes(self) -> None:
        """Rebuild the host copy of the routes from the buffers (after loading them)."""
        for layer, (ops, budgets) in enumerate(zip(self.route_op.tolist(), self.route_budget.tolist())):
            self._routes[layer] = None if min(ops) < 0 else (ops, budgets)

    def routes(self, layer: int) -> Routes | None:
        """Per-head (operator codes, budgets) of ``layer``, or ``None`` when unrouted."""
        return self._routes[layer]


class EchoParams(torch.nn.Module):
    """Fitted state of one transformer: one :class:`LayoutFit` per calibrated layout.

    ``last_alloc`` keeps, per layer, the routed heads, their operator codes and the :class:`Allocation` of the
    last call (for ``handle.stats()``).
    """

    def __init__(self, num_layers: int, heads: int, head_dim: int) -> None:
        super().__init__()
        self.num_layers, self.heads, self.head_dim = num_layers, heads, head_dim
        self.fits = torch.nn.ModuleDict()
        self.last_alloc: dict[int, tuple[list[int], list[int], Allocation]] = {}
        self._index: dict[tuple[tuple[int, ...], torch.device], torch.Tensor] = {}

    def layout_fits(self) -> list[tuple[str, LayoutFit]]:
        """``(key, fit)`` of every calibrated layout."""
        return [(key, fit) for key, fit in self.fits.items() if isinstance(fit, LayoutFit)]

    @property
    def calibrated(self) -> bool:
        """Whether any layout has a fit."""
        return len(self.fits) > 0

    def fit(self, layout: Layout) -> LayoutFit | None:
        """The fit of ``layout``, or ``None``."""
        found = self.fits[layout_key(layout)] if layout_key(layout) in self.fits else None
        assert found is None or isinstance(found, LayoutFit)
        return found

    def bind(self, layout: Layout, device: torch.device | None = None) -> LayoutFit:
        """A fresh fit for ``layout`` (identity theta, unrouted), replacing any earlier one."""
        fit = LayoutFit(self.num_layers, self.heads, self.head_dim, layout, device)
        self.fits[layout_key(layout)] = fit
        return fit

    def heads_index(self, heads: list[int], device: torch.device) -> torch.Tensor:
        """``heads`` as an index tensor on ``device``, made once per head list."""
        key = (tuple(heads), device)
        if key not in self._index:
            self._index[key] = torch.tensor(heads, device=device)
        return self._index[key]

    def theta(self, layer: int, heads: list[int], layout: Layout, device: torch.device) -> Theta:
        """Theta rows of ``heads`` at ``layer`` for ``layout`` (identity when the layout has no fit)."""
        fit = self.fit(layout)
        if fit is None:
            return identity_theta(len(heads), layout, self.head_dim, device)
        rows = (fit.a[layer], fit.c[layer], fit.u[layer], fit.w[layer])
        if heads == list(range(self.heads)):
            return rows
        idx = self.heads_index(heads, device)
        return tuple(x.index_select(0, idx) for x in rows)  # type: ignore[return-value]

    def routes(self, layer: int, layout: Layout) -> Routes | None:
        """Per-head (operator codes, budgets) of ``layer`` at ``layout``, or ``None`` when unrouted."""
        fit = self.fit(layout)
        return None if fit is None else fit.routes(layer)
