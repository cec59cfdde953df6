"""Rubric schema, prompt building, strict parsing of the grade JSON and the aggregation rules."""

from __future__ import annotations

import json

import pytest

from hf_ext.ai_grading.core import (
    GradeParseError,
    GradeResult,
    Question,
    Quiz,
    RubricItem,
    aggregate_runs,
    json_prefill,
    parse_grade_output,
    rubric_messages,
)

Q = Question(
    "q3",
    "Differentiate sin(x^2).",
    (
        RubricItem("outer", 1.0, "cos(x^2)"),
        RubricItem("inner", 1.0, "2x"),
        RubricItem("final", 1.0, "answer"),
    ),
    reference_solution="2*x*cos(x**2)",
    total=3.0,
)


def _reply(points=(1, 1, 0), total=None, **extra):
    items = [{"id": k, "points": p, "rationale": "r"} for k, p in zip(("outer", "inner", "final"), points)]
    body = {"question_id": "q3", "items": items, "total": sum(points) if total is None else total}
    return json.dumps({**body, "feedback": "ok", "confidence": 0.8, "needs_human": False, **extra})


def test_rubric_validation_names_the_problem():
    with pytest.raises(ValueError, match="total"):
        Question("q", "p", (RubricItem("a", 1, "d"), RubricItem("b", 1, "d")), total=3)
    with pytest.raises(ValueError, match=r"repeats item ids \['a'\]"):
        Question("q", "p", (RubricItem("a", 1, "d"), RubricItem("a", 1, "d")))
    with pytest.raises(ValueError, match="points of item 'a'"):
        RubricItem("a", 0, "d")
    with pytest.raises(ValueError, match="points of item 'a'"):
        RubricItem("a", -1.0, "d")
    with pytest.raises(ValueError, match="rubric"):
        Question("q", "p", ())
    with pytest.raises(ValueError, match="distinct ids"):
        Quiz((Q, Q))


def test_quiz_loads_from_dict_json_and_yaml(tmp_path):
    data = {
        "questions": [
            {
                "id": "q1",
                "prompt": "p",
                "total": 2,
                "rubric": [
                    {"id": "a", "points": 1.5, "description": "d"},
                    {"id": "b", "points": 0.5, "description": "e"},
                ],
            }
        ]
    }
    quiz = Quiz.from_dict(data)
    assert quiz["q1"].max_points == 2.0 and quiz["q1"].item_ids == ("a", "b")
    (tmp_path / "quiz.json").write_text(json.dumps(data))
    assert Quiz.from_json(tmp_path / "quiz.json") == quiz
    yaml = pytest.importorskip("yaml")
    (tmp_path / "quiz.yaml").write_text(yaml.safe_dump(data))
    assert Quiz.from_yaml(tmp_path / "quiz.yaml") == quiz
    with pytest.raises(KeyError, match="q9"):
        quiz["q9"]


def test_prompt_lists_items_reference_and_ocr_notice():
    system, user = rubric_messages(Q, "Answer: 2x cos(x^2)")
    assert system["role"] == "system" and "JSON only" in system["content"] and "OCR" in system["content"]
    assert "- outer (1 pt): cos(x^2)" in user["content"]
    assert "Reference solution: 2*x*cos(x**2)" in user["content"]
    assert user["content"].endswith("Answer: 2x cos(x^2)")
    assert rubric_messages(Q, "  ")[1]["content"].endswith("(blank)")
    assert json_prefill(Q).startswith('{"question_id": "q3", "items": [{"id": "outer"')


def test_parse_valid_fenced_and_trailing_prose():
    r = parse_grade_output(_reply(), Q)
    assert r.items == {"outer": 1.0, "inner": 1.0, "final": 0.0} and r.total == 2.0
    assert r.confidence == 0.8 and not r.total_mismatch and r.feedback == "ok"
    fenced = parse_grade_output("Here:\n```json\n" + _reply() + "\n```\nThanks!", Q)
    assert fenced == r
    assert parse_grade_output("Grade: " + _reply() + " and more {junk", Q) == r


def test_total_mismatch_is_flagged_not_replaced_silently():
    r = parse_grade_output(_reply(total=3), Q)
    assert r.total == 2.0 and r.reported_total == 3.0 and r.total_mismatch


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty output"),
        ("no json here", "no JSON object"),
        ('{"items": [{"id": "outer", "points": 1}', "malformed JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        (_reply().replace('"id": "final"', '"id": "bonus"'), "unknown rubric item 'bonus'"),
        (_reply().replace('"id": "final"', '"id": "outer"'), "duplicate rubric item 'outer'"),
        (json.dumps({"items": [{"id": "outer", "points": 1}, {"id": "inner", "points": 1}]}), "missing"),
        (_reply(points=(2, 1, 0)), r"points of 'outer' must be in \[0, 1\]"),
        (_reply(points=(-0.5, 1, 0)), "must be in"),
        (_reply().replace('"points": 1,', '"points": "one",', 1), "finite number"),
        (_reply().replace('"points": 1,', '"points": NaN,', 1), "finite number"),
        (_reply(confidence=1.5), "confidence must be in"),
        (_reply(needs_human="yes"), "needs_human must be a bool"),
        (_reply().replace('"q3"', '"q4"'), "question_id"),
        ('{"items": 3}', "'items' must be a list"),
        ('{"items": [{"id": "outer", "points": 1, "points": 0}]}', "duplicate key 'points'"),
    ],
)
def test_parse_rejects_with_reason_and_raw_text(text, reason):
    with pytest.raises(GradeParseError, match=reason) as info:
        parse_grade_output(text, Q)
    assert info.value.raw_text == text
    assert isinstance(info.value, ValueError)


def test_overflow_clip_only_within_tolerance():
    tiny = _reply(points=(1 + 5e-7, 1, 0), total=2)
    with pytest.raises(GradeParseError):
        parse_grade_output(tiny, Q)
    assert parse_grade_output(tiny, Q, on_overflow="clip").items["outer"] == 1.0
    with pytest.raises(GradeParseError):
        parse_grade_output(_reply(points=(1.1, 1, 0)), Q, on_overflow="clip")
    with pytest.raises(ValueError, match="on_overflow"):
        parse_grade_output(tiny, Q, on_overflow="wrap")
    with pytest.raises(TypeError, match="text"):
        parse_grade_output(None, Q)  # type: ignore[arg-type]


def _run(a, b, feedback=""):
    return GradeResult("q", {"a": float(a), "b": float(b)}, float(a + b), feedback)


def test_aggregation_rules_total_level_and_ties():
    runs = [_run(1, 0, "r0"), _run(1, 1, "r1"), _run(0, 1, "r2"), _run(1, 1, "r3")]
    assert aggregate_runs(runs, rule="max") == (2.0, {"a": 1.0, "b": 1.0}, 1)  # first of the tied maxima
    assert aggregate_runs(runs, rule="min") == (1.0, {"a": 1.0, "b": 0.0}, 0)
    assert aggregate_runs(runs, rule="median") == (1.5, {"a": 1.0, "b": 0.0}, 0)  # 1.5: both 1 and 2 tie
    assert aggregate_runs(runs, rule="mean") == (1.5, {"a": 1.0, "b": 0.0}, 0)
    assert aggregate_runs(runs[:3], rule="median") == (1.0, {"a": 1.0, "b": 0.0}, 0)


def test_aggregation_rules_item_level():
    runs = [_run(1, 0), _run(0, 1), _run(0.5, 0)]
    assert aggregate_runs(runs, rule="max", level="item")[:2] == (2.0, {"a": 1.0, "b": 1.0})
    assert aggregate_runs(runs, rule="min", level="item")[:2] == (0.0, {"a": 0.0, "b": 0.0})
    assert aggregate_runs(runs, rule="median", level="item")[:2] == (0.5, {"a": 0.5, "b": 0.0})
    total, items, chosen = aggregate_runs(runs, rule="mean", level="item")
    assert total == pytest.approx(2.5 / 3) and items["a"] == pytest.approx(0.5) and chosen == 0


def test_aggregation_bad_inputs():
    with pytest.raises(ValueError, match="rule"):
        aggregate_runs([_run(1, 0)], rule="vote")
    with pytest.raises(ValueError, match="level"):
        aggregate_runs([_run(1, 0)], level="rubric")
    with pytest.raises(ValueError, match="runs"):
        aggregate_runs([])
