"""SCM-GRPO's rule rewards as ``trl.GRPOTrainer`` reward functions (pure Python, no trl import).

trl calls a reward function as ``f(prompts=..., completions=..., completion_ids=..., **dataset_columns,
trainer_state=..., log_extra=..., log_metric=...)`` and wants one float per completion. Completions are
strings or, for conversational data, lists of message dicts (the last message's ``content`` is scored).
Each instance sets ``__name__``, which trl uses to log ``rewards/<name>/mean``; parse failures score 0 (never
``None``, which trl would skip as "not applicable") and are counted under ``scm/parse_error/<kind>``.

The three terms and their weights are [reconstructed]: ``r = r_acc + 0.5 r_fmt + 0.5 r_acc f(d)``, realised as
``[SCMLabelReward, SCMGraphFormatReward, SCMDepthReward]`` with ``GRPOConfig(reward_weights=[1, 0.5, 0.5])``
so that trl logs each term; :class:`SCMCombinedReward` sums them in one callable.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from hf_ext._registry import paper
from hf_ext._validation import check_bool, check_choice, check_float, check_int
from hf_ext.scm_grpo.core import (
    DEPTH_MODES,
    ERROR_KINDS,
    SCMGraph,
    format_score,
    graph_depth,
    normalize_label,
    parse_scm_graph,
    resolve_label_set,
    structure_score,
)


def completion_text(completion: Any) -> str:
    """The text of one completion: a string, or the ``content`` of the last message of a conversation."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list | tuple) and completion and isinstance(completion[-1], dict):
        content = completion[-1].get("content", "")
        if isinstance(content, list):  # multimodal parts: join the text parts
            return "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return content if isinstance(content, str) else ""
    raise TypeError(
        "`completions` must hold strings or lists of message dicts (conversational), got "
        f"{type(completion).__name__}: {completion!r:.80}."
    )


def _column(columns: dict[str, Any], key: str, n: int, owner: str) -> list[Any]:
    if key not in columns:
        seen = sorted(k for k in columns if k not in ("trainer_state", "log_extra", "log_metric"))
        raise KeyError(
            f"{owner} needs the dataset column `{key}`, which is missing; columns seen: {seen}. Add it to "
            f"the dataset or pass the right key (e.g. label_key=..., target_key=...)."
        )
    values = list(columns[key])
    if len(values) != n:
        raise ValueError(f"column `{key}` has {len(values)} values for {n} completions.")
    return values


def gold_label(value: Any, labels: tuple[str, ...], key: str) -> str:
    """A gold label normalised into ``labels``, or ``ValueError`` naming the column and the allowed labels."""
    label = normalize_label(value, labels)
    if label is None:
        raise ValueError(f"`{key}` must name a label of {list(labels)} (aliases allowed), got {value!r}.")
    return label


def target_depth(value: Any, default: int | None, key: str) -> int:
    """A per-row target depth (``num_hops``): an int >= 1, or ``default`` where the row holds ``None``."""
    if value is None and default is not None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return check_int(key, value, low=1, hint="It is the target depth d* (HoVer: 2, 3 or 4 hops).")


class _SCMReward:
    """Shared plumbing: label set, input checks, parsing and logging."""

    __name__ = "scm_reward"
    _paper = paper("scm_grpo")

    def __init__(self, label_set: str | Collection[str]) -> None:
        self.labels = resolve_label_set(label_set)

    def _parse(self, prompts: Sequence[Any] | None, completions: Sequence[Any] | None) -> list[SCMGraph]:
        if completions is None or isinstance(completions, str):
            raise TypeError(f"`completions` must be a list, got {type(completions).__name__}.")
        if prompts is not None and len(prompts) != len(completions):
            raise ValueError(
                f"`prompts` and `completions` must have the same length, got {len(prompts)} and "
                f"{len(completions)}."
            )
        return [parse_scm_graph(completion_text(c), self.labels) for c in completions]

    def _gold(self, columns: dict[str, Any], key: str, n: int) -> list[str]:
        return [gold_label(v, self.labels, key) for v in _column(columns, key, n, self.__name__)]

    def __call__(
        self,
        prompts: Sequence[Any] | None = None,
        completions: Sequence[Any] | None = None,
        completion_ids: Sequence[Any] | None = None,
        *,
        trainer_state: Any = None,
        log_extra: Callable[[str, list[Any]], None] | None = None,
        log_metric: Callable[[str, float], None] | None = None,
        **columns: Any,
    ) -> list[float]:
        """One reward in [0, 1] per completion (see the class docstring)."""
        graphs = self._parse(prompts, completions)
        return self.score(graphs, columns, trainer_state, log_extra, log_metric)

    def score(
        self,
        graphs: list[SCMGraph],
        columns: dict[str, Any],
        trainer_state: Any,
        log_extra: Callable[[str, list[Any]], None] | None,
        log_metric: Callable[[str, float], None] | None,
    ) -> list[float]:
        raise NotImplementedError


class SCMGraphFormatReward(_SCMReward):
    """r_fmt in {0, 1}: the completion follows the output contract and its graph is a well-formed DAG.

    1 iff the tags are present, unique and in order, there is at least one ``E`` and exactly one ``C``
    node, ids are unique, every edge endpoint is declared, there is no self-loop or cycle, ``C`` is reachable
    from an ``E`` node and the answer is in the label set [reconstructed]. Logs ``scm/format_valid_frac`` and
    the count of each error kind as ``scm/parse_error/<kind>``.

    Args:
        label_set: ``"hover"``, ``"exfever"`` or a collection of labels.
        require_acyclic: Kept for the documented call form; acyclicity is always required (a cycle has no
            depth), so only ``True`` is accepted.
        require_all_connected: Also require every ``E`` node to reach ``C``.
        partial: Score the fraction of checks passed instead of 0/1.
        name: The ``__name__`` trl logs under.

    Example:
        >>> r = SCMGraphFormatReward()
        >>> r(completions=["<graph>\\nE1: x\\nC: y\\nE1 -> C\\n</graph><answer>SUPPORTED</answer>", "hi"])
        [1.0, 0.0]
    """

    def __init__(
        self,
        label_set: str | Collection[str] = "hover",
        *,
        require_acyclic: bool = True,
        require_all_connected: bool = False,
        partial: bool = False,
        name: str = "scm_format",
    ) -> None:
        super().__init__(label_set)
        check_choice("require_acyclic", require_acyclic, (True,), hint="A cyclic graph has no depth.")
        self.require_all_connected = check_bool("require_all_connected", require_all_connected)
        self.partial = check_bool("partial", partial)
        self.__name__ = name

    def score(self, graphs, columns, trainer_state, log_extra, log_metric):  # type: ignore[no-untyped-def]
        scores = [
            format_score(g, require_all_connected=self.require_all_connected, partial=self.partial)
            for g in graphs
        ]
        if log_metric is not None and graphs:
            log_metric("scm/format_valid_frac", sum(g.is_valid for g in graphs) / len(graphs))
            for kind in ERROR_KINDS:
                log_metric(f"scm/parse_error/{kind}", float(sum(kind in g.error_kinds for g in graphs)))
        return scores


class SCMLabelReward(_SCMReward):
    """r_acc in {0, 1}: the normalised answer equals the normalised gold label (unparseable answer: 0).

    Logs ``scm/label_acc``. A gold label outside the label set raises ``ValueError``; a missing column raises
    ``KeyError`` naming it and the columns seen.

    Example:
        >>> r = SCMLabelReward(label_set="exfever")
        >>> r(completions=["<answer>refutes</answer>", "<answer>nei</answer>"], label=["REFUTED", "REFUTED"])
        [1.0, 0.0]
    """

    def __init__(
        self,
        label_key: str = "label",
        label_set: str | Collection[str] = "hover",
        *,
        name: str = "scm_label",
    ) -> None:
        super().__init__(label_set)
        self.label_key = label_key
        self.__name__ = name

    def score(self, graphs, columns, trainer_state, log_extra, log_metric):  # type: ignore[no-untyped-def]
        gold = self._gold(columns, self.label_key, len(graphs))
        scores = [float(g.label is not None and g.label == y) for g, y in zip(graphs, gold)]
        if log_metric is not None and graphs:
            log_metric("scm/label_acc", sum(scores) / len(scores))
        return scores


class SCMDepthReward(_SCMReward):
    """r_struct = f(d) = exp(-(d - d*)^2 / (2 sigma^2)), gated on a correct label [reconstructed].

    ``d`` is the graph depth (``depth="longest_path"``: edges on the longest path into ``C``;
    ``"num_evidence"``: evidence nodes reaching ``C``), defined only for a well-formed DAG (else the reward is
    0). ``d*`` is the row's ``target_key`` column (HoVer's ``num_hops``), else ``default_target``. With
    ``gate_on_correct`` (default) the reward is multiplied by r_acc: an ungated depth reward is farmed by
    well-shaped wrong graphs. ``schedule(global_step)`` multiplies the reward (one reading of the paper's
    "dynamic" trade-off; the default is constant). Logs ``scm/depth_mean`` and ``scm/depth_abs_err`` (mean
    ``|d - d*|`` over well-formed graphs) and adds a ``scm_depth`` column to trl's completions table.

    Args:
        target_key: Column of the target depth; ``None`` uses ``default_target`` for every row.
        default_target: Target where the column is absent (``None``: the column is required).
        sigma: Width of the inverted U (> 0).
        gate_on_correct: Multiply by r_acc (needs ``label_key``).
        label_key: Column of the gold label.
        label_set: ``"hover"``, ``"exfever"`` or a collection of labels.
        depth: ``"longest_path"`` or ``"num_evidence"``.
        schedule: Optional picklable callable ``global_step -> multiplier`` (e.g. a linear warm-up).
        name: The ``__name__`` trl logs under.

    Example:
        >>> r = SCMDepthReward(default_target=2, target_key=None)
        >>> ok = "<graph>\\nE1: a\\nE2: b\\nC: c\\nE1 -> E2\\nE2 -> C\\n</graph><answer>SUPPORTED</answer>"
        >>> r(completions=[ok, ok], label=["SUPPORTED", "NOT_SUPPORTED"])
        [1.0, 0.0]
    """

    def __init__(
        self,
        target_key: str | None = "num_hops",
        default_target: int | None = 3,
        sigma: float = 1.0,
        *,
        gate_on_correct: bool = True,
        label_key: str = "label",
        label_set: str | Collection[str] = "hover",
        depth: str = "longest_path",
        schedule: Callable[[int], float] | None = None,
        name: str = "scm_depth",
    ) -> None:
        super().__init__(label_set)
        if target_key is None and default_target is None:
            raise ValueError("`default_target` must be an int >= 1 when `target_key` is None, got None.")
        self.target_key = target_key
        self.default_target = (
            None if default_target is None else check_int("default_target", default_target, low=1)
        )
        self.sigma = check_float("sigma", sigma, low=0, low_open=True)
        self.gate_on_correct = check_bool("gate_on_correct", gate_on_correct)
        self.label_key = label_key
        self.depth = check_choice("depth", depth, DEPTH_MODES)
        if schedule is not None and not callable(schedule):
            raise TypeError(f"`schedule` must be a callable global_step -> float or None, got {schedule!r}.")
        self.schedule = schedule
        self.__name__ = name

    def targets(self, columns: dict[str, Any], n: int) -> list[int]:
        """The target depth of each of ``n`` rows."""
        key = self.target_key
        if key is None or (key not in columns and self.default_target is not None):
            assert self.default_target is not None
            return [self.default_target] * n
        return [target_depth(v, self.default_target, key) for v in _column(columns, key, n, self.__name__)]

    def multiplier(self, trainer_state: Any) -> float:
        """``schedule(global_step)`` (step 0 without a trainer state), or 1."""
        if self.schedule is None:
            return 1.0
        step = getattr(trainer_state, "global_step", 0) or 0
        return check_float("schedule(global_step)", self.schedule(step))

    def score(self, graphs, columns, trainer_state, log_extra, log_metric):  # type: ignore[no-untyped-def]
        targets = self.targets(columns, len(graphs))
        depths = [graph_depth(g, self.depth) for g in graphs]
        gates = [1.0] * len(graphs)
        if self.gate_on_correct:
            gold = self._gold(columns, self.label_key, len(graphs))
            gates = [float(g.label is not None and g.label == y) for g, y in zip(graphs, gold)]
        factor = self.multiplier(trainer_state)
        scores = [
            factor * gate * structure_score(d, t, self.sigma) if g.is_valid else 0.0
            for g, d, t, gate in zip(graphs, depths, targets, gates)
        ]
        valid = [(d, t) for d, t, g in zip(depths, targets, graphs) if g.is_valid and d is not None]
        if log_metric is not None and valid:
            log_metric("scm/depth_mean", sum(d for d, _ in valid) / len(valid))
            log_metric("scm/depth_abs_err", sum(abs(d - t) for d, t in valid) / len(valid))
        if log_extra is not None:
            log_extra("scm_depth", depths)
        return scores


class SCMCombinedReward(_SCMReward):
    """The whole reward in one callable: ``r_acc + format_weight * r_fmt + depth_weight * r_struct``.

    ``r_struct`` is :class:`SCMDepthReward`'s value (gated on r_acc by default), so at the defaults this
    equals the three rewards with ``reward_weights=[1, 0.5, 0.5]``; trl then logs only the sum.

    Example:
        >>> r = SCMCombinedReward(target_key=None, default_target=1)
        >>> r(completions=["<graph>\\nE1: a\\nC: b\\nE1 -> C\\n</graph><answer>SUPPORTED</answer>"],
        ...   label=["SUPPORTED"])
        [2.0]
    """

    def __init__(
        self,
        label_key: str = "label",
        label_set: str | Collection[str] = "hover",
        *,
        target_key: str | None = "num_hops",
        default_target: int | None = 3,
        sigma: float = 1.0,
        format_weight: float = 0.5,
        depth_weight: float = 0.5,
        gate_on_correct: bool = True,
        require_all_connected: bool = False,
        depth: str = "longest_path",
        schedule: Callable[[int], float] | None = None,
        name: str = "scm_combined",
    ) -> None:
        super().__init__(label_set)
        self.format_weight = check_float("format_weight", format_weight, low=0)
        self.depth_weight = check_float("depth_weight", depth_weight, low=0)
        self.label = SCMLabelReward(label_key, self.labels)
        self.format = SCMGraphFormatReward(self.labels, require_all_connected=require_all_connected)
        self.structure = SCMDepthReward(
            target_key,
            default_target,
            sigma,
            gate_on_correct=gate_on_correct,
            label_key=label_key,
            label_set=self.labels,
            depth=depth,
            schedule=schedule,
        )
        self.__name__ = name

    def score(self, graphs, columns, trainer_state, log_extra, log_metric):  # type: ignore[no-untyped-def]
        parts = [
            r.score(graphs, columns, trainer_state, log_extra, log_metric)
            for r in (self.label, self.format, self.structure)
        ]
        return [a + self.format_weight * f + self.depth_weight * s for a, f, s in zip(*parts)]
