"""Lazy public names (PEP 562), read from the method registry.

Every package of hf-ext opts in with ``__getattr__, __dir__ = lazy_package(__name__)``: importing it then
imports no host library, and each public name imports its host on first use. This module, not the package
face ``hf_ext/__init__.py``, holds the machinery, so no subpackage imports the package face.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from functools import cache
from typing import Any


@cache
def public_names(under: str = "hf_ext") -> dict[str, tuple[str, tuple[str, ...]]]:
    """Public name -> (defining module, extras it needs), read from the registry.

    ``under`` keeps only names defined inside that package (``hf_ext.metrics`` serves its own names).
    """
    from hf_ext._registry import methods

    table: dict[str, tuple[str, tuple[str, ...]]] = {}
    for info in methods().values():
        for name, module in info.public.items():
            if not module.startswith(under + ".") and module != under:
                continue
            if name in table:
                raise RuntimeError(f"public name {name!r} is registered twice")
            table[name] = (module, info.public_extras.get(name, info.extras))
    return table


def lazy_attribute(package: str, name: str, namespace: dict[str, Any]) -> Any:
    """Resolve registry name ``name`` for ``package`` (a PEP 562 ``__getattr__``), cached in ``namespace``.

    Raises:
        AttributeError: ``name`` is not public in ``package``; the message suggests the closest name.
        ImportError: the host library behind ``name`` is missing; the message gives the ``pip install`` line.
    """
    table = public_names(package)
    if name not in table:
        import difflib

        close = difflib.get_close_matches(name, [*table, *namespace], n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise AttributeError(f"module {package!r} has no attribute {name!r}.{hint}")
    module, extras = table[name]
    from hf_ext._availability import require_all

    require_all(extras, f"`{name}`")
    value = getattr(importlib.import_module(module), name)
    namespace[name] = value
    return value


def lazy_package(package: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """PEP 562 ``(__getattr__, __dir__)`` serving the registry names defined under ``package``.

    Submodules stay importable as usual (``import hf_ext.camp.core``).
    """

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return lazy_attribute(package, name, vars(sys.modules[package]))

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *public_names(package)})

    return __getattr__, __dir__
