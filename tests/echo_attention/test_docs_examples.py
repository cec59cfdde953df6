"""The docs page's Wan examples run the Sparse/Echo path: output differs from dense, stats show the work."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from hf_ext.testing import requires

pytestmark = requires("diffusers")

DOCS = Path(__file__).resolve().parents[2] / "docs" / "methods" / "echo_attention.md"


def _wan_examples() -> list[str]:
    text = DOCS.read_text()
    usage = text[text.index("## Usage (diffusers)") : text.index("The same API serves diffusers")]
    return re.findall(r"```python\n(.*?)```", usage, flags=re.S)


def _sparse_work(rows: list[dict]) -> bool:
    return any(r["operator"] == "echo" and r["echoed"] > 0 and r["dropped"] > 0 for r in rows)


@pytest.mark.slow
def test_first_example_differs_from_dense_and_runs_echo(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    exec(_wan_examples()[0], ns)  # noqa: S102 - the docs page's own example
    assert not torch.equal(ns["video"], ns["dense"])
    err = float((ns["video"] - ns["dense"]).norm() / ns["dense"].norm())
    assert 0 < err < 1
    ns["handle"].remove()
    assert ns["handle"].removed
    rows = ns["handle"].stats()
    assert _sparse_work(rows), rows


@pytest.mark.slow
def test_calibrated_example_runs_echo_and_reloads(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    exec(_wan_examples()[1], ns)  # noqa: S102
    assert _sparse_work(ns["stats"]), ns["stats"]
    assert ns["handle"].params.calibrated
    ns["handle"].remove()
