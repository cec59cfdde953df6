"""OCR stage: turn a submission into text per question, with a confidence in ``[0, 1]`` per question.

An OCR backend is any callable ``(submission, question_ids) -> OCRResult``. :class:`IdentityOCR` passes typed
answers through, :class:`CallableOCR` wraps a function and :class:`PipelineOCR` wraps a transformers
``image-to-text`` pipeline (no OCR model ships with hf-ext). Segmenting a page into questions belongs to
this stage [paper]; the interfaces are [reconstructed].
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from hf_ext._registry import paper
from hf_ext._validation import check_probability


@dataclass(frozen=True)
class OCRResult:
    """Text per question id, a confidence in ``[0, 1]`` per question id, and the backend's raw output."""

    _paper: ClassVar[dict[str, object]] = paper("ai_grading")

    text: dict[str, str]
    confidence: dict[str, float] = field(default_factory=dict)
    raw: Any = None

    def __post_init__(self) -> None:
        for qid, conf in self.confidence.items():
            check_probability(f"confidence[{qid!r}]", conf)

    def confidence_of(self, question_id: str) -> float:
        """Confidence of ``question_id`` (1.0 when the backend gave none)."""
        return float(self.confidence.get(question_id, 1.0))


class OCRBackend(Protocol):
    def __call__(self, submission: Any, question_ids: Sequence[str]) -> OCRResult: ...


class IdentityOCR:
    """Typed input: ``submission.answers`` (question id -> text) pass through with confidence 1."""

    _paper = paper("ai_grading")

    def __call__(self, submission: Any, question_ids: Sequence[str]) -> OCRResult:
        answers = dict(submission.answers or {})
        return OCRResult(text=answers, confidence={q: 1.0 for q in answers}, raw=None)


class CallableOCR:
    """Wrap ``fn(submission, question_ids)`` returning an :class:`OCRResult` or a ``{qid: text}`` dict."""

    _paper = paper("ai_grading")

    def __init__(self, fn: Callable[[Any, Sequence[str]], OCRResult | Mapping[str, str]]) -> None:
        if not callable(fn):
            raise TypeError(f"`fn` must be callable, got {type(fn).__name__}.")
        self.fn = fn

    def __call__(self, submission: Any, question_ids: Sequence[str]) -> OCRResult:
        out = self.fn(submission, question_ids)
        if isinstance(out, OCRResult):
            return out
        if isinstance(out, Mapping):
            return OCRResult(text={str(k): str(v) for k, v in out.items()}, raw=out)
        raise TypeError(f"`fn` must return an OCRResult or a dict, got {type(out).__name__}.")


def split_by_question(text: str, question_ids: Sequence[str]) -> dict[str, str]:
    """Segment a page transcription on lines that start with a question id and a colon (``q2: ...``)."""
    marks = "|".join(re.escape(q) for q in question_ids)
    out: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        hit = re.match(rf"\s*({marks})\s*[:.)]\s*(.*)", line) if marks else None
        if hit:
            current = hit.group(1)
            line = hit.group(2)
        if current is not None:
            out.setdefault(current, []).append(line)
    return {q: "\n".join(lines).strip() for q, lines in out.items()}


class PipelineOCR:
    """A transformers ``image-to-text`` pipeline run on ``submission.image``, split by question id.

    Args:
        pipe: The pipeline (``transformers.pipeline("image-to-text", model=...)``) or any callable that
            returns ``[{"generated_text": str}]`` for an image.
        confidence: Confidence reported for every question (the pipeline gives none), defaults to 1.0.
        segment: ``(text, question_ids) -> {qid: text}``, defaults to :func:`split_by_question`.
    """

    _paper = paper("ai_grading")

    def __init__(
        self,
        pipe: Callable[[Any], Any],
        *,
        confidence: float = 1.0,
        segment: Callable[[str, Sequence[str]], dict[str, str]] = split_by_question,
    ) -> None:
        self.pipe = pipe
        self.confidence = check_probability("confidence", confidence)
        self.segment = segment

    def __call__(self, submission: Any, question_ids: Sequence[str]) -> OCRResult:
        if getattr(submission, "image", None) is None:
            raise ValueError("`submission.image` must be set for PipelineOCR, got None.")
        raw = self.pipe(submission.image)
        first = raw[0] if isinstance(raw, list) else raw
        text = first["generated_text"] if isinstance(first, Mapping) else str(first)
        parts = self.segment(text, question_ids)
        return OCRResult(text=parts, confidence={q: self.confidence for q in parts}, raw=raw)
