"""The benchmark's tour entry end to end (bits L = 8, Markov vs PD-GRU, 300 steps)."""

from __future__ import annotations

from hf_ext.path_gfn.bench import METHOD, tour


def test_tour_report():
    report = tour(seed=0)
    h = report.headline
    assert h.figure == "L1" and not h.higher_is_better
    assert h.best_baseline_system in {"Markov MLP", "uniform policy (untrained)"}
    systems = {r["system"] for r in report.rows}
    assert {METHOD, "Markov MLP", "uniform policy (untrained)"} <= systems
    assert all(0 <= r["L1"] <= 2 for r in report.rows)
    gru = next(r for r in report.rows if r["system"] == METHOD)
    assert abs(gru["true logZ"] - 2.814) < 1e-3 and gru["steps"] == 300 and gru["params"] > 0
    assert (
        report.notes and report.to_json(method="path_gfn", quick=True, seed=0)["headline"]["figure"] == "L1"
    )
