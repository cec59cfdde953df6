"""hf-ext: recent ML research methods as native components of the libraries people already use.

Every public name is resolved lazily (PEP 562) from the method registry, so ``import hf_ext`` imports
neither torch nor any host library; ``from hf_ext import CAMPTrainer`` imports trl on first use.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

__version__ = "0.1.0"

logging.getLogger("hf_ext").addHandler(logging.NullHandler())


def _public_names(under: str = "hf_ext") -> dict[str, tuple[str, tuple[str, ...]]]:
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
            table[name] = (module, info.extras)
    return table


def papers() -> list[dict[str, object]]:
    """The ``_paper`` metadata (title, arXiv id, citation, venue, reconstructed parts) of every method."""
    from hf_ext._registry import methods

    return [dict(info.paper, method=info.id) for info in methods().values()]


def lazy_attribute(package: str, name: str, namespace: dict[str, Any]) -> Any:
    """Resolve registry name ``name`` for ``package`` (a PEP 562 ``__getattr__`` body), caching it in ``namespace``.

    Raises:
        AttributeError: ``name`` is not public in ``package``; the message suggests the closest name.
        ImportError: the host library behind ``name`` is missing; the message gives the ``pip install`` line.
    """
    table = _public_names(package)
    if name not in table:
        import difflib

        close = difflib.get_close_matches(name, [*table, *namespace], n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise AttributeError(f"module {package!r} has no attribute {name!r}.{hint}")
    module, extras = table[name]
    from hf_ext._availability import require

    for extra in extras:
        require(extra, f"`{name}`")
    import importlib

    value = getattr(importlib.import_module(module), name)
    namespace[name] = value
    return value


def lazy_package(package: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """PEP 562 ``(__getattr__, __dir__)`` serving the registry names defined under ``package``.

    A subpackage opts in with ``__getattr__, __dir__ = lazy_package(__name__)``; importing it then imports no
    host library, and each name imports its host on first use.
    """

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return lazy_attribute(package, name, vars(sys.modules[package]))

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *_public_names(package)})

    return __getattr__, __dir__


__getattr__, __dir__ = lazy_package(__name__)
