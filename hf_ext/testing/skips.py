"""Pytest marks that skip a test when an optional extra is missing."""

from __future__ import annotations

from typing import Any

from hf_ext._availability import missing


def requires(*extras: str) -> Any:
    """``pytest.mark.skipif`` for tests needing ``extras`` (use as a decorator or in ``pytestmark``)."""
    import pytest

    absent = [m for e in extras for m in missing(e)]
    return pytest.mark.skipif(bool(absent), reason=f"needs {', '.join(absent)}")
