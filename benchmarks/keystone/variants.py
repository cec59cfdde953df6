"""Side run, not part of ``hf-ext bench keystone``: the parameterisations of keystone-only fine-tuning that
the paper leaves open, on Part B's Gemma-3-270M tasks, beside full fine-tuning and random rows.

    python -m benchmarks.keystone.variants --seeds 0 --tasks knowledge,format --out variants.json

Arms (``KeystoneConfig`` options of the same top-30 keystone set; random sets matched by module type):

* ``keystone rows``: the default (the main bench's arm);
* ``keystone columns``: the input columns of the weights that next read each neuron, instead of its rows;
* ``keystone rows+columns``: both;
* ``keystone rows, lr x row norm``: ``delta_scale="weight_norm"`` (each row's Adam rate times its norm over
  the module's mean row norm);
* ``keystone rows, massive frozen``: ``frozen_channels`` = the model's 5 massive-activation channels,
  measured on the probe prompts (rows writing them and columns reading them are dropped);
* ``random rows`` / ``random columns``: a random set of the same module types and counts, same options;
* ``full FT``.

Every sparse arm gets the same rate grid, wider than the main bench's; full FT gets the main bench's.
Training, the rate choice on validation accuracy and the figures are Part B's (:func:`finetune_rows`). The
table marks a chosen rate at the edge of its grid (``edge``), where the grid may not reach the rate the arm
needs.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from benchmarks.harness import Timer, format_table, seeded
from benchmarks.keystone.ablation import TEXTS, massive_channels
from benchmarks.keystone.bench import BATCH, LR_GRID, STEPS, TASKS
from benchmarks.keystone.data import PROBE_GROUPS
from benchmarks.keystone.finetune import finetune_rows
from hf_ext.keystone import find_keystone_neurons, random_neuron_set

SPARSE_GRID = (3e-3, 1e-2, 3e-2)
COLUMNS = ("task", "system", "lr", "edge", "val_acc", "test_acc", "test_nll", "drift", "trainable_params")


def arms(massive: list[int]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Arm name -> (set: ``"keystone"`` or ``"random"``, ``KeystoneConfig`` options)."""
    return {
        "keystone rows": ("keystone", {}),
        "keystone columns": ("keystone", {"parameterisation": "columns"}),
        "keystone rows+columns": ("keystone", {"parameterisation": "rows+columns"}),
        "keystone rows, lr x row norm": ("keystone", {"delta_scale": "weight_norm"}),
        "keystone rows, massive frozen": ("keystone", {"frozen_channels": massive}),
        "random rows": ("random", {}),
        "random columns": ("random", {"parameterisation": "columns"}),
    }


def run(seed: int, tasks: list[str], only: list[str] | None = None) -> dict[str, Any]:
    """Every arm at every rate of its grid on each task, for one seed; rows and what was measured."""
    from hf_ext.assets import gemma3_270m

    with seeded(seed):
        model, tok = gemma3_270m()
        model.eval()
        ks = find_keystone_neurons(model, tok, PROBE_GROUPS[0], k=30)
        massive = [m["channel"] for m in massive_channels(model, tok, list(PROBE_GROUPS[0].values()))]
        table = arms(massive)
        if only:
            table = {a: v for a, v in table.items() if a in only}
        pools = {"keystone": ks, "random": random_neuron_set(model, like=ks, seed=seed)}
        sets = {a: pools[which] for a, (which, _) in table.items()}
        options = {a: opts for a, (_, opts) in table.items()}
        names = ["full FT", *table]
        grid: dict[str, tuple[float, ...]] = {
            a: LR_GRID["full FT"] if a == "full FT" else SPARSE_GRID for a in names
        }
        rows: list[dict[str, Any]] = []
        with Timer() as t:
            for task in tasks:
                rows += finetune_rows(
                    model,
                    tok,
                    TASKS[task](),
                    sets,
                    arms=names,
                    lr_grid=grid,
                    heldout=TEXTS,
                    steps=STEPS,
                    batch_size=BATCH,
                    seed=seed,
                    options=options,
                )
    for r in rows:
        g = grid.get(r["system"], ())
        r["seed"] = seed
        r["edge"] = len(g) > 1 and r["chosen"] and r["lr"] in (g[0], g[-1])
    return {"seed": seed, "massive_channels": massive, "seconds": t.seconds, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--arms", default="", help="comma-separated arm names (default: all)")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    runs = [
        run(s, args.tasks.split(","), [a for a in args.arms.split(",") if a] or None)
        for s in map(int, args.seeds.split(","))
    ]
    for r in runs:
        print(f"seed {r['seed']}: massive channels {r['massive_channels']}, {r['seconds']:.0f} s")
        print(format_table([{c: x.get(c) for c in COLUMNS} for x in r["rows"] if x["chosen"]]))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(runs, fh, indent=1)


if __name__ == "__main__":
    main()
