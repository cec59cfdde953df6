"""Synthetic calculus data: reproducibility, the reference score of every error type, sympy equivalence
(with the timeout fallback), the rubric engine as a backend, and OCR noise."""

from __future__ import annotations

import random
import time

import pytest
import sympy as sp

from hf_ext.ai_grading.core import parse_grade_output
from hf_ext.ai_grading.pipeline import RubricGrader, Submission
from hf_ext.ai_grading.synthetic import (
    ERRORS,
    NoisyOCR,
    SympyRubricBackend,
    SympyRubricEngine,
    X,
    equivalent,
    make_calculus_quiz,
    simulate_student,
)

SQ = make_calculus_quiz(10, seed=0)
ENGINE = SympyRubricEngine(SQ)
EXPECTED = {"none": 3, "sign": 2, "arithmetic": 2, "wrong_work": 0, "partial": 1}
RULE = {"D1": 1, "D2": 1, "D3": 1, "I1": 2, "I2": 2}


def test_generator_is_reproducible_per_seed():
    assert make_calculus_quiz(10, seed=0).quiz == SQ.quiz
    assert make_calculus_quiz(10, seed=1).quiz != SQ.quiz
    rng_a, rng_b = random.Random(5), random.Random(5)
    item = SQ.items["D1-0"]
    assert [simulate_student(item, rng_a) for _ in range(6)] == [
        simulate_student(item, rng_b) for _ in range(6)
    ]
    assert [q.max_points for q in SQ.quiz.questions] == [3.0] * 10
    with pytest.raises(ValueError, match="`n`"):
        make_calculus_quiz(0)
    with pytest.raises(ValueError, match="`error`"):
        simulate_student(item, rng_a, "typo")


@pytest.mark.parametrize("error", ERRORS)
def test_each_error_type_gets_its_reference_score(error):
    rng = random.Random(0)
    for qid, item in SQ.items.items():
        text, got = simulate_student(item, rng, error)
        expected = RULE[item.family] if error == "rule" else EXPECTED[error]
        assert got == error and ENGINE.grade(qid, text).total == expected, (qid, text)


def test_chain_rule_omission_credits_only_the_outer_derivative():
    text, _ = simulate_student(SQ.items["D2-1"], random.Random(0), "rule")
    assert ENGINE.grade("D2-1", text).items == {"step1": 1.0, "step2": 0.0, "answer": 0.0}


def test_correct_answer_with_wrong_work_scores_zero_but_final_only_gives_full_marks():
    text, _ = simulate_student(SQ.items["D3-2"], random.Random(0), "wrong_work")
    assert ENGINE.grade("D3-2", text).total == 0 and ENGINE.final_only("D3-2", text) == 3.0


def test_equivalence_rules():
    assert equivalent(sp.sin(2 * X), 2 * sp.sin(X) * sp.cos(X))
    assert not equivalent(sp.sin(2 * X), 2 * sp.sin(X))
    assert equivalent(X**3 / 3 + 5, X**3 / 3, up_to_constant=True)
    assert not equivalent(X**3 / 3 + 5, X**3 / 3)
    assert not equivalent(X + sp.Symbol("l"), X)


def test_simplify_timeout_falls_back_to_the_numeric_check():
    def slow(expr):
        time.sleep(0.5)
        return expr

    start = time.monotonic()
    assert equivalent(sp.sin(2 * X), 2 * sp.sin(X) * sp.cos(X), simplify=slow, timeout=0.05)
    assert time.monotonic() - start < 0.4
    assert equivalent(
        sp.sin(2 * X), 2 * sp.sin(X) * sp.cos(X), simplify=lambda e: e
    )  # residue: numeric decides


def test_engine_backend_emits_valid_schema_json_through_the_pipeline():
    text, _ = simulate_student(SQ.items["I2-4"], random.Random(1), "none")
    reports = RubricGrader(SympyRubricBackend(ENGINE), n_runs=1).grade(
        Submission("s", {"I2-4": text}), SQ.quiz, ["I2-4"]
    )
    assert reports[0].final == 3.0 and not reports[0].deferred
    reply = SympyRubricBackend(ENGINE)(
        [
            {
                "role": "user",
                "content": f"Question I2-4 (3 points): p\nStudent work (OCR transcription):\n{text}",
            }
        ],
        seed=0,
        temperature=0.0,
    )
    assert parse_grade_output(reply, SQ.quiz["I2-4"]).total == 3.0


def test_noisy_ocr_rates_confidence_and_segmentation():
    rng = random.Random(0)
    answers = {qid: simulate_student(item, rng, "none")[0] for qid, item in SQ.items.items()}
    sub = Submission("s1", answers)
    qids = list(SQ.items)
    clean = NoisyOCR(0.0, 0.0)(sub, qids)
    assert clean.text == answers and set(clean.confidence.values()) == {1.0}
    noisy = NoisyOCR(0.2, 0.0, seed=1)(sub, qids)
    assert noisy.text != answers and min(noisy.confidence.values()) <= 0.85**3
    assert noisy.text == NoisyOCR(0.2, 0.0, seed=1)(sub, qids).text  # seeded per submission
    moved = NoisyOCR(0.0, 1.0)(sub, qids)
    assert moved.text[qids[1]].splitlines()[0] == answers[qids[0]].splitlines()[-1]
    assert "Answer:" in moved.text[qids[1]].splitlines()[0]
    text, count = NoisyOCR(1.0, 0.0).corrupt("x**2-10", random.Random(0))
    assert text == "×~lO" and count == 5
    with pytest.raises(ValueError, match="`p_char`"):
        NoisyOCR(p_char=1.5)
