"""Side run, not part of ``hf-ext bench scm_grpo``: arms A and B on the full run's 2-4 hop warm start over
more GRPO seeds, paired by seed, to tell "B below A" from seed noise.

    python -m benchmarks.scm_grpo.seeds --seeds 6 --out seeds.json

The world, claims, warm start (world seed 0) and GRPO settings are the full run's (``FULL["2-4 hops"]``);
GRPO seeds ``0 .. seeds - 1`` (the full run's two are the first two and reproduce its figures). Prints each
seed's held-out accuracy and mean |d - d*| per arm, and the mean paired difference B - A with its standard
error over seeds.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

from benchmarks.harness import mean_se, pinned_threads
from benchmarks.scm_grpo.bench import FULL, _layer2, _quiet

FIGURES = ("accuracy", "depth_abs_err")


def paired(a: list[float], b: list[float]) -> tuple[float, float]:
    """Mean of ``b - a`` over seeds and its standard error (:func:`~benchmarks.harness.mean_se`)."""
    mean, se, _ = mean_se(y - x for x, y in zip(a, b, strict=True))
    return mean, se


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=6, help="GRPO seeds 0 .. N-1")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    budget = replace(FULL["2-4 hops"], seeds=args.seeds, arms=("A_label_format", "B_scm"))
    with _quiet(), pinned_threads(1):
        _, evals, _ = _layer2("2-4 hops", budget, 0)
    runs = {arm: [{k: e[k] for k in FIGURES} for e in evals[arm]] for arm in budget.arms}
    for arm, per_seed in runs.items():
        print(arm, " ".join(f"{r['accuracy']:.3f}/{r['depth_abs_err']:.3f}" for r in per_seed))
    for k in FIGURES:
        mean, se = paired([r[k] for r in runs["A_label_format"]], [r[k] for r in runs["B_scm"]])
        print(f"B - A {k}: {mean:+.4f} +- {se:.4f} (SE over {args.seeds} paired seeds)")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"sft_only": evals["sft_only"][0]["accuracy"], **runs}, fh, indent=1)


if __name__ == "__main__":
    main()
