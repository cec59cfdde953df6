"""Compute kernels: each op has a pure-PyTorch reference and a Triton path in the same module.

Ops choose their path at call time through :func:`hf_ext.kernels._dispatch.resolve_backend`. Names resolve
lazily from the method registry (``from hf_ext.kernels import block_sparse_attention``), so importing this
package imports neither torch nor triton.
"""

from __future__ import annotations

from typing import Any

from hf_ext import _public_names, lazy_attribute


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return lazy_attribute(__name__, name, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *_public_names(__name__)})
