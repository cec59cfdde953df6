"""The benchmark's (strategy, seed) runs give the same curves on two joblib workers as on one."""

from __future__ import annotations

import pytest

pytest.importorskip("sklearn")

from benchmarks.prior_al.bench import SYSTEMS, run_grid  # noqa: E402
from benchmarks.prior_al.data import digits_task  # noqa: E402
from benchmarks.prior_al.loop import Schedule  # noqa: E402

pytestmark = pytest.mark.distributed


def test_run_grid_on_two_workers_equals_one_worker():
    makes = {name: make for name, _, make, _ in SYSTEMS}
    tasks = {s: digits_task(s, sigma=0.35) for s in (0, 1)}
    grid = [(makes[name], tasks[s], s) for name in ("entropy", "PriorAL") for s in (0, 1)]
    schedule = Schedule(cold_start=20, batch=10, rounds=2)

    one = run_grid(grid, schedule, n_jobs=1)
    two = run_grid(grid, schedule, n_jobs=2)
    for a, b in zip(one, two, strict=True):
        for key in ("macro_f1", "bal_acc", "rare_recall", "refits"):
            assert a[key] == b[key], key
    assert one[0]["macro_f1"] != one[2]["macro_f1"], "the grid runs two different strategies"
