"""transformers decoding strategies (``model.generate(..., custom_generate=...)``), served lazily from the registry.

``from hf_ext.generation import VegasConfig, vegas_generate`` imports transformers on first use only.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    from hf_ext import lazy_attribute

    return lazy_attribute(__name__, name, globals())


def __dir__() -> list[str]:
    from hf_ext import _public_names

    return sorted({*globals(), *_public_names(__name__)})
