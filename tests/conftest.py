"""Shared pytest set-up: offline hub and a fixed thread count. Skips use ``hf_ext.testing.requires``."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    import torch

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


@pytest.fixture(scope="session")
def quick_report():
    """``quick_report(method_id, seed=0)``: the method's quick benchmark report (``hf-ext bench <id>
    --quick``, checked to be a slice of its full grid), run once per session and shared by the tour test and
    the method's own benchmark tests."""
    from hf_ext.cli import run_bench

    reports: dict[tuple[str, int], object] = {}

    def get(method_id: str, seed: int = 0):
        if (method_id, seed) not in reports:
            reports[method_id, seed] = run_bench(method_id, quick=True, seed=seed)
        return reports[method_id, seed]

    return get
