"""Backend selection shared by every kernel op (``backend="auto"|"torch"|"triton"``).

``auto`` picks Triton when triton is installed and the tensors are on CUDA, or on CPU when the process
runs in Triton's interpreter mode (``TRITON_INTERPRET=1`` set before the kernels are defined; tests only);
otherwise the PyTorch reference. Triton itself is imported only by a module's kernel factory, on first use.
This module imports neither torch nor triton, so configs can validate ``backend`` against :data:`BACKENDS`
without loading either.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

BACKENDS = ("auto", "torch", "triton")
_WARNED: set[tuple[str, str]] = set()


def warn_fallback(op: str, reason: str) -> None:
    """Log, once per ``(op, reason)`` in a process, that ``op``'s fast path did not run and the PyTorch
    reference did instead, naming why (dtype, head size, device, missing package...)."""
    if (op, reason) in _WARNED:
        return
    _WARNED.add((op, reason))
    logger.warning(
        "hf_ext kernel `%s`: the fast path does not apply (%s); running the PyTorch reference instead, "
        "which can be several times slower.",
        op,
        reason,
    )


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


def resolve_fast_path(op: str, backend: str, *tensors: torch.Tensor, minimum: int = 1, **sizes: int) -> str:
    """:func:`resolve_backend` for an op whose Triton kernel needs power-of-two ``sizes`` ``>= minimum``.

    Under ``backend="auto"`` a fast path that cannot run falls back to ``"torch"`` with one warning per
    reason (:func:`warn_fallback`): CUDA tensors without triton installed, or sizes the kernel does not take.
    An explicit ``backend="triton"`` raises instead (:func:`check_triton_sizes`).
    """
    path = resolve_backend(backend, *tensors)
    if backend != "auto":
        if path == "triton":
            check_triton_sizes(minimum, **sizes)
        return path
    if path == "torch" and tensors and all(t.is_cuda for t in tensors):
        warn_fallback(op, "device cuda without triton installed (pip install triton)")
        return path
    bad = {n: v for n, v in sizes.items() if v < minimum or v & (v - 1)}
    if path == "triton" and bad:
        what = ", ".join(f"{'head size' if n == 'D' else n} {v}" for n, v in bad.items())
        warn_fallback(op, f"{what}; the Triton kernel takes powers of two >= {minimum}")
        return "torch"
    return path


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
