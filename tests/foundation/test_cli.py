"""The `hf-ext` command line: list, bench (table and JSON schema), tour (failures reported, exit code)."""

from __future__ import annotations

import dataclasses
import json
import sys
import types

import pytest

from benchmarks.harness import BenchReport, Headline, format_table
from hf_ext import cli
from hf_ext._registry import MethodInfo, methods


def _fake_bench(*, quick: bool, seed: int) -> BenchReport:
    rows = [
        {"system": "base", "is_baseline": True, "error": 0.4, "seconds": 1.0},
        {"system": "other", "is_baseline": True, "error": 0.3, "seconds": 2.0},
        {"system": "ours", "is_baseline": False, "error": 0.1, "seconds": 1.5},
    ]
    head = Headline.from_rows(rows, "error", higher_is_better=False, method_system="ours")
    settings = [{"size": 3}] if quick else _fake_grid()
    return BenchReport(
        rows=rows,
        headline=head,
        config={"n": 3 if quick else 30},
        what=f"toy, seed {seed}",
        settings=settings,
    )


def _fake_grid() -> list[dict]:
    return [{"size": 3}, {"size": 30}]


def _off_grid_bench(*, quick: bool, seed: int) -> BenchReport:
    report = _fake_bench(quick=quick, seed=seed)
    report.settings = [{"size": 4}]
    return report


def _no_baseline_bench(*, quick: bool, seed: int) -> BenchReport:
    rows = [
        {"system": "base", "is_baseline": True, "recovered": float("nan")},
        {"system": "ours", "is_baseline": False, "recovered": 0.0},
    ]
    head = Headline.from_rows(rows, "recovered", higher_is_better=True, method_system="ours")
    return BenchReport(rows=rows, headline=head, what="nothing to recover", settings=[{"size": 3}])


def _broken_bench(*, quick: bool, seed: int) -> BenchReport:
    raise RuntimeError("boom")


def _fake_benchmark(monkeypatch, method_id: str, run) -> None:
    """``benchmarks/<method_id>/bench.py`` as the CLI imports it: ``run`` and the full grid."""
    module = types.ModuleType(f"benchmarks.{method_id}.bench")
    module.run, module.grid = run, _fake_grid
    monkeypatch.setitem(sys.modules, module.__name__, module)


@pytest.fixture
def fake_methods(monkeypatch):
    common = dict(title="T", venue="V", arxiv=None, host="h", extras=(), public={}, citation="@misc{x}")
    fake = {}
    for method_id, name, run in [
        ("good", "Good", _fake_bench),
        ("bad", "Bad", _broken_bench),
        ("none", "None", _no_baseline_bench),
    ]:
        fake[method_id] = MethodInfo(id=method_id, name=name, **common)
        _fake_benchmark(monkeypatch, method_id, run)
    monkeypatch.setattr(cli, "methods", lambda: fake)
    return fake


def test_bench_prints_table_and_writes_schema(fake_methods, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert cli.main(["bench", "good", "--quick", "--json", str(out), "--seed", "3"]) == 0
    printed = capsys.readouterr().out
    assert "ours" in printed and "headline  error 0.1 vs 0.3 (other), x0.333" in printed
    doc = json.loads(out.read_text())
    assert {"method", "quick", "seed", "config", "rows", "headline", "env"} <= set(doc)
    assert (doc["method"], doc["quick"], doc["seed"], doc["config"]) == ("good", True, 3, {"n": 3})
    assert doc["headline"] == {
        "figure": "error",
        "higher_is_better": False,
        "method": 0.1,
        "best_baseline_system": "other",
        "best_baseline": 0.3,
        "verdict": "ahead",
    }
    assert doc["settings"] == [{"size": 3}]
    assert set(doc["env"]) == {"python", "torch", "cpu_count"}
    assert all({"system", "is_baseline"} <= set(r) for r in doc["rows"])


def _usage_error(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert len(err.strip().splitlines()) == 1, err
    return err


def test_bench_unknown_names_known_methods(capsys):
    err = _usage_error(["bench", "no-such-method"], capsys)
    assert "argument name: unknown method 'no-such-method'" in err and all(m in err for m in methods())


def test_close_ids_are_suggested(capsys):
    some = next(iter(methods()))
    assert f"did you mean {some!r}" in _usage_error(["tour", "--only", some + "x"], capsys)


@pytest.mark.parametrize("seed", ["-1", "abc", str(2**32)])
def test_bad_seed_is_refused_before_running(seed, capsys):
    assert f"argument --seed: must be an int in [0, 2**32), got {seed!r}" in _usage_error(
        ["bench", next(iter(methods())), "--seed", seed], capsys
    )


def test_unwritable_json_and_plot_paths_are_refused_before_running(tmp_path, capsys):
    method = next(iter(methods()))
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert "argument --json: cannot write" in _usage_error(
        ["bench", method, "--json", f"{blocker}/x.json"], capsys
    )
    assert "is a folder" in _usage_error(["bench", method, "--json", str(tmp_path)], capsys)
    assert "argument --plot: " in _usage_error(["bench", method, "--plot", str(blocker)], capsys)


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.startswith("hf-ext ")


def test_tour_skips_methods_whose_extra_is_missing(fake_methods, monkeypatch, capsys):
    needy = MethodInfo(
        id="needy",
        name="N",
        title="T",
        venue="V",
        arxiv=None,
        host="h",
        extras=("trl",),
        public={},
        citation="@misc{x}",
    )
    _fake_benchmark(monkeypatch, "needy", _broken_bench)
    monkeypatch.setattr(cli, "methods", lambda: {"needy": needy})
    monkeypatch.setattr(cli, "is_available", lambda extra: False)
    monkeypatch.setattr(cli, "install_hint", lambda extras: "`pip install 'trl~=1.16.0'`")
    assert cli.main(["tour"]) == 0
    out = capsys.readouterr().out
    assert "skipped" in out and "needs the trl extra" in out and "FAILED" not in out


def test_tour_reports_failures_and_goes_on(fake_methods, capsys):
    assert cli.main(["tour"]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "RuntimeError: boom" in out
    assert "toy, seed 0" in out


def test_tour_without_a_finite_baseline_says_so_and_passes(fake_methods, capsys):
    assert cli.main(["tour", "--only", "none"]) == 0
    out = capsys.readouterr().out
    assert "no comparison at this size" in out and "FAILED" not in out


def test_quick_run_off_its_full_grid_fails(fake_methods, monkeypatch, capsys):
    fake_methods["off"] = dataclasses.replace(fake_methods["good"], id="off")
    _fake_benchmark(monkeypatch, "off", _off_grid_bench)
    assert cli.main(["tour", "--wide"]) == 1
    assert "measured setting {'size': 4} that is not in its full run's grid" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["bench", "tour"])
def test_outside_a_checkout_bench_and_tour_say_where_the_benchmarks_are(
    command, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(cli, "__file__", str(tmp_path / "site-packages" / "hf_ext" / "cli.py"))
    monkeypatch.chdir(tmp_path)
    argv = [command, next(iter(methods()))] if command == "bench" else [command]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hf-ext {command}: the benchmarks are not part of the installed package")
    assert "Run `hf-ext bench` / `hf-ext tour` from a checkout" in err and str(tmp_path / "benchmarks") in err


def test_tour_table_fits_120_columns_and_writes_json(fake_methods, tmp_path, capsys):
    out = tmp_path / "tour.json"
    cli.main(["tour", "--json", str(out)])
    printed = capsys.readouterr().out
    table = printed.split("\n\ntour: ")[0]
    assert max(len(line) for line in table.splitlines()) <= 120
    assert table.splitlines()[0].split() == ["method", "what", "ran", "headline", "verdict", "seconds"]
    assert "tour: 3 methods in " in printed
    doc = json.loads(out.read_text())
    assert [e["method"] for e in doc["entries"]] == ["good", "bad", "none"]
    assert doc["entries"][0]["headline"]["verdict"] == "ahead" and doc["entries"][1]["verdict"] == "FAILED"
    cli.main(["tour", "--wide"])
    assert "host component" in capsys.readouterr().out


def test_list_shows_registry_within_100_columns(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert all(m in out for m in methods())
    assert max(len(line) for line in out.splitlines()) <= 100
    assert cli.main(["list", "--wide"]) == 0
    wide = capsys.readouterr().out
    assert all(name in wide for m in methods().values() for name in m.public)


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


def test_bench_model_is_passed_only_to_a_bench_that_takes_it(monkeypatch, fake_methods, capsys):
    seen = {}

    def with_model(*, quick: bool, seed: int, model: str | None = None) -> BenchReport:
        seen["model"] = model
        return _fake_bench(quick=quick, seed=seed)

    _fake_benchmark(monkeypatch, "good", with_model)
    assert cli.main(["bench", "good", "--quick", "--model", "tiny"]) == 0 and seen == {"model": "tiny"}
    assert cli.main(["bench", "good", "--quick"]) == 0 and seen == {"model": None}
    _fake_benchmark(monkeypatch, "good", _fake_bench)
    capsys.readouterr()
    assert cli.main(["bench", "good", "--quick", "--model", "tiny"]) == 2
    assert "`good` takes no --model; got --model 'tiny'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="takes no --model"):
        cli.run_bench("good", quick=True, seed=0, model="tiny")
