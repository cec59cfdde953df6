"""Task search behind the benchmark's setting (benchmark-only): which binding task does a from-scratch tiny
LLaVA learn at all within the budget, once no scene statistic answers it? Runs the three arms on a few
settings (distinct colours and per-scene symbol order throughout), seed 0, and prints a table.

``python -m benchmarks.grounding_ids.search [index ...]`` (about 4 minutes per setting on two cores; indices
into ``SETTINGS`` run a subset). The benchmark itself is the bars with 1/2/4 training strips.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

from benchmarks.grounding_ids.train import ARMS, RunSpec, TaskSize
from benchmarks.grounding_ids.train import run as run_arm

_SQUARES = TaskSize(shuffle_symbols=True, distinct_colours=True)
_BARS = TaskSize(shuffle_symbols=True, distinct_colours=True, object_width=32, left_margin=0)
SETTINGS = (
    ("5 px squares, 4 strips", _SQUARES, 800, (400, 800)),
    ("bars, 4 strips", _BARS, 800, (400, 800)),
    ("5 px squares, 1/2/4 training strips", replace(_SQUARES, rows=(1, 2, 4)), 800, (400, 800)),
)


def search(seed: int = 0, settings: tuple = SETTINGS) -> list[dict[str, object]]:
    """One row per (setting, arm): held-out accuracy (first question of a scene) at each evaluation step."""
    specs = [
        RunSpec(arm, size, steps, seed, evals, n_train=4096, n_test=512)
        for _, size, steps, evals in settings
        for arm in ARMS
    ]
    with ProcessPoolExecutor(min(2, os.cpu_count() or 1)) as pool:
        runs = list(pool.map(run_arm, specs))
    rows = []
    for spec, out in zip(specs, runs):
        name = next(n for n, size, steps, _ in settings if size == spec.size and steps == spec.steps)
        rows.append(
            {
                "setting": name,
                "arm": spec.arm,
                "seed": seed,
                **{f"acc@{k}": v for k, v in out["curve"].items()},
            }
        )
    return rows


if __name__ == "__main__":
    import sys

    chosen = tuple(SETTINGS[int(i)] for i in sys.argv[1:]) or SETTINGS
    for row in search(settings=chosen):
        print(row)
