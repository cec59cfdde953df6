"""Every Python snippet of the README's drop-in section runs as written on a CPU."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = re.compile(r"<!-- snippets:start -->(.*?)<!-- snippets:end -->", re.S)
SNIPPET = re.compile(r"\*\*([^*]+)\*\*[^\n]*\n+```python\n(.*?)```", re.S)


def readme_snippets() -> list[tuple[str, str]]:
    """``(host label, code)`` for each ```` ```python ```` block of the drop-in section, in order."""
    section = SECTION.search(README.read_text())
    assert section, "README.md has no snippets section"
    return SNIPPET.findall(section.group(1))


def test_every_snippet_is_found():
    labels = [label for label, _ in readme_snippets()]
    assert labels == [
        "TRL",
        "PEFT",
        "transformers",
        "diffusers",
        "timm",
        "torchmetrics",
        "scikit-learn",
        "PettingZoo",
    ]


@pytest.mark.parametrize(("label", "code"), readme_snippets(), ids=[label for label, _ in readme_snippets()])
def test_snippet_runs_as_written(label, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"README.md[{label}]", "exec"), {"__name__": "__readme__"})
