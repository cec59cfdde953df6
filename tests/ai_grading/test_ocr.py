"""OCR stage: typed pass-through, callables, an image-to-text pipeline split by question id."""

from __future__ import annotations

import pytest

from hf_ext.ai_grading.ocr import CallableOCR, IdentityOCR, OCRResult, PipelineOCR, split_by_question
from hf_ext.ai_grading.pipeline import Submission


def test_identity_and_callable():
    out = IdentityOCR()(Submission("s", {"q1": "2x"}), ["q1"])
    assert out.text == {"q1": "2x"} and out.confidence_of("q1") == 1.0
    assert CallableOCR(lambda s, q: {"q1": "a"})(Submission("s"), ["q1"]).text == {"q1": "a"}
    with pytest.raises(TypeError, match="`fn`"):
        CallableOCR(lambda s, q: 3)(Submission("s"), ["q1"])
    with pytest.raises(ValueError, match=r"confidence\['q1'\]"):
        OCRResult({"q1": "a"}, {"q1": 1.5})


def test_pipeline_ocr_splits_a_page_by_question_id():
    page = "Name: A\nq1: Step 1: 2x\nAnswer: 2x\nq2) 3x^2\nq3. blank"
    pipe = lambda image: [{"generated_text": page}]  # noqa: E731 (stands in for pipeline("image-to-text"))
    out = PipelineOCR(pipe, confidence=0.7)(Submission("s", image=object()), ["q1", "q2", "q3"])
    assert out.text == {"q1": "Step 1: 2x\nAnswer: 2x", "q2": "3x^2", "q3": "blank"}
    assert out.confidence == {"q1": 0.7, "q2": 0.7, "q3": 0.7} and out.raw == [{"generated_text": page}]
    assert split_by_question("no ids here", ["q1"]) == {}
    with pytest.raises(ValueError, match="submission.image"):
        PipelineOCR(pipe)(Submission("s"), ["q1"])
