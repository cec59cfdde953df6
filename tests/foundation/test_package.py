"""The package contract: lazy import, registry-driven public names, generated README sections."""

from __future__ import annotations

import importlib
import inspect
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import hf_ext
from hf_ext import _availability
from hf_ext._readme import GENERATED, ROW_LIMIT, generated_sections, last_full_run
from hf_ext._registry import get, methods

ROOT = Path(__file__).resolve().parents[2]
HEAVY = (
    "torch",
    "transformers",
    "trl",
    "peft",
    "diffusers",
    "timm",
    "torchmetrics",
    "sklearn",
    "pettingzoo",
    "triton",
    "numpy",
)


def _run(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout


def test_import_loads_no_host():
    loaded = json.loads(
        _run(f"import sys, json, hf_ext; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    )
    assert loaded == []


def test_listing_names_loads_no_host():
    code = (
        "import sys, json, hf_ext; dir(hf_ext); "
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    assert json.loads(_run(code)) == []


def test_import_time_under_half_a_second():
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import hf_ext"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stderr
    row = [line for line in out.splitlines() if line.rstrip().endswith("| hf_ext")][-1]
    cumulative_us = int(row.split("|")[1])
    assert cumulative_us < 500_000


def test_dir_lists_every_public_name():
    names = {n for m in methods().values() for n in m.public}
    assert names <= set(dir(hf_ext))
    assert "papers" in dir(hf_ext)


def test_unknown_name_suggests_closest():
    some = next(iter(next(iter(methods().values())).public))
    with pytest.raises(AttributeError, match=f"Did you mean '{some}'"):
        getattr(hf_ext, some[:-1] + "x")


def _name_needing_an_extra(method_id: str) -> tuple[str, str]:
    info = get(method_id)
    for name in info.public:
        extras = info.public_extras.get(name, info.extras)
        if extras:
            return name, extras[0]
    pytest.skip(f"{method_id}: every public name is host-free")


@pytest.mark.parametrize("method_id", sorted(methods()))
def test_missing_extra_names_the_pip_line(monkeypatch, method_id):
    name, extra = _name_needing_an_extra(method_id)
    monkeypatch.setitem(_availability.EXTRAS, extra, [("hf-ext-no-such-dist", "1.0", None)])
    _availability._unmet.cache_clear()
    monkeypatch.delitem(vars(hf_ext), name, raising=False)
    try:
        extras_list = rf"`pip install -e '\.\[([a-z-]+,)*{extra}(,[a-z-]+)*\]'`"
        with pytest.raises(ImportError, match=rf"hf-ext-no-such-dist.*{extras_list}"):
            getattr(hf_ext, name)
    finally:
        _availability._unmet.cache_clear()


def test_version_ranges():
    assert _availability._in_range("1.16.3", "1.16", "1.17")
    assert not _availability._in_range("1.17.0", "1.16", "1.17")
    assert _availability._in_range("2.14.1+cpu", "2.14", None)
    assert not _availability._in_range("0.21.1", "0.21.2", "0.22")
    with pytest.raises(KeyError, match="unknown extra 'nope'"):
        _availability.missing("nope")


def test_unknown_method_names_known_ones():
    with pytest.raises(KeyError, match="Known methods: "):
        get("no-such-method")


@pytest.mark.parametrize("method_id", sorted(methods()))
def test_registry_entry_is_complete(method_id):
    info = get(method_id)
    assert (ROOT / "docs" / "methods" / f"{method_id}.md").is_file(), "docs page missing"
    assert info.citation.lstrip().startswith("@"), "citation must be BibTeX"
    assert set(info.extras) <= set(_availability.EXTRAS)
    assert (ROOT / "benchmarks" / method_id / "bench.py").is_file(), "benchmarks/<id>/bench.py missing"
    assert info.slot and info.use, "the README row needs a host slot and a one-line use"
    for module in info.public.values():
        assert importlib.util.find_spec(module) is not None, module


@pytest.mark.parametrize("method_id", sorted(methods()))
def test_public_names_resolve_and_carry_paper(method_id):
    info = get(method_id)
    for extra in info.extras:
        if _availability.missing(extra):
            pytest.skip(f"extra {extra} not installed")
    for name in info.public:
        obj = getattr(hf_ext, name)
        if inspect.isclass(obj):
            assert getattr(obj, "_paper", None) == info.paper, f"{name}._paper must be paper({method_id!r})"


def test_papers_lists_every_method():
    assert [p["method"] for p in hf_ext.papers()] == list(methods())


@pytest.mark.parametrize("page", sorted(GENERATED))
def test_generated_sections_are_current(page):
    text = (ROOT / page).read_text()
    for name, body in generated_sections(page).items():
        assert f"{body}\n<!-- {name}:end -->" in text, f"{page}: section {name} is stale; run `make readme`"


def test_every_package_folder_is_a_package():
    for folder in (ROOT / "hf_ext").rglob("*"):
        if folder.is_dir() and folder.name != "__pycache__" and any(folder.glob("*.py")):
            assert (folder / "__init__.py").is_file(), f"{folder} would be left out of the wheel"


@pytest.mark.slow
def test_the_wheel_holds_the_library_only(tmp_path):
    source = tmp_path / "src"
    skip = shutil.ignore_patterns(".*", "__pycache__", "build", "dist", "site", "*.egg-info", "bench-out")
    shutil.copytree(ROOT, source, ignore=skip)
    build = [
        sys.executable,
        "-m",
        "build",
        "--wheel",
        "--no-isolation",
        "--outdir",
        str(tmp_path),
        str(source),
    ]
    subprocess.run(build, check=True, capture_output=True)
    (wheel,) = tmp_path.glob("hf_ext-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"hf_ext", f"hf_ext-{hf_ext.__version__}.dist-info"}
    assert not [n for n in names if "bench" in n.rpartition("/")[2] or "byte_llama" in n]
    folders = {n.split("/")[1] for n in names if n.startswith("hf_ext/") and n.count("/") > 1}
    assert folders == {*methods(), "metrics", "estimators", "kernels", "_registry", "testing"}


def test_no_forbidden_top_level_names():
    for name in ("kernels", "metrics", "estimators", "utils", "models"):
        assert not (ROOT / name).exists(), f"top-level {name}/ would shadow or leak an import name"
    for folder in (ROOT / "tests").rglob("*"):
        if folder.is_dir():
            assert folder.name not in ("kernels", "metrics", "utils", "models"), folder


def test_public_extras_override_the_method_extras():
    from hf_ext._lazy import public_names

    table = public_names()
    for info in methods().values():
        for name, extras in info.public_extras.items():
            assert name in info.public, f"{info.id}: public_extras names {name!r}, which is not public"
            assert table[name][1] == extras


def test_readme_methods_table_rows_are_short_and_carry_a_status():
    text = (ROOT / "README.md").read_text()
    table = text.split("<!-- feature-table:start")[1].split("<!-- feature-table:end -->")[0]
    rows = [line for line in table.splitlines() if line.startswith("| [")]
    assert len(rows) == len(methods())
    for row in rows:
        assert len(row) <= ROW_LIMIT, f"{len(row)} characters: {row}"
        assert row.rstrip(" |").rsplit("|", 1)[1].strip() != "see docs", f"no full-run status: {row}"


@pytest.mark.parametrize("method_id", sorted(methods()))
def test_docs_page_states_the_last_full_run(method_id):
    status = last_full_run(method_id)
    assert status.startswith(("claim met", "claim missed", "not recorded")), status
