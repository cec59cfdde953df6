"""Every method has the same shape (docs/layout.md), checked over the registry, new methods included.

The one rule: a method lives in ``hf_ext/<id>/`` (library code only), its benchmark in ``benchmarks/<id>/``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from hf_ext._registry import methods

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "hf_ext"
BENCHMARKS = ROOT / "benchmarks"
PILLARS = ("metrics", "estimators", "kernels")
SHARED = ("_registry", "testing")
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
# A host class -> the file named after its slot (docs/layout.md).
SLOT_FILES = {
    re.compile(r"^class \w+\((\w+\.)?(DPOTrainer|GRPOTrainer|Trainer)\):", re.M): re.compile(r"trainer"),
    re.compile(r"^class \w+\((\w+\.)?ParallelEnv\b", re.M): re.compile(r"env_\w+"),
    re.compile(r"^class \w+\((\w+\.)?(BaseTuner|PeftConfig)\b", re.M): re.compile(r"model|config"),
}


def _folder(method_id: str) -> Path:
    return PKG / method_id


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


def test_the_package_holds_one_folder_per_method_and_the_pillars():
    folders = {p.name for p in PKG.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == {*IDS, *PILLARS, *SHARED}, sorted(folders ^ {*IDS, *PILLARS, *SHARED})


def test_the_package_holds_no_benchmark_code():
    offenders = [
        str(p.relative_to(ROOT))
        for p in _library_modules()
        if re.search(r"(^|_)bench", p.stem) or any(m.startswith("benchmarks") for m, _ in _imports(p))
    ]
    offenders = [o for o in offenders if o != "hf_ext/cli.py"]  # the CLI loads benchmarks/ from a checkout
    assert not offenders, offenders


@pytest.mark.parametrize("method_id", IDS)
def test_method_folder_has_the_house_files(method_id):
    folder = _folder(method_id)
    names = {p.name for p in folder.glob("*.py")}
    assert {"__init__.py", "core.py"} <= names, f"{method_id}: has {sorted(names)}"
    assert not (folder / "byte_llama").exists()
    tuner = folder / "tuner"
    if tuner.exists():
        assert {p.name for p in tuner.glob("*.py")} == {"__init__.py", "config.py", "layer.py", "model.py"}


@pytest.mark.parametrize("method_id", IDS)
def test_benchmark_folder_is_named_after_its_id(method_id):
    folder = BENCHMARKS / method_id
    assert {"__init__.py", "bench.py"} <= {p.name for p in folder.glob("*.py")}, method_id
    module = importlib.import_module(f"benchmarks.{method_id}.bench")
    assert callable(module.run) and callable(module.grid), method_id


def test_host_classes_live_in_the_file_named_after_their_slot():
    misplaced = [
        f"{path.relative_to(ROOT)} defines a {host.pattern!r} class"
        for method_id in IDS
        for path in _folder(method_id).rglob("*.py")
        for host, stem in SLOT_FILES.items()
        if host.search(path.read_text()) and not stem.fullmatch(path.stem)
    ]
    assert not misplaced, misplaced


@pytest.mark.parametrize("method_id", IDS)
def test_inits_are_lazy(method_id):
    folder = _folder(method_id)
    init = folder / "__init__.py"
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
    params = inspect.signature(importlib.import_module(f"benchmarks.{method_id}.bench").run).parameters
    # `model` (from `hf-ext bench --model`) is the one optional extra; the tour never passes it
    assert list(params) in (["quick", "seed"], ["quick", "seed", "model"]), method_id
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values()), method_id
    assert "model" not in params or params["model"].default is None, method_id


@pytest.mark.parametrize("method_id", IDS)
def test_config_uses_shared_validation(method_id):
    config = _folder(method_id) / "config.py"
    if config.exists():
        assert any(m.startswith("hf_ext._validation") for m, _ in _imports(config)), f"{method_id}: config.py"


def test_library_imports_flow_one_way():
    bad = []
    for path in _library_modules():
        name = _module_name(path)
        front = name.startswith(("hf_ext.cli", "hf_ext.testing", "hf_ext.__main__"))
        for module, _ in _imports(path):
            if module.startswith("hf_ext.cli") and name != "hf_ext.__main__":
                bad.append(f"{name} imports {module}")
            elif not front and module.startswith(("benchmarks", "hf_ext.testing")):
                bad.append(f"{name} imports {module}")
            elif (
                name.startswith("hf_ext.kernels")
                and module.startswith("hf_ext.")
                and not module.startswith(("hf_ext.kernels", "hf_ext._"))
            ):
                bad.append(f"{name} (a kernel) imports {module}")
    assert not bad, "\n".join(bad)


def test_threads_and_timers_only_through_the_timing_module():
    offenders = []
    for path in _library_modules():
        if path.name == "_timing.py":
            continue
        text = path.read_text()
        for word in ("set_num_threads(", "perf_counter("):
            if word in text:
                offenders.append(f"{path.relative_to(ROOT)} calls {word[:-1]}")
    assert not offenders, "use hf_ext._timing.Timer (benchmarks: harness.pinned_threads):\n" + "\n".join(
        offenders
    )


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
