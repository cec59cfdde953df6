"""One BLAS/OpenMP thread per test: gradient boosting on tiny data spends most of its time in thread barriers
when the cores are shared (12 s instead of 0.2 s for 100 rows on the 2-core build machine)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    threadpoolctl = pytest.importorskip("threadpoolctl")
    with threadpoolctl.threadpool_limits(limits=1):
        yield
