"""Task-size search behind the benchmark's budget (benchmark-only): which setting does the uncued tiny LLaVA
learn only partly? Runs the no-cue and partition-cue arms on a few settings, seed 0, and prints a table.

``python -m benchmarks.grounding_ids.search [index ...]`` (about 5 minutes on two cores; indices into
``SETTINGS`` run a subset). The benchmark itself covers 32 px with 4 questions per image.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor

from benchmarks.grounding_ids.train import RunSpec, TaskSize
from benchmarks.grounding_ids.train import run as run_arm

SETTINGS = (
    ("32 px, 4 strips, one question per image", TaskSize(questions=1), 1500, (300, 1500)),
    ("64 px (65 image tokens), 4 strips, 4 questions", TaskSize(image_size=64), 400, (200, 400)),
)
ARMS = ("no cue", "partition cue (rows)")


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
