"""torchmetrics Metrics. Each class has a functional twin in :mod:`hf_ext.metrics.functional`.

Names resolve lazily from the method registry, so importing this package imports no host library.
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
