"""Rubric-guided grading: the rubric schema, the prompt, strict parsing of the model's JSON and the
aggregation of several runs.

The paper grades OCR transcriptions of handwritten calculus work with structured, rubric-guided prompts
and combines several runs with a max rule [paper]. The prompt wording, the JSON schema and its validation
rules and the alternative aggregation rules are [reconstructed]: no code was released.

Scores are in points: a rubric item earns ``0 <= points <= item.points``; a question's total is the sum
of its items.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from hf_ext._registry import paper
from hf_ext._validation import check_choice, check_float

AGGREGATES = ("max", "median", "mean", "min")
LEVELS = ("total", "item")
TOLERANCE = 1e-6


@dataclass(frozen=True)
class RubricItem:
    """One rubric line: ``id``, its maximum ``points`` (> 0), what earns them and the partial-credit rule."""

    _paper: ClassVar[dict[str, object]] = paper("ai_grading")

    id: str
    points: float
    description: str
    partial_credit: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"`id` must be a non-empty string, got {self.id!r}.")
        check_float(f"points of item {self.id!r}", self.points, low=0, low_open=True)


@dataclass(frozen=True)
class Question:
    """A quiz question with its rubric; ``total`` (when given) must equal the sum of the item maxima."""

    _paper: ClassVar[dict[str, object]] = paper("ai_grading")

    id: str
    prompt: str
    rubric: tuple[RubricItem, ...]
    reference_solution: str = ""
    total: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "rubric", tuple(self.rubric))
        if not self.rubric:
            raise ValueError(f"`rubric` of question {self.id!r} must hold at least one item, got ().")
        ids = [item.id for item in self.rubric]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"`rubric` of question {self.id!r} repeats item ids {dupes}.")
        if self.total is not None and abs(self.total - self.max_points) > TOLERANCE:
            raise ValueError(
                f"`total` of question {self.id!r} must equal the sum of its rubric maxima "
                f"{self.max_points}, got {self.total!r}."
            )

    @property
    def max_points(self) -> float:
        return float(sum(item.points for item in self.rubric))

    @property
    def item_ids(self) -> tuple[str, ...]:
        return tuple(item.id for item in self.rubric)


@dataclass(frozen=True)
class Quiz:
    """Questions keyed by id; loads from a dict, JSON or YAML of the form
    ``{"questions": [{"id", "prompt", "rubric": [{"id", "points", "description"}], ...}]}``."""

    _paper: ClassVar[dict[str, object]] = paper("ai_grading")

    questions: tuple[Question, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "questions", tuple(self.questions))
        ids = [q.id for q in self.questions]
        if len(set(ids)) != len(ids):
            raise ValueError(f"`questions` must have distinct ids, got {ids}.")

    def __getitem__(self, question_id: str) -> Question:
        for q in self.questions:
            if q.id == question_id:
                return q
        raise KeyError(f"no question {question_id!r} in the quiz; it has {[q.id for q in self.questions]}.")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Quiz:
        questions = []
        for q in data["questions"]:
            items = tuple(RubricItem(**item) for item in q["rubric"])
            questions.append(Question(**{**q, "rubric": items}))
        return cls(tuple(questions))

    @classmethod
    def from_json(cls, path: str | Path) -> Quiz:
        return cls.from_dict(json.loads(Path(path).read_text()))

    @classmethod
    def from_yaml(cls, path: str | Path) -> Quiz:
        import yaml

        return cls.from_dict(yaml.safe_load(Path(path).read_text()))


_PRINCIPLES = (  # [reconstructed] design principles of rubric-guided prompting
    "You are a careful teaching assistant grading a calculus quiz. The student's work below is OCR output "
    "of handwriting: tolerate transcription noise (misread symbols, lost exponents) but never mathematical "
    "errors. Award each rubric item from 0 up to its points, following its partial-credit rule. Accept "
    "algebraically equivalent forms. Give no credit for a correct final answer whose work is missing or "
    "invalid unless an item says otherwise. If the work is unreadable, set needs_human to true. "
    "Reply with JSON only, in this schema: "
)
SCHEMA = (
    '{"question_id": str, "items": [{"id": str, "points": number, "rationale": str}], '
    '"total": number, "feedback": str, "confidence": number in [0, 1], "needs_human": bool}'
)
COMPACT_SCHEMA = '{"question_id": str, "items": [{"id": str, "points": number}], "total": number}'
SYSTEM_PROMPT = _PRINCIPLES + SCHEMA


def rubric_messages(question: Question, answer_text: str, *, compact: bool = False) -> list[dict[str, str]]:
    """Chat messages (system + user) asking for a JSON grade of ``answer_text`` under ``question``'s
    rubric; ``compact`` asks for item points and the total only (short replies for small models)."""
    lines = [f"Question {question.id} ({question.max_points:g} points): {question.prompt}", "Rubric:"]
    for item in question.rubric:
        rule = f" Partial credit: {item.partial_credit}" if item.partial_credit else ""
        lines.append(f"- {item.id} ({item.points:g} pt): {item.description}{rule}")
    if question.reference_solution:
        lines.append(f"Reference solution: {question.reference_solution}")
    if compact:
        shape = ", ".join(f'{{"id": "{i.id}", "points": <0 to {i.points:g}>}}' for i in question.rubric)
        lines.append(f'Reply format: {{"question_id": "{question.id}", "items": [{shape}], "total": <sum>}}')
    lines += ["Student work (OCR transcription):", answer_text.strip() or "(blank)"]
    system = _PRINCIPLES + (COMPACT_SCHEMA if compact else SCHEMA)
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


def json_prefill(question: Question) -> str:
    """The opening of the reply, for continuing an assistant turn (helps base models keep the schema)."""
    return f'{{"question_id": "{question.id}", "items": [{{"id": "{question.rubric[0].id}", "points": '


class GradeParseError(ValueError):
    """A model reply that is not a valid grade; ``raw_text`` is the reply, ``reason`` says what is wrong."""

    _paper: ClassVar[dict[str, object]] = paper("ai_grading")

    def __init__(self, reason: str, raw_text: str) -> None:
        super().__init__(f"invalid grade output: {reason}")
        self.reason = reason
        self.raw_text = raw_text


@dataclass(frozen=True)
class GradeResult:
    """One validated grade. ``total`` is the item sum; ``reported_total`` is what the model wrote and
    ``total_mismatch`` flags a difference above 1e-6 (never silently replaced)."""

    _paper: ClassVar[dict[str, object]] = paper("ai_grading")

    question_id: str
    items: dict[str, float]
    total: float
    feedback: str = ""
    confidence: float | None = None
    needs_human: bool = False
    reported_total: float | None = None
    total_mismatch: bool = False
    rationales: dict[str, str] = field(default_factory=dict)


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


class _DuplicateKey(Exception):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    for k in keys:
        if keys.count(k) > 1:
            raise _DuplicateKey(k)
    return dict(pairs)


def _first_object(text: str) -> Any:
    fence = _FENCE.search(text)
    body = fence.group(1) if fence else text
    start = next((i for i, ch in enumerate(body) if ch in "{["), None)
    if start is None:
        raise GradeParseError("no JSON object found" if body.strip() else "empty output", text)
    try:
        value, _ = json.JSONDecoder(object_pairs_hook=_unique_keys).raw_decode(body[start:])
    except json.JSONDecodeError as err:
        raise GradeParseError(f"malformed JSON ({err.msg} at char {err.pos})", text) from None
    except _DuplicateKey as err:
        raise GradeParseError(f"duplicate key {err.args[0]!r} in a JSON object", text) from None
    if not isinstance(value, dict):
        raise GradeParseError(f"expected a JSON object, got {type(value).__name__}", text)
    return value


def _number(value: Any, what: str, text: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise GradeParseError(f"{what} must be a finite number, got {value!r}", text)
    return float(value)


def parse_grade_output(text: str, question: Question, *, on_overflow: str = "error") -> GradeResult:
    """Validate a model reply against ``question``'s rubric [reconstructed rules].

    Takes the first JSON object (a ```json fence is allowed, trailing prose is ignored). Every rubric item
    appears exactly once, no unknown ids; ``0 <= points <= item max`` (``on_overflow="clip"`` clips an
    overshoot of at most 1e-6); ``confidence`` in ``[0, 1]``; a ``total`` off the item sum is flagged.

    Raises:
        GradeParseError: the reply is not a valid grade (``.reason``, ``.raw_text``). Never scored 0.
        TypeError: ``text`` is not a string.

    Example:
        >>> q = Question("q1", "d/dx x^2", (RubricItem("rule", 1, "power rule"),))
        >>> parse_grade_output('Sure! {"items": [{"id": "rule", "points": 1}], "total": 1}', q).total
        1.0
    """
    if not isinstance(text, str):
        raise TypeError(f"`text` must be a str, got {type(text).__name__}.")
    check_choice("on_overflow", on_overflow, ("error", "clip"))
    obj = _first_object(text)
    if "question_id" in obj and str(obj["question_id"]) != question.id:
        raise GradeParseError(f"question_id {obj['question_id']!r} is not {question.id!r}", text)
    items = obj.get("items")
    if not isinstance(items, list):
        raise GradeParseError(f"'items' must be a list, got {type(items).__name__}", text)
    maxima = {item.id: item.points for item in question.rubric}
    points: dict[str, float] = {}
    rationales: dict[str, str] = {}
    for entry in items:
        if not isinstance(entry, dict) or "id" not in entry or "points" not in entry:
            raise GradeParseError(f"each item needs 'id' and 'points', got {entry!r}", text)
        item_id = str(entry["id"])
        if item_id not in maxima:
            raise GradeParseError(f"unknown rubric item {item_id!r}", text)
        if item_id in points:
            raise GradeParseError(f"duplicate rubric item {item_id!r}", text)
        value = _number(entry["points"], f"points of {item_id!r}", text)
        if value > maxima[item_id] and on_overflow == "clip" and value <= maxima[item_id] + TOLERANCE:
            value = maxima[item_id]
        if not 0 <= value <= maxima[item_id]:
            raise GradeParseError(
                f"points of {item_id!r} must be in [0, {maxima[item_id]:g}], got {value}", text
            )
        points[item_id] = value
        rationales[item_id] = str(entry.get("rationale", ""))
    missing = [i for i in maxima if i not in points]
    if missing:
        raise GradeParseError(f"missing rubric items {missing}", text)
    total = float(sum(points.values()))
    reported = _number(obj["total"], "total", text) if "total" in obj else None
    confidence = _number(obj["confidence"], "confidence", text) if "confidence" in obj else None
    if confidence is not None and not 0 <= confidence <= 1:
        raise GradeParseError(f"confidence must be in [0, 1], got {confidence}", text)
    needs_human = obj.get("needs_human", False)
    if not isinstance(needs_human, bool):
        raise GradeParseError(f"needs_human must be a bool, got {needs_human!r}", text)
    return GradeResult(
        question_id=question.id,
        items=points,
        total=total,
        feedback=str(obj.get("feedback", "")),
        confidence=confidence,
        needs_human=needs_human,
        reported_total=reported,
        total_mismatch=reported is not None and abs(reported - total) > TOLERANCE,
        rationales=rationales,
    )


def _combine(values: Sequence[float], rule: str) -> float:
    if rule == "max":
        return max(values)
    if rule == "min":
        return min(values)
    if rule == "median":
        return float(statistics.median(values))
    return float(statistics.fmean(values))


def aggregate_runs(
    runs: Sequence[GradeResult], *, rule: str = "max", level: str = "total"
) -> tuple[float, dict[str, float], int]:
    """Combine ``R`` valid runs of one answer: ``(total, items, index of the run whose feedback is kept)``.

    ``rule``: ``"max"`` (the paper's rule [paper]), ``"median"``, ``"mean"`` or ``"min"`` [reconstructed].
    ``level="total"`` combines the run totals (``items`` come from the selected run); ``"item"`` combines
    each rubric item across runs and sums them. The selected run is the first whose total is closest to
    the combined total, so ties keep the earliest run.

    Example:
        >>> mk = lambda a, b: GradeResult("q", {"a": a, "b": b}, a + b)
        >>> aggregate_runs([mk(1, 0), mk(0, 1), mk(1, 1)], rule="median", level="item")
        (2.0, {'a': 1.0, 'b': 1.0}, 2)
    """
    rule = check_choice("rule", rule, AGGREGATES)
    level = check_choice("level", level, LEVELS)
    if not runs:
        raise ValueError("`runs` must hold at least one GradeResult, got [].")
    totals = [r.total for r in runs]
    if level == "item":
        items = {k: float(_combine([r.items[k] for r in runs], rule)) for k in runs[0].items}
        total = float(sum(items.values()))
    else:
        total = float(_combine(totals, rule))
    chosen = min(range(len(runs)), key=lambda i: (abs(totals[i] - total), i))
    if level == "total":
        items = dict(runs[chosen].items)
    return total, items, chosen
