"""The grading pipeline: retries then deferral on malformed replies (never a guessed score), aggregation,
deferral triggers, OCR handling, and an end-to-end run on a tiny random Llama."""

from __future__ import annotations

import json

import pytest

from hf_ext.ai_grading.config import GradingConfig
from hf_ext.ai_grading.core import GradeParseError, Question, Quiz, RubricItem
from hf_ext.ai_grading.ocr import CallableOCR, OCRResult
from hf_ext.ai_grading.pipeline import RubricGrader, Submission, student_key

Q = Question("q1", "d/dx sin(x^2)", (RubricItem("outer", 1, "cos"), RubricItem("inner", 1, "2x")))
QUIZ = Quiz((Q, Question("q2", "d/dx x^3", (RubricItem("rule", 2, "3x^2"),))))
SUB = Submission("alice", {"q1": "2x cos(x^2)", "q2": "3x^2"})


def reply(outer, inner, **extra):
    items = [{"id": "outer", "points": outer}, {"id": "inner", "points": inner}]
    return json.dumps({"items": items, "total": outer + inner, "feedback": f"{outer}{inner}", **extra})


class Scripted:
    """A deterministic backend: replies from a list, in call order; records seeds and prompts."""

    def __init__(self, replies):
        self.replies, self.calls = list(replies), []

    def __call__(self, messages, *, seed, temperature):
        self.calls.append((seed, temperature, messages))
        return self.replies.pop(0)


def test_max_aggregation_feedback_and_no_deferral():
    backend = Scripted([reply(1, 0), reply(1, 1), reply(0, 1)])
    report = RubricGrader(backend, n_runs=3, defer_spread=1.0).grade_answer(Q, "work")
    assert report.final == 2.0 and report.items == {"outer": 1.0, "inner": 1.0} and report.feedback == "11"
    assert report.spread == 1.0 and not report.deferred and report.n_calls == 3
    assert [c[0] for c in backend.calls] == [0, 1, 2] and {c[1] for c in backend.calls} == {0.7}


def test_median_item_level_and_spread_deferral():
    backend = Scripted([reply(1, 0), reply(0, 0), reply(1, 1)])
    report = RubricGrader(backend, n_runs=3, aggregate="median", aggregate_level="item", defer_spread=1.5)
    out = report.grade_answer(Q, "work")
    assert out.final == 1.0 and out.items == {"outer": 1.0, "inner": 0.0}
    assert out.reasons == ("spread",) and out.deferred


def test_malformed_is_retried_then_parsed():
    backend = Scripted(["not json", reply(1, 1)])
    out = RubricGrader(backend, n_runs=1, max_retries=1).grade_answer(Q, "work")
    assert (
        out.final == 2.0
        and not out.deferred
        and out.n_calls == 2
        and out.raw_texts == ["not json", reply(1, 1)]
    )
    assert "previous reply was rejected (no JSON object found)" in backend.calls[1][2][1]["content"]
    assert backend.calls[1][0] == 1000  # a retry uses a fresh seed


def test_malformed_after_retries_is_flagged_never_scored():
    backend = Scripted(["garbage", '{"items": [}', reply(5, 0), reply(5, 0)])
    out = RubricGrader(backend, n_runs=2, max_retries=1).grade_answer(Q, "work")
    assert out.final is None and out.items == {} and out.deferred and out.reasons == ("parse_error",)
    assert len(out.parse_errors) == 2 and out.raw_texts[0] == "garbage" and out.n_calls == 4
    with pytest.raises(GradeParseError) as info:
        RubricGrader(Scripted(["x", "y"]), n_runs=1, on_parse_error="raise").grade_answer(Q, "work")
    assert info.value.raw_text == "y"


def test_partial_parse_failure_keeps_valid_runs_but_defers():
    out = RubricGrader(Scripted([reply(1, 1), "bad", "bad"]), n_runs=2).grade_answer(Q, "w")
    assert out.final == 2.0 and out.reasons == ("parse_error",)


def test_other_deferral_triggers():
    grader = RubricGrader(
        Scripted([reply(1, 1, needs_human=True, confidence=0.2)]), n_runs=1, defer_model_conf=0.5
    )
    out = grader.grade_answer(Q, "w", ocr_confidence=0.3)
    assert out.reasons == ("ocr_confidence", "needs_human", "model_confidence")


def test_grade_uses_ocr_hashes_ids_and_names_missing_questions():
    backend = Scripted([reply(1, 1), json.dumps({"items": [{"id": "rule", "points": 2}]})])
    ocr = CallableOCR(lambda s, q: OCRResult({"q1": "a", "q2": "b"}, {"q1": 0.9, "q2": 0.5}))
    reports = RubricGrader(backend, ocr, n_runs=1).grade(SUB, QUIZ)
    assert [r.final for r in reports] == [2.0, 2.0]
    assert [r.reasons for r in reports] == [(), ("ocr_confidence",)]
    assert reports[0].submission_key == student_key("alice") != "alice"
    bad = RubricGrader(backend, CallableOCR(lambda s, q: {"q1": "a"}))
    with pytest.raises(KeyError, match=r"\['q2'\]"):
        bad.grade(SUB, QUIZ)


def test_backend_returning_non_string_is_a_type_error():
    with pytest.raises(TypeError, match="str"):
        RubricGrader(lambda m, **kw: {"items": []}, n_runs=1).grade_answer(Q, "w")
    with pytest.raises(TypeError, match="backend"):
        RubricGrader("gpt")


def test_prefill_opens_the_assistant_turn():
    backend = Scripted([reply(1, 1)])
    RubricGrader(backend, n_runs=1, prefill=True, compact=True).grade_answer(Q, "w")
    messages = backend.calls[0][2]
    assert messages[-1]["role"] == "assistant" and messages[-1]["content"].startswith('{"question_id": "q1"')
    assert "Reply format:" in messages[1]["content"] and "rationale" not in messages[0]["content"]


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"n_runs": 0}, "n_runs"),
        ({"aggregate": "vote"}, "aggregate"),
        ({"aggregate_level": "rubric"}, "aggregate_level"),
        ({"defer_spread": -1.0}, "defer_spread"),
        ({"defer_ocr_conf": 1.5}, "defer_ocr_conf"),
        ({"defer_model_conf": -0.1}, "defer_model_conf"),
        ({"temperature": -0.5}, "temperature"),
        ({"max_retries": -1}, "max_retries"),
        ({"on_parse_error": "zero"}, "on_parse_error"),
    ],
)
def test_config_bad_values_name_the_field(kwargs, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        GradingConfig(**kwargs)
    with pytest.raises(ValueError, match=f"`{name}`"):
        RubricGrader(Scripted([]), **kwargs)


def test_tiny_llama_end_to_end_defers_with_raw_text():
    pytest.importorskip("transformers")
    from hf_ext.ai_grading.backends import TransformersBackend
    from hf_ext.testing import tiny_llama, word_tokenizer

    tok = word_tokenizer()
    backend = TransformersBackend(tiny_llama(vocab_size=len(tok)), tok, max_new_tokens=16)
    reports = RubricGrader(backend, n_runs=2).grade(SUB, QUIZ)
    assert len(reports) == 2
    for r in reports:
        assert r.deferred and "parse_error" in r.reasons and r.final is None
        assert len(r.raw_texts) == 4 and all(isinstance(t, str) for t in r.raw_texts)
    sampled = [
        backend(m, seed=s, temperature=1.0) for m, s in [([{"role": "user", "content": "the"}], 3)] * 2
    ]
    assert sampled[0] == sampled[1]  # the seed makes sampling reproducible
