"""The multi-perspective protocol: P1 breakdowns, P4 stability, P5 failure tags, P2/P3 statistics,
Markdown and plot rendering."""

from __future__ import annotations

import math

import pytest

from hf_ext.ai_grading.core import GradeResult
from hf_ext.ai_grading.pipeline import GradeReport
from hf_ext.ai_grading.report import EvaluationProtocol, wilson_interval
from hf_ext.testing import requires

pytestmark = requires("metrics")


def _report(final, qid="q1", runs=(), parse=False, items=None):
    results = [GradeResult(qid, {"a": t}, t) for t in runs]
    reasons = ("parse_error",) if parse else ()
    errors = ["bad"] if parse else []
    return GradeReport("k", qid, final, 3.0, items or {}, "", results, 0.0, 1.0, reasons, errors)


def test_protocol_breakdowns_failures_and_stability(tmp_path):
    reports = [
        _report(3.0, "q1", runs=(3.0, 2.0), items={"a": 1.0}),
        _report(1.0, "q1", runs=(1.0, 1.0), items={"a": 0.0}),
        _report(0.0, "q2", runs=(0.0, 0.0)),
        _report(None, "q2", parse=True),
        _report(2.0, "q2", runs=(2.0, 0.0)),
    ]
    ref = [3.0, 3.0, 2.0, 1.0, 0.0]
    out = EvaluationProtocol(n_bootstrap=50).evaluate(
        reports,
        ref,
        strata={"error": ["none", "sign", "sign", "none", "rule"]},
        reference_items=[{"a": 1.0}, {"a": 1.0}, {}, {}, {}],
        ocr_misread=[False, False, True, False, False],
        segmentation=[False, False, False, False, True],
    )
    d = out.data
    assert d["n"] == 5 and d["n_scored"] == 4 and d["n_deferred"] == 1 and d["parse_failure_rate"] == 0.2
    assert d["overall"]["mae"] == pytest.approx((0 + 2 + 2 + 2) / 4)
    assert d["kept"]["n"] == 4
    assert d["breakdowns"]["question"]["q1"]["mae"] == pytest.approx(1.0)
    assert d["breakdowns"]["error"]["sign"]["bias"] == pytest.approx(-2.0)
    assert d["breakdowns"]["score band"]["3"]["n"] == 2
    assert d["per_item"]["a"] == {"n": 2.0, "mae": 0.5, "bias": -0.5}
    modes = {k: v["count"] for k, v in d["failure_modes"].items()}
    assert modes == {"parse_failure": 1, "segmentation": 1, "ocr_misread": 1, "rubric_misapplied": 1}
    assert d["stability"]["range"] == pytest.approx(0.75) and d["stability"]["aggregation_bias"] == 0.0
    text = out.to_markdown()
    assert "| all scored | 4 |" in text and "| parse_failure | 1 | 0.25 |" in text
    assert (tmp_path / "p.png").exists() is False
    out.plot(tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 1000


def test_protocol_bad_inputs():
    protocol = EvaluationProtocol(n_bootstrap=0)
    with pytest.raises(ValueError, match="`reference`"):
        protocol.evaluate([_report(1.0)], [1.0, 2.0])
    with pytest.raises(ValueError, match="`ocr_misread`"):
        protocol.evaluate([_report(1.0)], [1.0], ocr_misread=[True, False])
    with pytest.raises(ValueError, match="strata"):
        protocol.evaluate([_report(1.0)], [1.0], strata={"error": []})
    with pytest.raises(ValueError, match="`bin_width`"):
        EvaluationProtocol(bin_width=0)


def test_survey_and_feedback_review():
    survey = EvaluationProtocol.survey({"helpful": [5, 4, 4, 2, 1]}, n_bootstrap=200)
    assert survey["helpful"]["mean"] == pytest.approx(3.2) and survey["helpful"]["agree"] == pytest.approx(
        0.6
    )
    lo, hi = survey["helpful"]["agree_ci"]
    assert 0 <= lo <= 0.6 <= hi <= 1
    with pytest.raises(ValueError, match="likert"):
        EvaluationProtocol.survey({"helpful": [0, 6]})
    review = EvaluationProtocol.feedback_review(["correct"] * 7 + ["acceptable"] * 2 + ["incorrect"])
    assert review["correct"]["rate"] == 0.7
    assert review["correct"]["ci"] == pytest.approx(wilson_interval(7, 10))
    assert wilson_interval(7, 10) == pytest.approx((0.3968, 0.8922), abs=1e-4)
    assert math.isnan(wilson_interval(0, 0)[0])
    with pytest.raises(ValueError, match="labels"):
        EvaluationProtocol.feedback_review(["great"])
