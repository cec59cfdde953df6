"""The synthetic knowledge-boundary task and the benchmark report."""

from __future__ import annotations

import math

import pytest

from hf_ext.testing import requires

pytestmark = requires("trl")


def test_preference_rows_layout() -> None:
    from hf_ext.trl.camp import _bench_task as T
    from hf_ext.trl.camp.core import camp_conflict

    task = T.make_task(6, 4)
    rows = T.preference_rows(task, seed=0)
    kinds = [r["kind"] for r in rows]
    assert (kinds.count("known_wrong"), kinds.count("known_idk")) == (30, 6)
    assert (kinds.count("unknown_idk"), kinds.count("conflict")) == (12, 8)
    torch = pytest.importorskip("torch")
    t = torch.tensor([r["truth_margin"] for r in rows])
    h = torch.tensor([r["help_margin"] for r in rows])
    assert camp_conflict(t, h).bool().tolist() == [k == "conflict" for k in kinds]
    unknown = {T.prompt(e) for e in task.unknown}
    assert all(r["prompt"] in unknown for r in rows if r["kind"] == "conflict")
    assert T.preference_rows(task, seed=0) == rows


def test_answer_rates_and_margins_on_untrained_model() -> None:
    from hf_ext.testing import tiny_llama, word_tokenizer
    from hf_ext.trl.camp import _bench_task as T

    task = T.make_task(4, 3)
    tok = word_tokenizer(task.words)
    model = tiny_llama(vocab_size=len(tok))
    rates = T.answer_rates(model, tok, task)
    assert all(0 <= v <= 1 for v in rates.values())
    assert rates["fabrication"] + rates["unknown_refusal"] <= 1 + 1e-6
    margins = T.implicit_margins(model, model, tok, T.preference_rows(task, 0, per_known=2), beta=0.1)
    assert margins == {"margin_consistent": 0.0, "margin_conflict": 0.0}


@pytest.mark.slow
def test_quick_benchmark_report() -> None:
    from hf_ext.trl.camp.bench import run

    report = run(quick=True, seed=0)
    assert [r["system"] for r in report.rows] == ["dpo", "camp_margin"]
    assert report.headline.figure in ("margin_ratio", "margin_diff")
    assert math.isfinite(report.headline.method)
    assert any("mechanism target" in n for n in report.notes)
    assert report.to_json(method="camp", quick=True, seed=0)["rows"][0]["system"] == "dpo"
