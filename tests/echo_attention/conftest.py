"""Helpers shared by the EchoAttention tests."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def route_all():
    """``route_all(handle, frames, tokens, op=0)``: every head of every layer routed to ``op``."""

    def route(handle: Any, frames: int, tokens: int, op: int = 0) -> Any:
        from hf_ext.echo_attention.layout import Layout

        p = handle.params
        fit = p.bind(Layout(frames, tokens, handle.config.block_size))
        for layer in range(p.num_layers):
            fit.set_routes(layer, [op] * p.heads, [1.0] * p.heads)
        return fit

    return route
