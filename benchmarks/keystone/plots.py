"""Figures of ``hf-ext bench keystone --plot DIR`` (matplotlib, Agg backend)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ARM_COLORS = {
    "full FT": "tab:blue",
    "keystone rows": "tab:red",
    "random rows": "tab:gray",
    "top activation rows": "tab:orange",
    "LoRA": "tab:green",
}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_ablation(rows: list[dict[str, Any]], path: Path) -> str:
    """Held-out NLL after ablating the top-k of each selection, against k; random draws as max and median."""
    plt = _pyplot()
    a_rows = [r for r in rows if r.get("table") == "A" and r["k"] > 0]
    base = next(r["nll"] for r in rows if r.get("system") == "no ablation")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    series: dict[str, list[tuple[int, float]]] = {}
    for r in a_rows:  # "random (max of 10)" at k=30 and "random (max of 5)" at k=10 are one series
        series.setdefault(re.sub(r" of \d+\)", ")", r["system"]), []).append((r["k"], r["nll"]))
    for system, pts in series.items():
        style = "--" if system.startswith("random") else "-"
        lw = 2.5 if system.startswith("keystone") else 1.2
        ax.plot(*zip(*sorted(pts)), style, marker="o", label=system, lw=lw)
    ax.axhline(base, color="black", lw=0.8, ls=":", label="no ablation")
    ax.set_xscale("log")
    ks = sorted({r["k"] for r in a_rows})
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.minorticks_off()
    ax.set_xlabel("neurons zeroed (k)")
    ax.set_ylabel("held-out NLL (nats/token)")
    ax.set_title("Gemma-3-270M: ablating the top-k neurons of each selection")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return _save(fig, path)


def plot_finetune(rows: list[dict[str, Any]], path: Path) -> str:
    """Per task, each arm at its chosen rate: test accuracy, drift, trainable parameters, seconds per step."""
    plt = _pyplot()
    b_rows = [r for r in rows if r.get("table") == "B" and r["system"] != "un-tuned"]
    tasks = list(dict.fromkeys(r["task"] for r in b_rows))
    panels = (
        ("test_acc", "test accuracy", False),
        ("drift", "held-out NLL drift (nats)", False),
        ("trainable_params", "trainable parameters", True),
        ("step_ratio", "seconds per step / full FT", False),
    )
    fig, axes = plt.subplots(len(tasks), len(panels), figsize=(13, 3.2 * len(tasks)), squeeze=False)
    for i, task in enumerate(tasks):
        here = [r for r in b_rows if r["task"] == task]
        names = [r["system"] for r in here]
        for j, (key, label, log) in enumerate(panels):
            ax = axes[i][j]
            ax.bar(range(len(here)), [r[key] for r in here], color=[ARM_COLORS.get(n, "k") for n in names])
            ax.set_xticks(range(len(here)), names, rotation=35, ha="right", fontsize=7)
            ax.set_title(f"{task}: {label}", fontsize=9)
            if log:
                ax.set_yscale("log")
            ax.grid(alpha=0.3, axis="y")
    return _save(fig, path)


def plot_front(grid: list[dict[str, Any]], path: Path) -> str:
    """Test accuracy against held-out drift for every (arm, rate); a star marks the rate chosen on val."""
    plt = _pyplot()
    tasks = list(dict.fromkeys(r["task"] for r in grid))
    fig, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4.5), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for system in dict.fromkeys(r["system"] for r in grid if r["task"] == task):
            pts = sorted(
                (
                    (r["drift"], r["test_acc"], r["lr"], r["chosen"])
                    for r in grid
                    if r["task"] == task and r["system"] == system
                ),
                key=lambda p: p[2],
            )
            color = ARM_COLORS.get(system, "black")
            ax.plot([p[0] for p in pts], [p[1] for p in pts], ":", marker="o", color=color, label=system)
            for drift, acc, lr, chosen in pts:
                if chosen:
                    ax.plot(drift, acc, "*", ms=14, color=color)
                if lr:
                    ax.annotate(f"{lr:g}", (drift, acc), fontsize=6, color=color)
        ax.set_xlabel("held-out NLL drift (nats/token, lower is better)")
        ax.set_ylabel("test accuracy")
        ax.set_title(f"{task}: score vs drift over the rate grid (star = chosen on validation)", fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    return _save(fig, path)


def _save(fig: Any, path: Path) -> str:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)
