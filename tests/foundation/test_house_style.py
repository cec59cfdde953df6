"""Every method has the same shape (docs/layout.md), checked over the registry, new methods included."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import subprocess
import sys
import warnings
from functools import cache
from pathlib import Path

import pytest

from hf_ext._lazy import moved_modules
from hf_ext._registry import methods

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "hf_ext"
AREAS = ("trl", "peft", "generation", "transformers", "diffusers", "timm", "marl")
HOSTS = (
    "transformers",
    "trl",
    "peft",
    "diffusers",
    "timm",
    "torchmetrics",
    "sklearn",
    "pettingzoo",
    "triton",
)
HEAVY = ("torch", "numpy", *HOSTS)
PLANNING = re.compile(r"\b(the|this|our) (spec|issue)\b|\bspec's\b|\bissue's\b|\bK[1-9]\b", re.IGNORECASE)
# Where a module of a method folder may be imported from: benchmark code only by benchmark code.
BENCH_MODULE = re.compile(r"(^|\.)(bench|_bench_\w+)$")


def _folder(method_id: str) -> Path:
    module = methods()[method_id].bench.partition(":")[0]
    return ROOT / Path(*module.split(".")[:-1])


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


@cache
def _imports(path: Path) -> tuple[tuple[str, bool], ...]:
    """Every module ``path`` imports, absolute, with whether the import is at module level."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            found.append((base, id(node) in top))
            found += [(f"{base}.{a.name}", id(node) in top) for a in node.names]
    return tuple(found)


def _library_modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def _is_lazy_init(path: Path) -> bool:
    body = ast.parse(path.read_text()).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    allowed = [
        "from __future__ import annotations",
        "from hf_ext._lazy import lazy_package",
        "__getattr__, __dir__ = lazy_package(__name__)",
        "(__getattr__, __dir__) = lazy_package(__name__)",
    ]
    return bool(body) and all(ast.unparse(node) in allowed for node in body)


IDS = sorted(methods())


@pytest.mark.parametrize("method_id", IDS)
def test_method_folder_is_named_after_its_id(method_id):
    folder = _folder(method_id)
    rel = folder.relative_to(PKG).parts
    assert rel[-1] == method_id, f"{method_id}: benchmark lives in {folder}, not a folder named {method_id!r}"
    assert len(rel) == 1 or (len(rel) == 2 and rel[0] in AREAS), f"{method_id}: unexpected location {rel}"
    assert methods()[method_id].bench == f"{_module_name(folder / 'bench.py')}:run"


@pytest.mark.parametrize("method_id", IDS)
def test_method_folder_has_the_house_files(method_id):
    folder = _folder(method_id)
    names = {p.name for p in folder.glob("*.py")}
    assert {"__init__.py", "core.py", "bench.py"} <= names, f"{method_id}: has {sorted(names)}"
    for name in names:
        stem = name[:-3]
        assert not re.fullmatch(r"bench_\w+|\w+_bench|_bench", stem), (
            f"{method_id}: benchmark code {name} must be _bench_*.py"
        )
        if stem == "task":
            assert folder.parent.name == "timm", (
                f"{method_id}: task.py is the timm ClassificationTask file only"
            )


@pytest.mark.parametrize("method_id", IDS)
def test_inits_are_lazy(method_id):
    folder = _folder(method_id)
    for init in {folder / "__init__.py", folder.parent / "__init__.py"} - {PKG / "__init__.py"}:
        assert _is_lazy_init(init), f"{init.relative_to(ROOT)} must only hold lazy_package(__name__)"


@pytest.mark.parametrize("method_id", IDS)
def test_importing_the_method_package_imports_no_host(method_id):
    module = _module_name(_folder(method_id) / "__init__.py")
    code = f"import sys, json, {module}; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert json.loads(out.stdout) == [], f"`import {module}` imported {out.stdout.strip()}"


@pytest.mark.parametrize("method_id", IDS)
def test_core_is_short_and_host_free(method_id):
    core = _folder(method_id) / "core.py"
    lines = len(core.read_text().splitlines())
    assert lines <= 400, f"{method_id}: core.py has {lines} lines; keep the math readable (about 300 at most)"
    for module, top_level in _imports(core):
        root = module.split(".")[0]
        assert not (top_level and root in HOSTS), (
            f"{method_id}: core.py imports the host {module} at module level"
        )
        assert not module.startswith(("hf_ext.testing", "hf_ext.cli")), (
            f"{method_id}: core.py imports {module}"
        )


@pytest.mark.parametrize("method_id", IDS)
def test_bench_run_signature(method_id):
    module, _, fn = methods()[method_id].bench.partition(":")
    params = inspect.signature(getattr(importlib.import_module(module), fn)).parameters
    assert list(params) == ["quick", "seed"], method_id
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values()), method_id


@pytest.mark.parametrize("method_id", IDS)
def test_config_uses_shared_validation(method_id):
    config = _folder(method_id) / "config.py"
    if config.exists():
        assert any(m.startswith("hf_ext._validation") for m, _ in _imports(config)), f"{method_id}: config.py"


def test_library_imports_flow_one_way():
    bad = []
    for path in _library_modules():
        name = _module_name(path)
        in_bench = bool(BENCH_MODULE.search(name)) or name.startswith(
            ("hf_ext.cli", "hf_ext.testing", "hf_ext.__main__")
        )
        for module, _ in _imports(path):
            if module.startswith("hf_ext.cli") and name != "hf_ext.__main__":
                bad.append(f"{name} imports {module}")
            elif not in_bench and (BENCH_MODULE.search(module) or module.startswith("hf_ext.testing")):
                bad.append(f"{name} imports {module}")
            elif (
                name.startswith("hf_ext.kernels")
                and module.startswith("hf_ext.")
                and not module.startswith(("hf_ext.kernels", "hf_ext._"))
            ):
                bad.append(f"{name} (a kernel) imports {module}")
    assert not bad, "\n".join(bad)


def test_threads_and_timers_only_through_benchmarking():
    offenders = []
    for path in _library_modules():
        if path.name == "benchmarking.py":
            continue
        text = path.read_text()
        for word in ("set_num_threads(", "perf_counter("):
            if word in text:
                offenders.append(f"{path.relative_to(ROOT)} calls {word[:-1]}")
    assert not offenders, "use hf_ext.benchmarking.pinned_threads / Timer:\n" + "\n".join(offenders)


def test_metrics_pair_with_functional_twins():
    metrics = {p.stem for p in (PKG / "metrics").glob("*.py")} - {"__init__"}
    functional = {p.stem for p in (PKG / "metrics" / "functional").glob("*.py")} - {"__init__"}
    assert metrics == functional


def test_estimators_use_sklearn_parameter_constraints():
    pytest.importorskip("sklearn")
    from sklearn.base import BaseEstimator

    for path in (PKG / "estimators").glob("*.py"):
        module = importlib.import_module(_module_name(path))
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__ or not issubclass(cls, BaseEstimator):
                continue
            assert "_parameter_constraints" in vars(cls) or any(
                "_parameter_constraints" in vars(b)
                for b in cls.__mro__[1:]
                if b.__module__.startswith("hf_ext")
            ), cls
            assert not hasattr(cls, "_validate_params_"), (
                f"{cls.__name__}: use sklearn's _parameter_constraints"
            )


def test_tests_follow_the_method_layout():
    dirs = {p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert dirs <= {*IDS, "foundation", "fixtures"}, sorted(dirs - {*IDS, "foundation", "fixtures"})
    for method_id in IDS:
        assert (ROOT / "tests" / method_id).is_dir(), method_id
        prefixed = [p.name for p in (ROOT / "tests" / method_id).glob(f"test_{method_id}_*.py")]
        assert not prefixed, f"drop the method prefix: {prefixed}"


def test_no_reference_to_planning_documents():
    files = [*_library_modules(), *(ROOT / "docs").rglob("*.md"), ROOT / "README.md"]
    hits = [
        f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
        for path in files
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if PLANNING.search(line)
    ]
    assert not hits, "say what the paper, the host or the docs page says instead:\n" + "\n".join(hits)


@pytest.mark.parametrize("old", sorted(moved_modules()))
def test_moved_module_warns_and_aliases(old):
    new = moved_modules()[old]
    for name in [m for m in sys.modules if m == old or m.startswith(old + ".")]:
        del sys.modules[name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert any(issubclass(w.category, DeprecationWarning) and new in str(w.message) for w in caught)
