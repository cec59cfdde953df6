"""Backend selection shared by every kernel op (``backend="auto"|"torch"|"triton"``).

``auto`` picks Triton when triton is installed and the tensors are on CUDA, or on CPU when the process
runs in Triton's interpreter mode (``TRITON_INTERPRET=1`` set before the kernels are defined; tests only);
otherwise the PyTorch reference. Triton itself is imported only by a module's kernel factory, on first use.
This module imports neither torch nor triton, so configs can validate ``backend`` against :data:`BACKENDS`
without loading either.
"""

from __future__ import annotations

import importlib.util
import os
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

BACKENDS = ("auto", "torch", "triton")


@cache
def triton_installed() -> bool:
    """Whether the ``triton`` distribution is importable (checked without importing it)."""
    return importlib.util.find_spec("triton") is not None


def interpret_mode() -> bool:
    """Whether Triton kernels run in the CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def resolve_backend(backend: str, *tensors: torch.Tensor) -> str:
    """Return ``"torch"`` or ``"triton"`` for tensors on one device.

    Raises:
        ValueError: ``backend`` is not one of ``auto``, ``torch``, ``triton``.
        RuntimeError: ``backend="triton"`` is asked for where Triton cannot run.
    """
    if backend not in BACKENDS:
        raise ValueError(f"`backend` must be one of {BACKENDS}, got {backend!r}.")
    if backend == "torch":
        return "torch"
    on_cuda = all(t.is_cuda for t in tensors)
    usable = triton_installed() and (on_cuda or interpret_mode())
    if backend == "triton" and not usable:
        if not triton_installed():
            raise RuntimeError(
                "`backend='triton'` needs triton; install it with `pip install 'triton>=3.2'`."
            )
        raise RuntimeError(
            "`backend='triton'` with CPU tensors runs only in Triton's interpreter: set TRITON_INTERPRET=1 "
            "in the environment before importing the kernels, or pass backend='torch'."
        )
    return "triton" if usable else "torch"


def check_triton_sizes(minimum: int = 1, **sizes: int) -> None:
    """Raise ``ValueError`` unless every named size is a power of two ``>= minimum`` (Triton block shapes)."""
    for name, val in sizes.items():
        if val < minimum or val & (val - 1):
            floor = f" >= {minimum}" if minimum > 1 else ""
            raise ValueError(
                f"`{name}` must be a power of two{floor} on the Triton backend, got {val}. "
                "Use backend='torch'."
            )


def check_float(**tensors: torch.Tensor) -> None:
    """Raise ``TypeError`` naming the first argument that is not a floating-point tensor."""
    for name, t in tensors.items():
        if not t.is_floating_point():
            raise TypeError(f"`{name}` must be a floating-point tensor, got dtype {t.dtype}.")
