"""The synthetic knowledge-boundary task, the arms' data and the benchmark report."""

from __future__ import annotations

import math
from typing import Any

import pytest

from hf_ext.testing import requires

pytestmark = requires("trl")

SIZE = dict(n_known=6, n_unknown=4, n_unknown_pairs=2, n_val=3, n_test=3)


def test_task_entities_are_disjoint_and_seeded() -> None:
    from benchmarks.camp import task as T

    task = T.make_task(0, **SIZE)
    groups = [task.known, task.unknown_train, task.unknown_val, task.unknown_test]
    names = [n for g in groups for n in g]
    assert len(names) == len(set(names)) == 16 and all(len(n.split()) == 2 for n in names)
    assert set(task.unknown_pairs) <= set(task.unknown_train) and task.n_hesitant == 3
    assert T.make_task(0, **SIZE) == task != T.make_task(1, **SIZE)
    with pytest.raises(ValueError, match="do not fit"):
        T.make_task(0, **{**SIZE, "n_known": 300})


def test_preference_rows_and_arm_data() -> None:
    torch = pytest.importorskip("torch")
    from benchmarks.camp import task as T
    from hf_ext.camp.core import camp_conflict

    task = T.make_task(0, **SIZE)
    rows = T.preference_rows(task, seed=0)
    kinds = [r["kind"] for r in rows]
    assert (kinds.count("known_wrong"), kinds.count("known_idk")) == (12, 12)
    assert (kinds.count("conflict"), kinds.count("unknown_idk")) == (6, 2)
    t = torch.tensor([r["truth_margin"] for r in rows])
    h = torch.tensor([r["help_margin"] for r in rows])
    assert camp_conflict(t, h).bool().tolist() == [k == "conflict" for k in kinds]
    unknown = {T.prompt(e) for e in task.unknown_pairs}
    assert all(r["prompt"] in unknown and r["rejected"] == T.IDK for r in rows if r["kind"] == "conflict")
    relabelled = T.relabel_by_truth(rows)
    assert all(r["truth_margin"] >= 0 for r in relabelled)
    assert [r["chosen"] for r in relabelled if r["kind"] == "conflict"] == [T.IDK] * 6
    assert len(T.drop_conflicts(rows)) == len(rows) - 6
    assert T.preference_rows(task, seed=0) == rows


def test_evaluate_on_an_untrained_model() -> None:
    from benchmarks.camp import task as T
    from hf_ext.testing import tiny_llama, word_tokenizer

    task = T.make_task(0, **SIZE)
    tok = word_tokenizer(task.words)
    model = tiny_llama(vocab_size=len(tok), max_position_embeddings=16)
    for split in ("val", "test"):
        rates = T.evaluate(model, tok, task, split)
        assert set(rates) == {
            "known_acc",
            "over_refusal",
            "fabrication",
            "refusal",
            "train_unknown_fabrication",
            "ece",
            "auroc",
        }
        assert all(0 <= v <= 1 for v in rates.values())
        assert rates["fabrication"] + rates["refusal"] <= 1 + 1e-6


def test_cdpo_arm_setting_is_label_smoothing() -> None:
    from benchmarks.camp import bench

    label, kw = bench.ARMS["cdpo"].grid[0]
    assert label == "beta=0.1 eps=0.1"
    assert 1 / (1 + math.exp(-kw["camp_gamma"] * kw["camp_weights"][0])) == pytest.approx(0.9)
    assert all(len(arm.grid) == 6 for arm in bench.ARMS.values())  # one tuning budget for every arm


def test_choose_prefers_low_fabrication_above_the_floor() -> None:
    from benchmarks.camp.bench import _choose

    cands: list[dict[str, Any]] = [
        {"val": {"known_acc": 0.95, "fabrication": 0.8}},
        {"val": {"known_acc": 0.90, "fabrication": 0.5}},
        {"val": {"known_acc": 0.70, "fabrication": 0.1}},
    ]
    assert _choose(cands, floor=0.88) == 1
    assert _choose(cands, floor=0.99) == 0  # none qualifies: the most helpful


def test_grid_is_the_task_the_run_builds() -> None:
    from benchmarks.camp import bench
    from benchmarks.camp import task as T

    (setting,) = bench.grid()
    task = T.make_task(0, **bench.TASK)
    sizes = (len(task.known), len(task.unknown_train), len(task.unknown_pairs), len(task.unknown_val))
    assert sizes == (setting["n_known"], setting["n_unknown"], setting["n_unknown_pairs"], setting["n_val"])
    assert len(task.unknown_test) == setting["n_test"] and bench.grid() == [setting]


@pytest.mark.slow
def test_quick_benchmark_report_and_plot(quick_report: Any, tmp_path: Any) -> None:
    from benchmarks.camp.bench import grid, plot
    from benchmarks.harness import check_slice

    report = quick_report("camp")
    check_slice(report.settings, grid(), method="camp")
    assert [r["system"] for r in report.rows] == ["sft", "dpo", "camp"]
    assert report.headline.figure == "fabrication" and not report.headline.higher_is_better
    assert math.isfinite(report.headline.method)
    assert any("at equal known-entity accuracy" in n for n in report.notes)
    assert report.to_json(method="camp", quick=True, seed=0)["rows"][1]["system"] == "dpo"
    files = plot(report, tmp_path)
    assert (tmp_path / "camp_front.png").stat().st_size > 0 and files == {
        "front": str(tmp_path / "camp_front.png")
    }


def test_gemma_fact_table_split_and_front_figures() -> None:
    from benchmarks.camp import gemma as G

    table = G.facts()
    assert len({f.prompt for f in table}) == len(table) == 246
    fictional = len(G.FICTIONAL_COUNTRIES) + len(G.FICTIONAL_ELEMENTS) + len(G.FICTIONAL_CITIES)
    assert sum(f.fictional for f in table) == fictional
    assert next(f for f in table if "Ukraine" in f.prompt).answers == ("Kyiv", "Kiev")
    probes = tuple(
        {"prompt": f"q{i}", "answer": "" if i == 0 else "a", "known": i % 3 == 0} for i in range(30)
    )
    part = G.split(probes, seed=0, n_train=8)
    assert len(part.train) == 8 and sum(p["known"] for p in part.train) == 4  # stratified
    assert len(part.train) + len(part.test) == 29  # the empty answer is dropped
    assert {p["prompt"] for p in part.train}.isdisjoint(p["prompt"] for p in part.test)
    # hand-computed: unknown scores {0.5, 3} beat known {-1, 2} in 3 of 4 pairs
    scores, known = [-1.0, 2.0, 0.5, 3.0], [True, True, False, False]
    assert G.auroc(scores, known) == 0.75
    assert G.front(scores, known, (0.0, -2.5)) == [(0.5, 1.0), (1.0, 0.5)]
    mine, other = {"front": [(0.5, 1.0), (1.0, 0.5)]}, {"front": [(0.5, 0.5), (1.0, 0.0)]}
    assert G.dominance(mine, other) == (0.5, 0.5, 0)
    # cross-fitted lead: "camp" separates known from unknown perfectly, "dpo" not at all -> lead 1 at H = 1
    known8 = [True, False] * 4
    cfg: dict[str, Any] = {"lora": 1, "train": 1, "n_known": 1, "n_facts": 1}
    camp_scores = [-1.0 if k else 1.0 for k in known8]
    per_seed = [
        {
            "config": dict(cfg, seeds=[seed]),
            "probes": [],
            "runs": [
                {"seed": seed, "system": "camp", "known": known8, "scores": camp_scores},
                {"seed": seed, "system": "dpo", "known": known8, "scores": [0.0] * 8},
            ],
        }
        for seed in (0, 1)
    ]
    merged = G.merge(per_seed)
    assert merged["config"]["seeds"] == [0, 1] and len(merged["runs"]) == 4
    assert [(r["lead"], r["helpfulness"]) for r in G.crossfit_lead(merged, "camp", ("dpo",))] == [
        (1.0, 1.0)
    ] * 2
