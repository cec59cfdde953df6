from __future__ import annotations

import pytest

from benchmarks.harness import pinned_threads


@pytest.fixture(autouse=True)
def _one_thread():
    """The probes are tiny: one thread avoids oversubscription on a shared machine."""
    with pinned_threads(1):
        yield
