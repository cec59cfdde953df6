"""Benchmark helpers: the long-tailed pool, the noise draw and labels-to-target."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("sklearn")

from benchmarks.prior_al.data import (  # noqa: E402
    digits_task,
    flip_labels,
    long_tail_counts,
    split_indices,
)
from benchmarks.prior_al.loop import Schedule, labels_to_reach  # noqa: E402


def test_long_tail_counts():
    counts = long_tail_counts(10)
    assert counts[0] == 120 and counts[-1] == 6 and counts.sum() == 409
    assert (np.diff(counts) < 0).all()


def test_flip_labels_moves_to_another_class_at_the_rate():
    y = np.repeat(np.arange(10), 2000)
    noisy = flip_labels(y, 0.2, 10, np.random.default_rng(0))
    assert abs((noisy != y).mean() - 0.2) < 0.01
    assert noisy.min() >= 0 and noisy.max() <= 9


def test_digits_task_splits_are_disjoint_and_long_tailed():
    t = digits_task(0, sigma=0.35)
    assert len(t.X_pool) == 409 and len(t.X_test) == 300
    assert sorted(np.bincount(t.y_pool).tolist(), reverse=True) == long_tail_counts(10).tolist()
    np.testing.assert_allclose(t.prior(t.X_test).sum(axis=1), 1.0)


def test_split_indices_are_disjoint():
    y = np.repeat(np.arange(10), 180)
    test, source, pool = split_indices(y, 30, 25, np.random.default_rng(0))
    assert not set(test) & set(source) and not set(pool) & (set(test) | set(source))
    assert np.bincount(y[test]).tolist() == [30] * 10


def test_labels_to_reach():
    budgets = Schedule(20, 10, 3).budgets
    assert budgets == [20, 30, 40, 50]
    assert labels_to_reach([0.5, 0.79, 0.8, 0.9], budgets, 0.8) == 40
    assert math.isinf(labels_to_reach([0.5, 0.6, 0.7, 0.75], budgets, 0.8))


def test_grid_names_every_setting_and_quick_runs_the_headline_one():
    from benchmarks.prior_al import bench

    assert bench.grid() == [{"setting": s.name} for s in bench.SETTINGS]  # no data loaded
    quick = [s.name for s in bench.SETTINGS if s.quick]
    assert quick == [bench.HEADLINE_SETTING]
