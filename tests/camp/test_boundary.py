"""Knowledge-boundary preference data: fact checks, probe records, UltraFeedback-style ratings."""

from __future__ import annotations

from typing import Any

import pytest

from hf_ext.camp.boundary import (
    RATINGS,
    Fact,
    check_answer,
    greedy_answers,
    knowledge_feedback,
    probe_knowledge,
)

FACTS = [
    Fact("capital of e0 ?", ("c0",), "capital"),
    Fact("capital of e1 ?", ("c1", "c2"), "capital"),
    Fact("capital of e2 ?", (), "capital"),  # fictional
]


def test_check_answer_whole_words_and_case() -> None:
    assert check_answer("The capital of France is Paris.", ("Paris",))
    assert check_answer("paris", ("Paris",)) and check_answer("It is Buenos Aires.", ("Buenos Aires",))
    assert not check_answer("Parisville", ("Paris",)) and not check_answer("anything", ())
    assert check_answer("symbol: Au.", ("Au",)) and not check_answer("Aurum", ("Au",))


def test_fact_rejects_bad_inputs() -> None:
    assert Fact("q", ()).fictional and not Fact("q", ("a",)).fictional
    with pytest.raises(ValueError, match="`prompt` must be a non-empty string"):
        Fact("  ", ("a",))
    with pytest.raises(ValueError, match="`answers` must be a tuple of non-empty strings"):
        Fact("q", "Paris")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`answers` must be a tuple.*''"):
        Fact("q", ("",))


def test_probe_knowledge_marks_known_wrong_and_fictional() -> None:
    probes = probe_knowledge(FACTS, ["c0", "c0 ?", "c1"])
    assert [p["known"] for p in probes] == [True, False, False]
    assert [p["fictional"] for p in probes] == [False, False, True]
    assert probes[0] == {"prompt": "capital of e0 ?", "answer": "c0", "known": True, "fictional": False,
                         "topic": "capital"}  # fmt: skip
    with pytest.raises(ValueError, match="same length, got 3 and 2"):
        probe_knowledge(FACTS, ["c0", "c1"])
    with pytest.raises(ValueError, match=r"`facts\[0\]` must be a Fact, got str"):
        probe_knowledge(["capital of e0 ?"], ["c0"])  # type: ignore[list-item]


def test_knowledge_feedback_ratings_and_camp_pairs() -> None:
    from hf_ext.camp.data import ultrafeedback_to_camp

    probes = probe_knowledge(FACTS, ["c0", "c0", ""])
    records = knowledge_feedback(probes, refusal="idk", separator="")
    assert len(records) == 2  # the empty answer is skipped
    known, wrong = records
    assert [c["response"] for c in known["completions"]] == ["c0", "idk"]
    assert known["completions"][0]["annotations"] == {
        "truthfulness": {"Rating": "5"},
        "helpfulness": {"Rating": "5"},
    }
    # overall = 0.75 * help + 0.25 * truth: right answer 5, refusal 0.75 * 1 + 0.25 * 4 = 1.75
    assert [c["overall_score"] for c in known["completions"]] == [5.0, 1.75]
    # wrong answer 0.75 * 4 + 0.25 * 1 = 3.25 beats the refusal 0.75 * 2 + 0.25 * 5 = 2.75
    assert [c["overall_score"] for c in wrong["completions"]] == [3.25, 2.75]
    pairs = ultrafeedback_to_camp(
        records, truth_aspects=("truthfulness",), help_aspects=("helpfulness",), overall="overall_score"
    ).to_list()
    assert [(r["chosen"], r["rejected"]) for r in pairs] == [("c0", "idk"), ("c0", "idk")]
    assert [(r["truth_margin"], r["help_margin"], r["conflict"]) for r in pairs] == [
        (0.25, 1.0, False),  # (5 - 4) / 4, (5 - 1) / 4
        (-1.0, 0.5, True),  # (1 - 5) / 4, (4 - 2) / 4: the conflict subset
    ]
    truthful = knowledge_feedback(probes, help_weight=0.25)  # a truth-leaning rater prefers the refusal
    assert truthful[1]["completions"][1]["overall_score"] > truthful[1]["completions"][0]["overall_score"]
    assert truthful[1]["completions"][1]["response"] == " I don't know."


def test_knowledge_feedback_rejects_bad_inputs() -> None:
    probes = probe_knowledge(FACTS[:1], ["c0"])
    with pytest.raises(ValueError, match=r"`ratings` lacks the kinds \['wrong'"):
        knowledge_feedback(probes, ratings={"correct": (5, 5)})
    with pytest.raises(ValueError, match=r"`ratings\['wrong'\]` must be .* got \(0, 4\)"):
        knowledge_feedback(probes, ratings={**RATINGS, "wrong": (0, 4)})
    with pytest.raises(ValueError, match="`help_weight` must be a number in \\[0, 1\\], got 1.5"):
        knowledge_feedback(probes, help_weight=1.5)
    with pytest.raises(ValueError, match="`refusal` must be a non-empty string"):
        knowledge_feedback(probes, refusal=" ")
    with pytest.raises(ValueError, match=r"`probes\[0\]` lacks \['known'\]"):
        knowledge_feedback([{"prompt": "q", "answer": "a"}])


class _EchoModel:
    """A stand-in LM whose greedy continuation is fixed token ids; records the padding it was given."""

    device = "cpu"

    def __init__(self, new_ids: list[int]) -> None:
        self.new_ids = new_ids
        self.calls: list[Any] = []

    def generate(self, input_ids: Any, attention_mask: Any, **kw: Any) -> Any:
        import torch

        self.calls.append((attention_mask.clone(), kw))
        new = torch.tensor(self.new_ids).expand(input_ids.shape[0], -1)
        return torch.cat([input_ids, new], dim=1)


def test_greedy_answers_left_pads_batches_and_decodes_new_tokens(tok: Any) -> None:
    model = _EchoModel(tok("c1 c2")["input_ids"])
    answers = greedy_answers(model, tok, ["capital of e0 ?", "e1 ?", "e2 ?"], max_new_tokens=2, batch_size=2)
    assert answers == ["c1 c2"] * 3
    assert len(model.calls) == 2 and model.calls[0][1]["do_sample"] is False
    assert model.calls[0][0].tolist() == [[1, 1, 1, 1], [0, 0, 1, 1]]  # left padding
    assert tok.padding_side == "right"
    with pytest.raises(ValueError, match="`max_new_tokens` must be >= 1, got 0"):
        greedy_answers(model, tok, ["e0 ?"], max_new_tokens=0)
    with pytest.raises(ValueError, match="`batch_size` must be >= 1, got 0"):
        greedy_answers(model, tok, ["e0 ?"], batch_size=0)
