"""The tracer on the real Gemma-3-270M (18 layers, 15 sliding-window): 28 RAG questions score sensibly."""

from __future__ import annotations

import math

import pytest

from hf_ext.testing import requires

pytestmark = [requires("transformers", "gemma"), pytest.mark.slow, pytest.mark.real]


def test_gemma3_270m_scores_are_finite_and_accuracy_is_mid_range():
    from benchmarks.infoflow_uq.evaluation import RULES, score_examples
    from hf_ext.assets import gemma3_270m
    from hf_ext.infoflow_uq import InformationFlowScorer
    from hf_ext.infoflow_uq.data import make_rag_examples

    model, tok = gemma3_270m()
    with pytest.raises(ValueError, match='attn_implementation="eager"'):
        InformationFlowScorer(model)
    model.set_attn_implementation("eager")
    scorer = InformationFlowScorer(model, contribution=tuple(RULES.values()))
    rows, traces = score_examples(scorer, tok, make_rag_examples(28, seed=1), batch=7)
    accuracy = sum(r["correct"] for r in rows) / len(rows)
    assert 0.2 <= accuracy <= 0.9
    assert all(math.isfinite(v) for r in rows for v in r.values())
    assert all(t.trace.shape == (18, int(t.context_mask.sum())) for t in traces)
    assert 0.0 < sum(r["ctx_share_attention"] for r in rows) / len(rows) < 0.5  # sinks hold the rest
