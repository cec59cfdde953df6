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
