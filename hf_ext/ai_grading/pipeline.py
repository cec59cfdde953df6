"""``RubricGrader``: OCR -> rubric prompt -> ``n_runs`` backend calls -> strict parsing (with retries) ->
aggregation -> deferral to a human.

The stages and the max rule are the paper's [paper]; the retry, deferral triggers and their thresholds are
[reconstructed]. A reply that never parses is deferred with reason ``"parse_error"`` and its raw text kept;
it is never scored 0.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from hf_ext._registry import paper
from hf_ext._validation import check_int
from hf_ext.ai_grading.config import GradingConfig
from hf_ext.ai_grading.core import (
    GradeParseError,
    GradeResult,
    Question,
    Quiz,
    aggregate_runs,
    json_prefill,
    parse_grade_output,
    rubric_messages,
)
from hf_ext.ai_grading.ocr import IdentityOCR, OCRResult

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Submission:
    """One student's work: typed ``answers`` (question id -> text) and/or a page ``image`` for OCR."""

    _paper: ClassVar[dict[str, object]] = paper("ai_grading")

    id: str
    answers: Mapping[str, str] | None = None
    image: Any = None


def student_key(student_id: str) -> str:
    """A stable 16-hex-digit hash of a student id (reports never carry the id itself)."""
    return hashlib.sha256(str(student_id).encode()).hexdigest()[:16]


@dataclass
class GradeReport:
    """The grade of one answer (one submission, one question).

    ``final`` is the aggregated total in points (``None`` when no run parsed); ``items`` the per-item
    points behind it; ``spread`` = max - min run total; ``reasons`` every deferral trigger that fired
    (``"parse_error"``, ``"spread"``, ``"ocr_confidence"``, ``"needs_human"``, ``"model_confidence"``).
    """

    _paper: ClassVar[dict[str, object]] = paper("ai_grading")

    submission_key: str
    question_id: str
    final: float | None
    max_points: float
    items: dict[str, float]
    feedback: str
    runs: list[GradeResult]
    spread: float
    ocr_confidence: float
    reasons: tuple[str, ...]
    parse_errors: list[str] = field(default_factory=list)
    raw_texts: list[str] = field(default_factory=list)
    n_calls: int = 0

    @property
    def deferred(self) -> bool:
        return bool(self.reasons)


class RubricGrader:
    """Grade submissions against a :class:`~hf_ext.ai_grading.Quiz` with any chat or causal LM backend.

    Args:
        backend: ``(messages, *, seed, temperature) -> str`` (see :mod:`hf_ext.ai_grading.backends`).
        ocr: ``(submission, question_ids) -> OCRResult``, defaults to :class:`IdentityOCR` (typed input).
        config: A :class:`GradingConfig`; keyword arguments build one when omitted.
        seed: Seed of the first run; run ``r`` uses ``seed + r``.
        examples: Few-shot examples ``(question, student work, reply)``, shown before each answer as a user
            turn and the assistant's reply (the reply must parse against its question).

    Example:
        >>> from hf_ext.ai_grading import Quiz, CallableBackend
        >>> quiz = Quiz.from_dict({"questions": [{"id": "q1", "prompt": "d/dx x^2",
        ...     "rubric": [{"id": "rule", "points": 1, "description": "power rule"}]}]})
        >>> reply = '{"items": [{"id": "rule", "points": 1}], "total": 1, "confidence": 0.9}'
        >>> grader = RubricGrader(CallableBackend(lambda m, **kw: reply), n_runs=2)
        >>> grader.grade(Submission("s1", {"q1": "2x"}), quiz)[0].final
        1.0
    """

    _paper = paper("ai_grading")

    def __init__(
        self,
        backend: Callable[..., str],
        ocr: Callable[[Any, Sequence[str]], OCRResult] | None = None,
        config: GradingConfig | None = None,
        *,
        seed: int = 0,
        examples: Sequence[tuple[Question, str, str]] = (),
        **config_kwargs: Any,
    ) -> None:
        if not callable(backend):
            raise TypeError(f"`backend` must be callable, got {type(backend).__name__}.")
        if config is not None and config_kwargs:
            raise ValueError(f"pass `config` or keyword settings, not both; got {sorted(config_kwargs)}.")
        self.backend = backend
        self.ocr = ocr or IdentityOCR()
        self.config = config or GradingConfig(**config_kwargs)
        self.seed = check_int("seed", seed)
        self.examples = self._check_examples(examples)
        try:
            self._pass_question = "question" in inspect.signature(backend).parameters
        except (TypeError, ValueError):  # builtins without a signature
            self._pass_question = False

    @staticmethod
    def _check_examples(examples: Sequence[tuple[Question, str, str]]) -> list[tuple[Question, str, str]]:
        out = []
        for k, example in enumerate(examples):
            if not (isinstance(example, tuple) and len(example) == 3 and isinstance(example[0], Question)):
                raise ValueError(
                    f"`examples[{k}]` must be a (Question, work, reply) tuple, got {example!r:.80}."
                )
            try:
                parse_grade_output(example[2], example[0])
            except GradeParseError as err:
                raise ValueError(f"`examples[{k}]` has a reply that does not parse: {err.reason}.") from None
            out.append(example)
        return out

    def _call(self, messages: list[dict[str, str]], seed: int, question: Question) -> str:
        extra = {"question": question} if self._pass_question else {}
        reply = self.backend(messages, seed=seed, temperature=self.config.temperature, **extra)
        if not isinstance(reply, str):
            raise TypeError(f"the backend must return a str, got {type(reply).__name__}.")
        return reply

    def _messages(self, question: Question, text: str, problem: str | None) -> list[dict[str, str]]:
        messages = rubric_messages(question, text, compact=self.config.compact)
        shots = []
        for q, work, reply in self.examples:
            shots += [
                rubric_messages(q, work, compact=self.config.compact)[1],
                {"role": "assistant", "content": reply},
            ]
        messages[1:1] = shots
        if problem:
            note = f"\n\nA previous reply was rejected ({problem}). Reply with the JSON object only."
            messages[-1] = {"role": "user", "content": messages[-1]["content"] + note}
        if self.config.prefill:
            messages.append({"role": "assistant", "content": json_prefill(question)})
        return messages

    def grade_answer(
        self, question: Question, text: str, *, ocr_confidence: float = 1.0, key: str = ""
    ) -> GradeReport:
        """Grade one answer ``text`` (already transcribed) to ``question``."""
        cfg = self.config
        runs: list[GradeResult] = []
        errors: list[str] = []
        raws: list[str] = []
        calls = 0
        for r in range(cfg.n_runs):
            problem: str | None = None
            for attempt in range(cfg.max_retries + 1):
                reply = self._call(
                    self._messages(question, text, problem), self.seed + r + 1000 * attempt, question
                )
                calls += 1
                if cfg.keep_raw:
                    raws.append(reply)
                try:
                    runs.append(parse_grade_output(reply, question, on_overflow=cfg.on_overflow))
                    break
                except GradeParseError as err:
                    problem = err.reason
                    if attempt == cfg.max_retries:
                        if cfg.on_parse_error == "raise":
                            raise
                        errors.append(err.reason)
        reasons: list[str] = ["parse_error"] if errors else []
        final: float | None = None
        items: dict[str, float] = {}
        feedback, spread = "", 0.0
        if runs:
            final, items, chosen = aggregate_runs(runs, rule=cfg.aggregate, level=cfg.aggregate_level)
            feedback = runs[chosen].feedback
            spread = max(r.total for r in runs) - min(r.total for r in runs)
        if spread > cfg.defer_spread:
            reasons.append("spread")
        if ocr_confidence < cfg.defer_ocr_conf:
            reasons.append("ocr_confidence")
        if any(r.needs_human for r in runs):
            reasons.append("needs_human")
        if any(r.confidence is not None and r.confidence < cfg.defer_model_conf for r in runs):
            reasons.append("model_confidence")
        return GradeReport(
            submission_key=key,
            question_id=question.id,
            final=final,
            max_points=question.max_points,
            items=items,
            feedback=feedback,
            runs=runs,
            spread=spread,
            ocr_confidence=ocr_confidence,
            reasons=tuple(reasons),
            parse_errors=errors,
            raw_texts=raws,
            n_calls=calls,
        )

    def grade(
        self, submission: Submission, quiz: Quiz, question_ids: Sequence[str] | None = None
    ) -> list[GradeReport]:
        """Grade every question of ``quiz`` (or ``question_ids``) in ``submission``.

        Raises:
            KeyError: the OCR result lacks some question ids (named in the message).
        """
        qids = list(question_ids) if question_ids is not None else [q.id for q in quiz.questions]
        ocr = self.ocr(submission, qids)
        missing = [q for q in qids if q not in ocr.text]
        if missing:
            raise KeyError(f"the OCR result has no text for question ids {missing}.")
        key = student_key(submission.id)
        return [
            self.grade_answer(quiz[q], ocr.text[q], ocr_confidence=ocr.confidence_of(q), key=key)
            for q in qids
        ]

    def grade_many(self, submissions: Iterable[Submission], quiz: Quiz) -> list[GradeReport]:
        """:meth:`grade` over ``submissions``, reports in submission then question order."""
        return [report for s in submissions for report in self.grade(s, quiz)]
