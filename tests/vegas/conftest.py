"""The Triton interpreter tier of the kernel tests: ``@pytest.mark.triton_interpret`` tests skip unless triton
is installed and ``TRITON_INTERPRET=1`` was set before the process started (``make test`` runs them apart)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hf_ext.kernels._dispatch import interpret_mode, triton_installed

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = (
        "triton is not installed"
        if not triton_installed()
        else "needs TRITON_INTERPRET=1 set before the process starts"
        if not interpret_mode()
        else ""
    )
    if not reason:
        return
    for item in items:
        if HERE in item.path.parents and item.get_closest_marker("triton_interpret"):
            item.add_marker(pytest.mark.skip(reason=reason))
