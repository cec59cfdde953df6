"""The shared benchmark scaffolding: thread pinning restores, statistics, verdicts, interleaved timing."""

from __future__ import annotations

import math

import pytest
import torch

from benchmarks.harness import Timer, bootstrap_ci, interleaved_times, mean_se, pinned_threads, verdict


def test_pinned_threads_restores_even_on_error():
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError), pinned_threads(1):
        assert torch.get_num_threads() == 1
        raise RuntimeError
    assert torch.get_num_threads() == before


def test_mean_se_by_hand():
    mean, se, n = mean_se([1.0, 2.0, 3.0, math.nan])
    assert (mean, n) == (2.0, 3) and se == pytest.approx(1 / math.sqrt(3))
    assert mean_se([5.0]) == (5.0, 0.0, 1)
    assert math.isnan(mean_se([])[0])


def test_bootstrap_ci_brackets_the_mean_and_is_seeded():
    values = [0.0, 1.0] * 50
    low, high = bootstrap_ci(values, seed=1)
    assert low < 0.5 < high and (low, high) == bootstrap_ci(values, seed=1)
    assert bootstrap_ci([3.0, 3.0]) == (3.0, 3.0)


def test_verdict_and_timing():
    assert verdict("speed >= 1.3x", False, "1.1x") == "speed >= 1.3x: MISSED (1.1x)"
    with Timer("cpu") as t:
        sum(range(1000))
    assert t.seconds > 0
    order = []
    times = interleaved_times(
        {"a": lambda: order.append("a"), "b": lambda: order.append("b")}, repeats=2, warmup=1
    )
    assert order == ["a", "b"] * 3 and [len(v) for v in times.values()] == [2, 2]
