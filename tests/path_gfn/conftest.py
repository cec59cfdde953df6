"""Shared helpers for the path_gfn tests: a table-driven policy and tiny environments."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from benchmarks.harness import pinned_threads
from hf_ext.path_gfn.envs import BitSequence


@pytest.fixture(autouse=True)
def _seed_and_one_thread() -> Iterator[None]:
    """Seed torch; one thread (these models are tiny: more threads only add contention)."""
    torch.manual_seed(0)
    with pinned_threads(1):
        yield


@pytest.fixture
def bits2() -> BitSequence:
    """L = 2 bit strings, modes 00 and 11, R(x) = exp(-1.5 * Hamming)."""
    return BitSequence(length=2, modes=("00", "11"), features="full")
