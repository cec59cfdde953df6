"""Offline data for the grading pipeline: synthetic calculus items with sympy-verified rubric targets,
simulated student answers with controlled errors, OCR-style noise, and the sympy rubric engine that grades
them (the reference, "TA", grader).

Everything here is [reconstructed]: the paper's student work is private. Item families, each with three
1-point rubric items (two work steps and the final answer):

==== ============================== ======================================================
D1   product rule, x^a sin(bx)       u' = a x^(a-1), v' = b cos(bx), answer
D2   chain rule, sin/exp(ax^2 + b)   outer derivative at the inner function, inner 2ax, answer
D3   quotient rule (ax+b)/(x^2+c)    numerator of the rule, squared denominator, answer
I1   definite integral of ax^2+bx    antiderivative (up to a constant), F(upper), answer
I2   u-substitution, x cos(ax^2)     du/dx = 2ax, sin(ax^2), answer (up to a constant)
==== ============================== ======================================================

Error types and their reference scores: ``none`` 3/3; ``sign`` (sign flipped in the answer) 2/3;
``rule`` (chain-rule omission in D1/D2, unsquared denominator in D3, the answer carried through)
1/3, or (lower limit dropped in I1, the 1/(2a) of the substitution dropped in I2) 2/3; ``arithmetic`` (a
coefficient off by one in the answer) 2/3; ``wrong_work`` (correct answer, wrong steps) 0/3, since the
answer item needs supporting work; ``partial`` (first step only) 1/3.
"""

from __future__ import annotations

import concurrent.futures
import json
import random
import re
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import sympy as sp
from sympy.parsing.sympy_parser import (
    convert_xor,
    implicit_multiplication_application,
    parse_expr,
    standard_transformations,
)

from hf_ext._registry import paper
from hf_ext._validation import check_float, check_int, check_probability
from hf_ext.ai_grading.core import GradeResult, Question, Quiz, RubricItem
from hf_ext.ai_grading.ocr import OCRResult

X = sp.Symbol("x")
FAMILIES = ("D1", "D2", "D3", "I1", "I2")
ERRORS = ("none", "sign", "rule", "arithmetic", "wrong_work", "partial")
_TRANSFORMS = (*standard_transformations, implicit_multiplication_application, convert_xor)


@dataclass(frozen=True)
class CalculusItem:
    """One synthetic question: its rubric ``question``, the ``family``, the sympy ``targets`` per rubric item
    and, per item, whether equivalence is up to an additive constant (antiderivatives)."""

    question: Question
    family: str
    targets: dict[str, sp.Expr]
    up_to_constant: dict[str, bool]
    wrong: dict[str, sp.Expr]  # the consistent wrong step and answer of the ``rule`` error


@dataclass(frozen=True)
class SyntheticQuiz:
    """A :class:`Quiz` with the :class:`CalculusItem` behind each question id."""

    quiz: Quiz
    items: dict[str, CalculusItem]


def _item(qid: str, family: str, rng: random.Random) -> CalculusItem:
    a, b = rng.randint(2, 5), rng.randint(1, 4)
    step = ("step1", "step2", "answer")
    if family == "D1":
        b = rng.randint(2, 4)  # b = 1 would make the chain-rule omission correct
        f = X**a * sp.sin(b * X)
        t = [a * X ** (a - 1), b * sp.cos(b * X), sp.diff(f, X)]
        wrong = {"step2": sp.cos(b * X), "answer": a * X ** (a - 1) * sp.sin(b * X) + X**a * sp.cos(b * X)}
        prompt, desc = f"Differentiate f(x) = {sp.sstr(f)}.", ("derivative of x^a", "derivative of sin(bx)")
    elif family == "D2":
        outer = rng.choice((sp.sin, sp.exp))
        inner = a * X**2 + b
        f = outer(inner)
        t = [
            sp.diff(outer(sp.Symbol("u")), sp.Symbol("u")).subs(sp.Symbol("u"), inner),
            2 * a * X,
            sp.diff(f, X),
        ]
        wrong = {"step2": sp.Integer(1), "answer": t[0]}
        prompt, desc = (
            f"Differentiate f(x) = {sp.sstr(f)}.",
            ("outer derivative at the inner", "inner derivative"),
        )
    elif family == "D3":
        c = rng.randint(1, 4)
        num, den = a * X + b, X**2 + c
        f = num / den
        t = [sp.expand(sp.diff(num, X) * den - num * sp.diff(den, X)), den**2, sp.diff(f, X)]
        wrong = {"step2": den, "answer": t[0] / den}
        prompt, desc = f"Differentiate f(x) = {sp.sstr(f)}.", ("numerator u'v - uv'", "denominator v^2")
    elif family == "I1":
        lo, hi = 1, rng.randint(2, 4)
        g = a * X**2 + b * X
        anti = sp.integrate(g, X)
        t = [anti, anti.subs(X, hi), sp.integrate(g, (X, lo, hi))]
        wrong = {"answer": anti.subs(X, hi)}
        prompt, desc = (
            f"Compute the integral of {sp.sstr(g)} from x={lo} to x={hi}.",
            ("antiderivative", "F(upper)"),
        )
    elif family == "I2":
        g = X * sp.cos(a * X**2)
        t = [2 * a * X, sp.sin(a * X**2), sp.integrate(g, X)]
        wrong = {"step2": sp.sin(a * X**2), "answer": sp.sin(a * X**2)}
        prompt, desc = (
            f"Find the antiderivative of {sp.sstr(g)}.",
            ("du/dx for u = ax^2", "integral of cos(u)"),
        )
    else:
        raise ValueError(f"`family` must be one of {FAMILIES}, got {family!r}.")
    rubric = (
        RubricItem("step1", 1.0, desc[0], "1 if equivalent to the reference, else 0"),
        RubricItem("step2", 1.0, desc[1], "1 if equivalent to the reference, else 0"),
        RubricItem("answer", 1.0, "correct final answer", "only with supporting work (a correct step)"),
    )
    ref = "; ".join(f"{k}: {sp.sstr(v)}" for k, v in zip(step, t))
    question = Question(qid, prompt, rubric, reference_solution=ref, total=3.0)
    up = {"step1": family in ("I1",), "step2": False, "answer": family == "I2"}
    return CalculusItem(question, family, dict(zip(step, t)), up, wrong)


def make_calculus_quiz(n: int, seed: int = 0) -> SyntheticQuiz:
    """``n`` questions cycling through the five families, coefficients drawn from ``seed``."""
    n = check_int("n", n, low=1)
    rng = random.Random(check_int("seed", seed))
    items = [_item(f"{FAMILIES[i % 5]}-{i}", FAMILIES[i % 5], rng) for i in range(n)]
    return SyntheticQuiz(Quiz(tuple(i.question for i in items)), {i.question.id: i for i in items})


def _perturb_coefficient(expr: sp.Expr) -> sp.Expr:
    term = sp.Add.make_args(sp.expand(expr))[0]
    coeff, rest = term.as_coeff_Mul()
    return sp.expand(expr) - term + (coeff + 1) * rest


def simulate_student(item: CalculusItem, rng: random.Random, error: str | None = None) -> tuple[str, str]:
    """Write an answer to ``item`` as ``Step k: ... = expr`` lines plus ``Answer: expr`` (ASCII sympy).

    Returns ``(text, error)``; ``error`` is drawn uniformly from the error types unless given.
    """
    error = error if error is not None else rng.choice(ERRORS)
    if error not in ERRORS:
        raise ValueError(f"`error` must be one of {ERRORS}, got {error!r}.")
    steps = {k: item.targets[k] for k in ("step1", "step2")}
    correct = item.targets["answer"]
    answer: sp.Expr | None = correct
    if error == "sign":
        answer = -correct
    elif error == "arithmetic":
        answer = _perturb_coefficient(correct)
    elif error == "rule":
        steps.update({k: v for k, v in item.wrong.items() if k != "answer"})
        answer = item.wrong["answer"]
    elif error == "wrong_work":
        steps = {k: v * 2 + 1 for k, v in steps.items()}
    elif error == "partial":
        steps.pop("step2")
        answer = None
    lines = [
        f"Step {i}: {item.question.rubric[i - 1].description} = {sp.sstr(v)}"
        for i, v in ((1, steps.get("step1")), (2, steps.get("step2")))
        if v is not None
    ]
    if answer is not None:
        lines.append(f"Answer: {sp.sstr(answer)}")
    return "\n".join(lines), error


@lru_cache(maxsize=65536)
def parse_math(text: str) -> sp.Expr | None:
    """A sympy expression from student text (implicit multiplication, ``^`` as power), or ``None``."""
    try:
        expr = parse_expr(text.strip(), local_dict={"x": X, "e": sp.E}, transformations=_TRANSFORMS)
    except Exception:  # any parse failure of noisy text is an unreadable step
        return None
    return expr if isinstance(expr, sp.Expr) else None


def _numeric_zero(diff: sp.Expr, points: int = 5, seed: int = 0) -> bool | None:
    """Whether ``diff`` vanishes at ``points`` random x in [0.3, 2.1]; ``None`` if it cannot be evaluated."""
    rng = random.Random(seed)
    try:
        f = sp.lambdify(X, diff, "math")
        values = [complex(f(rng.uniform(0.3, 2.1))) for _ in range(points)]
    except Exception:  # lambdify or evaluation of an odd expression (Order terms, poles)
        return None
    return all(abs(v) <= 1e-7 * (1 + abs(v)) for v in values)


def equivalent(
    a: sp.Expr,
    b: sp.Expr,
    *,
    up_to_constant: bool = False,
    timeout: float = 2.0,
    simplify: Callable[[sp.Expr], sp.Expr] = sp.simplify,
) -> bool:
    """Whether ``a`` and ``b`` are equal (their derivatives, when ``up_to_constant``).

    ``simplify(a - b) == 0`` decides, within ``timeout`` seconds; when it times out or leaves a residue, a
    numeric check at 5 random points decides. A point where ``a - b`` is non-zero proves inequivalence
    first, so ``simplify`` only runs on candidates.
    """
    try:
        diff = sp.diff(a - b, X) if up_to_constant else a - b
        if diff.free_symbols - {X}:
            return False
        if sp.expand(diff) == 0:
            return True
    except Exception:  # noisy text can parse to objects sympy cannot subtract or differentiate
        return False
    numeric = _numeric_zero(diff)
    if numeric is False:
        return False
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        if pool.submit(simplify, diff).result(timeout=timeout) == 0:
            return True
    except concurrent.futures.TimeoutError:
        pass
    finally:
        pool.shutdown(wait=False)
    return bool(numeric)


def _lines(text: str) -> tuple[list[str], str | None]:
    steps, answer = [], None
    for line in text.splitlines():
        if re.match(r"\s*answer\s*:", line, re.IGNORECASE):
            answer = line.split(":", 1)[1]
        elif re.match(r"\s*step\s*\d*\s*:", line, re.IGNORECASE):
            steps.append(line.split(":", 1)[1].rsplit("=", 1)[-1])
    return steps, answer


class SympyRubricEngine:
    """Deterministic per-step rubric grading of the synthetic answers [reconstructed].

    A step item earns its point when any ``Step`` line is equivalent to its target; the answer item when
    the ``Answer`` line is equivalent to the target **and** a step item was earned (supporting work).
    Unparsable lines earn nothing, so on OCR-noisy text the engine counts noise as mathematical error.
    """

    _paper = paper("ai_grading")

    def __init__(self, quiz: SyntheticQuiz, *, timeout: float = 2.0) -> None:
        self.quiz = quiz
        self.timeout = check_float("timeout", timeout, low=0, low_open=True)

    def _match(self, item: CalculusItem, key: str, texts: Sequence[str]) -> bool:
        for text in texts:
            expr = parse_math(text)
            if expr is not None and _equivalent_cached(
                sp.srepr(expr), sp.srepr(item.targets[key]), item.up_to_constant[key], self.timeout
            ):
                return True
        return False

    def grade(self, question_id: str, text: str) -> GradeResult:
        item = self.quiz.items[question_id]
        steps, answer = _lines(text)
        points = {k: float(self._match(item, k, steps)) for k in ("step1", "step2")}
        final_ok = answer is not None and self._match(item, "answer", [answer])
        points["answer"] = float(final_ok and max(points.values()) > 0)
        missed = [k for k, v in points.items() if v == 0]
        feedback = "All steps correct." if not missed else f"Check {', '.join(missed)}."
        total = sum(points.values())
        return GradeResult(question_id, points, total, feedback, 1.0, False, total)

    def final_only(self, question_id: str, text: str) -> float:
        """Full marks iff the ``Answer`` line is equivalent to the reference answer, else 0."""
        item = self.quiz.items[question_id]
        _, answer = _lines(text)
        ok = answer is not None and self._match(item, "answer", [answer])
        return item.question.max_points if ok else 0.0


@lru_cache(maxsize=65536)
def _equivalent_cached(a: str, b: str, up_to_constant: bool, timeout: float) -> bool:
    return equivalent(sp.sympify(a), sp.sympify(b), up_to_constant=up_to_constant, timeout=timeout)


def grade_json(result: GradeResult) -> str:
    """A :class:`GradeResult` written in the grader's JSON schema."""
    items = [{"id": k, "points": v, "rationale": ""} for k, v in result.items.items()]
    body = {
        "question_id": result.question_id,
        "items": items,
        "total": result.total,
        "feedback": result.feedback,
        "confidence": 1.0,
        "needs_human": False,
    }
    return json.dumps(body)


def read_prompt(messages: Sequence[dict[str, str]]) -> tuple[str, str]:
    """``(question_id, student text)`` from the last user message, built by
    :func:`~hf_ext.ai_grading.core.rubric_messages`."""
    user = next(m["content"] for m in reversed(messages) if m["role"] == "user")  # after any few-shot turns
    qid = re.match(r"Question (\S+) ", user)
    if qid is None:
        raise ValueError("the user message does not start with 'Question <id>'.")
    work = user.split("Student work (OCR transcription):\n", 1)[1]
    return qid.group(1), work.split("\n\nA previous reply was rejected", 1)[0]


class SympyRubricBackend:
    """The rubric engine as a grader backend: reads the prompt, replies with schema JSON (the oracle)."""

    _paper = paper("ai_grading")

    def __init__(self, engine: SympyRubricEngine) -> None:
        self.engine = engine

    def __call__(self, messages: Sequence[dict[str, str]], *, seed: int, temperature: float) -> str:
        qid, text = read_prompt(messages)
        return grade_json(self.engine.grade(qid, text))


_SUBS = (("**2", ""), ("^2", ""), ("x", "×"), ("-", "~"), ("1", "l"), ("0", "O"))


class NoisyOCR:
    """OCR-style noise on typed answers: each corruptible site (``**2``/``^2`` lost, ``x``->``×``,
    ``-``->``~``, ``1``->``l``, ``0``->``O``) is corrupted with probability ``p_char``; with probability
    ``p_seg`` a question's last line moves to the next question. Confidence per question is ``0.85**k``
    after ``k`` corruptions. Seeded per submission id, so a submission always reads the same."""

    _paper = paper("ai_grading")

    def __init__(self, p_char: float = 0.03, p_seg: float = 0.05, seed: int = 0) -> None:
        self.p_char = check_probability("p_char", p_char)
        self.p_seg = check_probability("p_seg", p_seg)
        self.seed = check_int("seed", seed)

    def corrupt(self, text: str, rng: random.Random) -> tuple[str, int]:
        """``(noisy text, number of corruptions)``."""
        out, i, count = [], 0, 0
        while i < len(text):
            for src, dst in _SUBS:
                if text.startswith(src, i) and rng.random() < self.p_char:
                    out.append(dst)
                    i += len(src)
                    count += 1
                    break
            else:
                out.append(text[i])
                i += 1
        return "".join(out), count

    def __call__(self, submission: Any, question_ids: Sequence[str]) -> OCRResult:
        rng = random.Random(self.seed * 1_000_003 + zlib.crc32(str(submission.id).encode()))
        lines = {q: str(submission.answers.get(q, "")).splitlines() for q in question_ids}
        for here, there in zip(question_ids, question_ids[1:]):
            if lines[here] and rng.random() < self.p_seg:
                lines[there].insert(0, lines[here].pop())
        text, conf = {}, {}
        for q in question_ids:
            text[q], k = self.corrupt("\n".join(lines[q]), rng)
            conf[q] = 0.85**k
        return OCRResult(text=text, confidence=conf, raw=None)
