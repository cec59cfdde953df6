"""The `hf-ext` command line: list, bench (table and JSON schema), tour (failures reported, exit code)."""

from __future__ import annotations

import json
import sys
import types

import pytest

from hf_ext import cli
from hf_ext._registry import MethodInfo, methods
from hf_ext.benchmarking import BenchReport, Headline, format_table


def _fake_bench(*, quick: bool, seed: int) -> BenchReport:
    rows = [
        {"system": "base", "is_baseline": True, "error": 0.4, "seconds": 1.0},
        {"system": "other", "is_baseline": True, "error": 0.3, "seconds": 2.0},
        {"system": "ours", "is_baseline": False, "error": 0.1, "seconds": 1.5},
    ]
    head = Headline.from_rows(rows, "error", higher_is_better=False, method_system="ours")
    return BenchReport(rows=rows, headline=head, config={"n": 3 if quick else 30}, what=f"toy, seed {seed}")


def _broken_bench(*, quick: bool, seed: int) -> BenchReport:
    raise RuntimeError("boom")


@pytest.fixture
def fake_methods(monkeypatch):
    module = types.ModuleType("hf_ext_fake_bench")
    module.ok, module.broken = _fake_bench, _broken_bench
    monkeypatch.setitem(sys.modules, "hf_ext_fake_bench", module)
    common = dict(title="T", venue="V", arxiv=None, host="h", extras=(), public={}, citation="@misc{x}")
    fake = {
        "good": MethodInfo(id="good", name="Good", bench="hf_ext_fake_bench:ok", **common),
        "bad": MethodInfo(id="bad", name="Bad", bench="hf_ext_fake_bench:broken", **common),
    }
    monkeypatch.setattr(cli, "methods", lambda: fake)
    monkeypatch.setattr(cli, "get", lambda i: fake[i])
    return fake


def test_bench_prints_table_and_writes_schema(fake_methods, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert cli.main(["bench", "good", "--quick", "--json", str(out), "--seed", "3"]) == 0
    printed = capsys.readouterr().out
    assert "ours" in printed and "headline  error: 0.1 vs 0.3 (other)" in printed
    doc = json.loads(out.read_text())
    assert {"method", "quick", "seed", "config", "rows", "headline", "env"} <= set(doc)
    assert (doc["method"], doc["quick"], doc["seed"], doc["config"]) == ("good", True, 3, {"n": 3})
    assert doc["headline"] == {
        "figure": "error",
        "higher_is_better": False,
        "method": 0.1,
        "best_baseline_system": "other",
        "best_baseline": 0.3,
    }
    assert set(doc["env"]) == {"python", "torch", "cpu_count"}
    assert all({"system", "is_baseline"} <= set(r) for r in doc["rows"])


def test_bench_unknown_names_known_methods(capsys):
    assert cli.main(["bench", "no-such-method"]) == 2
    err = capsys.readouterr().err
    assert "Known methods:" in err and all(m in err for m in methods())


def test_tour_reports_failures_and_goes_on(fake_methods, capsys):
    assert cli.main(["tour"]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "RuntimeError: boom" in out
    assert "toy, seed 0" in out


def test_list_shows_registry(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert all(m in out for m in methods())


def test_headline_picks_best_baseline():
    rows = _fake_bench(quick=True, seed=0).rows
    h = Headline.from_rows(rows, "seconds", higher_is_better=False, method_system="ours")
    assert (h.best_baseline_system, h.best_baseline, h.beats_baseline) == ("base", 1.0, False)
    with pytest.raises(ValueError, match="expected one row for system 'nope'"):
        Headline.from_rows(rows, "error", higher_is_better=False, method_system="nope")


def test_format_table_aligns_columns():
    text = format_table([{"a": 1.23456, "b": "x"}, {"a": 10.0, "c": True}])
    lines = text.splitlines()
    assert lines[0].split() == ["a", "b", "c"]
    assert len({len(line) for line in lines}) == 1
