"""Lazy public names (PEP 562) and the aliases of moved modules, both read from the method registry.

Every package of hf-ext opts in with ``__getattr__, __dir__ = lazy_package(__name__)``: importing it then
imports no host library, and each public name imports its host on first use. This module, not the package
face ``hf_ext/__init__.py``, holds the machinery, so no subpackage imports the package face.

A module that moved keeps its old dotted path for one release: :class:`MovedModuleFinder` (installed by
``import hf_ext``) answers the old path with the new module and a ``DeprecationWarning``. The moves are
declared per method in its registry entry (``MethodInfo.moved``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Callable, Sequence
from functools import cache
from types import ModuleType
from typing import Any

REMOVED_IN = "0.3"


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

    Submodules stay importable as usual (``import hf_ext.trl.camp.core``).
    """

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return lazy_attribute(package, name, vars(sys.modules[package]))

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *public_names(package)})

    return __getattr__, __dir__


@cache
def moved_modules() -> dict[str, str]:
    """Old dotted module path -> new one, over every method's ``MethodInfo.moved``."""
    from hf_ext._registry import methods

    table: dict[str, str] = {}
    for info in methods().values():
        table.update(info.moved)
    return table


class _AliasLoader(importlib.abc.Loader):
    """Loads an old module path as the module it moved to, with a ``DeprecationWarning``."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"`{self.old}` moved to `{self.new}`; the old path will be removed in hf-ext {REMOVED_IN}. "
            f"Import from `{self.new}` (or `from hf_ext import <Name>`).",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the new module is already executed."""


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the old paths of moved modules (first on ``sys.meta_path``, so a moved package's old children
    resolve here rather than being loaded a second time under the old name)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("hf_ext.") or fullname.startswith("hf_ext._"):
            return None  # private modules (the registry among them) never move
        new = moved_modules().get(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(fullname, new))


def install_moved_module_finder() -> None:
    """Put :class:`MovedModuleFinder` first on ``sys.meta_path`` (once per process)."""
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
