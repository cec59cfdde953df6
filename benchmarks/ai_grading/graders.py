"""The graders the benchmark runs side by side, each returning one :class:`GradeReport` per answer."""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.harness import Timer
from hf_ext.ai_grading.constrained import compact_reply
from hf_ext.ai_grading.core import Question, Quiz
from hf_ext.ai_grading.ocr import OCRResult
from hf_ext.ai_grading.pipeline import GradeReport, RubricGrader, Submission
from hf_ext.ai_grading.synthetic import (
    FAMILIES,
    NoisyOCR,
    SympyRubricBackend,
    SympyRubricEngine,
    make_calculus_quiz,
    simulate_student,
)


def make_data(n_items: int, n_students: int, seed: int) -> tuple[Any, list[Submission], list[dict[str, Any]]]:
    """The quiz, one submission per student (every question answered) and per-answer facts, in submission
    then question order: reference score and items (the engine on the clean text), error type, family."""
    sq = make_calculus_quiz(n_items, seed)
    engine = SympyRubricEngine(sq)
    rng = random.Random(seed + 1)
    subs, facts = [], []
    for s in range(n_students):
        answers = {}
        for qid, item in sq.items.items():
            text, error = simulate_student(item, rng)
            answers[qid] = text
            ref = engine.grade(qid, text)
            facts.append(
                {"qid": qid, "family": item.family, "error": error, "ref": ref.total, "ref_items": ref.items}
            )
        subs.append(Submission(f"student-{seed}-{s}", answers))
    return sq, subs, facts


def ocr_texts(ocr: NoisyOCR, subs: Sequence[Submission], quiz: Quiz) -> list[OCRResult]:
    qids = [q.id for q in quiz.questions]
    return [ocr(s, qids) for s in subs]


def _fixed_ocr(result: OCRResult) -> Callable[..., OCRResult]:
    return lambda submission, question_ids: result


def run_pipeline(
    grader: RubricGrader,
    subs: Sequence[Submission],
    ocr: Sequence[OCRResult],
    quiz: Quiz,
    limit: Sequence[int] | None = None,
) -> tuple[list[GradeReport], float]:
    """Grade every answer (or the answer indices in ``limit``) through ``grader``; ``(reports, seconds)``."""
    qids = [q.id for q in quiz.questions]
    wanted = None if limit is None else set(limit)
    reports: list[GradeReport] = []
    with Timer() as t:
        for s, (sub, text) in enumerate(zip(subs, ocr)):
            grader.ocr = _fixed_ocr(text)
            chosen = [q for j, q in enumerate(qids) if wanted is None or s * len(qids) + j in wanted]
            if chosen:
                reports += grader.grade(sub, quiz, chosen)
    return reports, t.seconds


def constant_reports(value: float, quiz: Quiz, subs: Sequence[Submission]) -> list[GradeReport]:
    """The trivial grader: every answer gets ``value`` points."""
    return [
        GradeReport("", q.id, value, q.max_points, {}, "", [], 0.0, 1.0, ())
        for _ in subs
        for q in quiz.questions
    ]


def final_only_reports(
    engine: SympyRubricEngine, quiz: Quiz, ocr: Sequence[OCRResult]
) -> tuple[list[GradeReport], float]:
    """Full marks iff the (noisy) ``Answer`` line is equivalent to the reference answer."""
    out = []
    with Timer() as t:
        for text in ocr:
            for q in quiz.questions:
                score = engine.final_only(q.id, text.text[q.id])
                out.append(GradeReport("", q.id, score, q.max_points, {}, "", [], 0.0, 1.0, ()))
    return out, t.seconds


class NoisyJudge:
    """A simulated LLM grader: the rubric engine's JSON with each item moved by +-1 point with probability
    ``p`` (clipped to the item range), independently per call; replies go through the real parser."""

    def __init__(self, engine: SympyRubricEngine, p: float = 0.2, seed: int = 0) -> None:
        self.oracle = SympyRubricBackend(engine)
        self.p, self.seed = p, seed

    def __call__(self, messages: Sequence[dict[str, str]], *, seed: int, temperature: float) -> str:
        reply = json.loads(self.oracle(messages, seed=seed, temperature=temperature))
        rng = random.Random(f"{self.seed}-{seed}-{messages[-1]['content']}")
        for item in reply["items"]:
            if rng.random() < self.p:
                item["points"] = min(1.0, max(0.0, item["points"] + rng.choice((-1.0, 1.0))))
        reply["total"] = sum(i["points"] for i in reply["items"])
        return json.dumps(reply)


def char_tokenizer() -> Any:
    """A character-level ``PreTrainedTokenizerFast`` over printable ASCII (ids 0-3: ``<pad> <bos> <eos>
    <unk>``): it writes any JSON grade, unlike a word-level tokenizer. No chat template."""
    import string

    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    chars = [c for c in string.printable if c not in "\t\r\x0b\x0c"]
    vocab = {t: i for i, t in enumerate(["<pad>", "<bos>", "<eos>", "<unk>", *chars])}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=core, unk_token="<unk>", pad_token="<pad>", bos_token="<bos>", eos_token="<eos>"
    )


SHOT_ERRORS = (("D1", "none"), ("D2", "sign"), ("I1", "partial"), ("D3", "wrong_work"))


def few_shot_examples(k: int, seed: int) -> list[tuple[Question, str, str]]:
    """``k`` graded examples for the prompt, from a held-out quiz (seed ``seed + 7919``, ids ``ex-<n>``):
    full marks, a sign error, partial work and a correct answer with wrong work, in that order; each
    reply is the rubric engine's grade in the compact constrained format."""
    held = make_calculus_quiz(len(FAMILIES), seed + 7919)
    engine = SympyRubricEngine(held)
    rng = random.Random(seed + 7919)
    out = []
    for n, (family, error) in enumerate(SHOT_ERRORS[:k]):
        item = next(i for i in held.items.values() if i.family == family)
        text, _ = simulate_student(item, rng, error)
        grade = engine.grade(item.question.id, text)
        question = dataclasses.replace(item.question, id=f"ex-{n}")
        out.append((question, text, compact_reply(question.id, grade.items)))
    return out
