"""Public names never resolve to submodules.

A package attribute that names a submodule is set by Python as soon as that submodule is imported
(``import hf_ext.pkg.name`` binds ``hf_ext.pkg.name`` to the module), and from then on the lazy
``__getattr__`` is never asked: ``from hf_ext.pkg import name`` would hand the user the module instead
of the function or class the registry promises. So no public name may equal the name of a submodule
of any package on the way to the module that defines it.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

from hf_ext import _availability
from hf_ext._lazy import public_names
from hf_ext._registry import get, methods

ROOT = Path(__file__).resolve().parents[2]


def _packages_on_the_way(module: str) -> list[str]:
    """``"hf_ext.a.b.c"`` -> the packages ``["hf_ext", "hf_ext.a", "hf_ext.a.b"]`` that hold it."""
    parts = module.split(".")
    prefixes = [parts[:i] for i in range(1, len(parts))]
    return [".".join(p) for p in prefixes if (ROOT.joinpath(*p) / "__init__.py").is_file()]


def _submodules(package: str) -> set[str]:
    """Names of the modules and subpackages directly inside ``package``, read from disk (no import)."""
    return {m.name for m in pkgutil.iter_modules([str(ROOT.joinpath(*package.split(".")))])}


def test_every_registry_module_lives_in_a_package_on_disk():
    for info in methods().values():
        for name, module in info.public.items():
            path = ROOT.joinpath(*module.split("."))
            assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file(), (
                f"{info.id}: public name {name!r} points at {module!r}, which is not a module of hf_ext"
            )


@pytest.mark.parametrize("method_id", sorted(methods()))
def test_no_public_name_equals_a_submodule_name(method_id):
    collisions = [
        f"{package}.{name} is both a submodule and the public name defined in {module}"
        for name, module in get(method_id).public.items()
        for package in _packages_on_the_way(module)
        if name in _submodules(package)
    ]
    assert collisions == []


@pytest.mark.parametrize("method_id", sorted(methods()))
def test_public_names_are_not_modules_even_after_their_module_is_imported(method_id):
    info = get(method_id)
    checked = 0
    for name, module in info.public.items():
        extras = info.public_extras.get(name, info.extras)
        if any(_availability.missing(extra) for extra in extras):
            continue
        importlib.import_module(module)  # binds every submodule on the way as a package attribute
        for package in _packages_on_the_way(module):
            namespace = vars(importlib.import_module(package))
            if "__getattr__" not in namespace or name not in public_names(package):
                continue  # the package does not serve the name (the test above covers plain packages)
            value = getattr(importlib.import_module(package), name)
            assert not inspect.ismodule(value), f"`from {package} import {name}` gives a module"
            assert value is getattr(importlib.import_module(module), name), f"{package}.{name}"
            checked += 1
    if checked == 0:
        pytest.skip(f"{method_id}: the extras of its public names are not installed")
