"""``ultrafeedback_to_camp`` on a 12-row hand-written openbmb-layout fixture; ``validate_camp_dataset``."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import pytest

from hf_ext.testing import requires

pytestmark = requires("trl")

FIXTURE = Path(__file__).with_name("ultrafeedback_12.jsonl")


@pytest.fixture
def raw() -> list[dict[str, Any]]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


def test_openbmb_layout(raw: list[dict[str, Any]], caplog: pytest.LogCaptureFixture) -> None:
    from hf_ext.camp import ultrafeedback_to_camp

    with caplog.at_level(logging.WARNING, logger="hf_ext.camp.data"):
        ds = ultrafeedback_to_camp(raw, pairing="best_vs_worst")
    assert "dropped 1 of 12 rows" in caplog.text and "skipped 4 completions" in caplog.text
    assert len(ds) == 11
    assert set(ds.column_names) == {"prompt", "chosen", "rejected", "truth_margin", "help_margin", "conflict"}
    row = ds[0]  # Paris (5, 5, 5) vs Lyon (honesty 2, truthfulness 1, helpfulness 3)
    assert row["chosen"].startswith("Paris") and row["rejected"] == "Lyon."
    assert row["truth_margin"] == pytest.approx((5 - 1.5) / 4) and row["help_margin"] == pytest.approx(0.5)
    for t, h, c in zip(ds["truth_margin"], ds["help_margin"], ds["conflict"]):
        assert -1 <= t <= 1 and -1 <= h <= 1 and c == (t * h < 0)


def test_overall_score_picks_help_favoured_fabrication(raw: list[dict[str, Any]]) -> None:
    from hf_ext.camp import ultrafeedback_to_camp

    ds = ultrafeedback_to_camp(raw, overall="overall_score", pairing="best_vs_random", seed=0)
    by_prompt = {r["prompt"]: r for r in ds}
    wrenfold = by_prompt["What was the population of the village of Wrenfold in 1803?"]
    assert wrenfold["chosen"] == "It had 412 inhabitants."  # fabricated, yet best by overall_score
    assert wrenfold["truth_margin"] < 0 < wrenfold["help_margin"] and wrenfold["conflict"]
    assert ultrafeedback_to_camp(raw, overall="overall_score", seed=0)["rejected"] == ds["rejected"]


def test_flat_layout() -> None:
    from hf_ext.camp import ultrafeedback_to_camp

    rows = [
        {
            "prompt": "p",
            "chosen": "a",
            "rejected": "b",
            "chosen_honesty": 1,
            "rejected_honesty": 5,
            "chosen_helpfulness": 5,
            "rejected_helpfulness": 1,
        },
        {
            "prompt": "q",
            "chosen": "a",
            "rejected": "b",
            "chosen_honesty": "N/A",
            "rejected_honesty": 5,
            "chosen_helpfulness": 5,
            "rejected_helpfulness": 1,
        },
    ]
    ds = ultrafeedback_to_camp(rows, truth_aspects=("honesty",))
    assert (
        len(ds) == 1 and ds[0]["truth_margin"] == -1.0 and ds[0]["help_margin"] == 1.0 and ds[0]["conflict"]
    )


def test_bad_raw_inputs(raw: list[dict[str, Any]]) -> None:
    from hf_ext.camp import ultrafeedback_to_camp

    raw[3]["completions"][1]["annotations"]["honesty"]["Rating"] = "7"
    with pytest.raises(
        ValueError, match=r"row 3: rating 7 of aspect 'honesty' is outside the declared `scale`"
    ):
        ultrafeedback_to_camp(raw)
    raw[3]["completions"][1]["annotations"]["honesty"]["Rating"] = "high"
    with pytest.raises(
        ValueError, match=r"row 3: rating of aspect 'honesty' must be a number or 'N/A', got 'high'"
    ):
        ultrafeedback_to_camp(raw)
    with pytest.raises(ValueError, match="`pairing` must be one of"):
        ultrafeedback_to_camp(raw, pairing="random")
    with pytest.raises(ValueError, match="`overall` must be one of"):
        ultrafeedback_to_camp(raw, overall="median")
    with pytest.raises(ValueError, match=r"`scale` must be \(low, high\)"):
        ultrafeedback_to_camp(raw, scale=(5, 1))
    with pytest.raises(ValueError, match="must be in the openbmb layout"):
        ultrafeedback_to_camp([{"text": "x"}])
    with pytest.raises(ValueError, match="missing \\['chosen_honesty'"):
        ultrafeedback_to_camp([{"prompt": "p", "chosen": "a", "rejected": "b"}])


def _ds(**cols: list[Any]) -> Any:
    from datasets import Dataset

    return Dataset.from_dict({"prompt": ["p"] * len(next(iter(cols.values()))), **cols})


def test_validate_summary_and_warnings() -> None:
    from hf_ext.camp import validate_camp_dataset

    stats = validate_camp_dataset(_ds(truth_margin=[1.0, 0.0, -0.5, 0.5], help_margin=[1.0, 1.0, 0.5, 0.25]))
    assert stats == {
        "n_pairs": 4,
        "conflict_frac": 0.25,
        "tie_rate": 0.25,
        "worse_both_frac": 0.0,
        "better_both_frac": 0.75,
    }
    with pytest.warns(UserWarning, match="conflict fraction is 0"):
        validate_camp_dataset(_ds(truth_margin=[1.0], help_margin=[1.0]))
    soft = validate_camp_dataset(_ds(truth_margin=[0.0, 1.0], help_margin=[1.0, 1.0]), rule="soft", kappa=10)
    assert soft["conflict_frac"] == pytest.approx((0.5 + 1 / (1 + math.exp(10))) / 2)


def test_swapped_pairs_warn() -> None:
    """Swapping chosen and rejected flips both gaps: the conflict fraction stays, the order check fires."""
    import warnings

    from hf_ext.camp import validate_camp_dataset

    t = [1.0, 0.5, 0.25, 1.0, -1.0, 0.0, 0.75, 0.5]
    h = [1.0, 0.5, 0.75, 0.0, 1.0, 1.0, 0.25, 0.5]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clean = validate_camp_dataset(_ds(truth_margin=t, help_margin=h))
    with pytest.warns(UserWarning, match=r"look swapped: 87.5% of the pairs have a chosen answer worse"):
        swapped = validate_camp_dataset(_ds(truth_margin=[-x for x in t], help_margin=[-x for x in h]))
    assert swapped["conflict_frac"] == clean["conflict_frac"] == 0.125
    assert (clean["worse_both_frac"], swapped["worse_both_frac"]) == (0.0, 0.875)
    # a few inconsistent pairs (worse on both) among mostly sound ones: a milder warning
    with pytest.warns(UserWarning, match=r"12.5% of the pairs prefer an answer that is worse on both"):
        validate_camp_dataset(_ds(truth_margin=[*t[:-1], -0.5], help_margin=[*h[:-1], -0.25]))


@pytest.mark.parametrize(
    ("cols", "match"),
    [
        ({"truth_margin": [0.1]}, r"lacks the CAMP column\(s\) \['help_margin'\].*ultrafeedback_to_camp"),
        (
            {"truth_margin": ["0.1", "x"], "help_margin": [0.1, 0.1]},
            r"`truth_margin` must hold numbers.*row 0",
        ),
        (
            {"truth_margin": [0.1, float("nan")], "help_margin": [0.1, 0.1]},
            r"`truth_margin` must be finite.*row 1",
        ),
        (
            {"truth_margin": [0.1, 0.2], "help_margin": [0.1, float("inf")]},
            r"`help_margin` must be finite.*row 1",
        ),
        (
            {"truth_margin": [0.1, 1.5], "help_margin": [0.1, 0.1]},
            r"must lie in \[-1, 1\], but row 1 holds 1.5",
        ),
    ],
)
def test_validate_bad_columns(cols: dict[str, list[Any]], match: str) -> None:
    from hf_ext.camp import validate_camp_dataset

    with pytest.raises(ValueError, match=match):
        validate_camp_dataset(_ds(**cols))


def test_validate_conflict_key_range() -> None:
    from hf_ext.camp import validate_camp_dataset

    ds = _ds(truth_margin=[0.1, 0.1], help_margin=[0.1, 0.1], probe=[0.2, 1.2])
    with pytest.raises(ValueError, match=r"column `probe` must lie in \[0, 1\], but row 1 holds 1.2"):
        validate_camp_dataset(ds, conflict_key="probe")
    assert (
        validate_camp_dataset(_ds(probe=[0.2, 0.6]), conflict_key="probe", require_margins=False)["n_pairs"]
        == 2
    )
