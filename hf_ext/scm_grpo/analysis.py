"""Accuracy binned by reasoning-graph depth: the paper's inverted U between structure and accuracy."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from hf_ext.scm_grpo.core import graph_depth, normalize_label, parse_scm_graph, resolve_label_set
from hf_ext.scm_grpo.rewards import completion_text, gold_label, target_depth


def depth_binned_accuracy(
    completions: Sequence[Any],
    labels: Sequence[Any],
    *,
    targets: Sequence[int] | None = None,
    label_set: str | Collection[str] = "hover",
    depth: str = "longest_path",
    relative: bool = False,
) -> list[dict[str, Any]]:
    """Label accuracy per graph depth, the measurement behind the paper's inverted U [paper].

    Args:
        completions: Model outputs (strings or conversational message lists).
        labels: Gold labels, one per completion.
        targets: Target depths (``num_hops``), needed for ``relative``.
        label_set: ``"hover"``, ``"exfever"`` or a collection of labels.
        depth: ``"longest_path"`` or ``"num_evidence"``.
        relative: Bin by ``d - d*`` instead of ``d``.

    Returns:
        One row per bin, sorted by depth, then a final ``"invalid"`` bin (no well-formed graph) when present:
        ``{"depth", "n", "accuracy"}``.

    Example:
        >>> g = "<graph>\\nE1: a\\nC: b\\nE1 -> C\\n</graph><answer>{}</answer>"
        >>> depth_binned_accuracy([g.format("SUPPORTED"), g.format("NOT_SUPPORTED"), "x"], ["SUPPORTED"] * 3)
        [{'depth': 1, 'n': 2, 'accuracy': 0.5}, {'depth': 'invalid', 'n': 1, 'accuracy': 0.0}]
    """
    labs = resolve_label_set(label_set)
    if len(completions) != len(labels):
        raise ValueError(
            f"`completions` and `labels` must have the same length, got {len(completions)} and {len(labels)}."
        )
    if relative and (targets is None or len(targets) != len(completions)):
        raise ValueError("`targets` must give one target depth per completion when `relative=True`.")
    bins: dict[Any, list[bool]] = {}
    for i, (completion, gold) in enumerate(zip(completions, labels)):
        graph = parse_scm_graph(completion_text(completion), labs)
        d = graph_depth(graph, depth)
        if d is not None and relative:
            assert targets is not None
            d -= target_depth(targets[i], None, "targets")
        key = "invalid" if d is None else d
        ok = normalize_label(graph.label, labs) == gold_label(gold, labs, "labels")
        bins.setdefault(key, []).append(ok)
    order = sorted(k for k in bins if k != "invalid") + (["invalid"] if "invalid" in bins else [])
    return [{"depth": k, "n": len(bins[k]), "accuracy": sum(bins[k]) / len(bins[k])} for k in order]
