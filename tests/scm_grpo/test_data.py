"""Loaders, the synthetic world, the dataset check, the prompt builder and the depth analysis."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from hf_ext.scm_grpo.analysis import depth_binned_accuracy
from hf_ext.scm_grpo.core import parse_scm_graph
from hf_ext.scm_grpo.data import check_scm_dataset, load_exfever, load_hover, make_synthetic_mhfv
from hf_ext.scm_grpo.prompt import SCMPromptBuilder

from .test_core import chain

HOVER = [
    {
        "uid": "a1",
        "claim": "The director of Film X was born in Paris.",
        "supporting_facts": [["Film X", 0], ["Jane Doe", 1]],
        "label": "SUPPORTED",
        "num_hops": 2,
        "hpqa_id": "5a",
    },
    {
        "uid": "a2",
        "claim": "Y is older than Z.",
        "supporting_facts": [["Y", 0], ["Z", 0], ["W", 2]],
        "label": "NOT_SUPPORTED",
        "num_hops": 3,
        "hpqa_id": "5b",
    },
]


def test_load_hover_with_and_without_wiki(tmp_path: Path) -> None:
    path = tmp_path / "hover_dev_release_v1.1.json"
    path.write_text(json.dumps(HOVER))
    rows = load_hover(path)
    assert [r["label"] for r in rows] == ["SUPPORTED", "NOT_SUPPORTED"]
    assert rows[0]["evidence"] == ["Film X [0]", "Jane Doe [1]"] and rows[1]["num_hops"] == 3
    wiki = {
        "Film X": ["Film X is directed by Jane Doe."],
        "Jane Doe": ["Jane Doe.", "She was born in Paris."],
    }
    rows = load_hover(path, wiki=wiki)
    assert rows[0]["evidence"] == ["Film X is directed by Jane Doe.", "She was born in Paris."]
    assert check_scm_dataset(rows) == {
        "n": 2,
        "labels": {"SUPPORTED": 1, "NOT_SUPPORTED": 1},
        "targets": {2: 1, 3: 1},
    }


def test_load_exfever_csv_and_jsonl(tmp_path: Path) -> None:
    records = [
        {
            "claim": "A was made by a company in B.",
            "explanation": "A was made by C. C is a company in B.",
            "label": "SUPPORT",
            "golden entity": "['A', 'C']",
        },
        {
            "claim": "D is E.",
            "explanation": "No information shows that D is E.",
            "label": "NOT ENOUGH INFO",
            "golden entity": "['D', 'F', 'G']",
        },
        {
            "claim": "H is I.",
            "explanation": "H is J, not I.",
            "label": "REFUTE",
            "golden entity": "['H', 'J']",
        },
    ]
    path = tmp_path / "test.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    rows = load_exfever(path)
    assert [r["label"] for r in rows] == ["SUPPORTED", "NOT_ENOUGH_INFO", "REFUTED"]
    assert [r["num_hops"] for r in rows] == [2, 3, 2]
    assert rows[0]["evidence"] == ["A was made by C.", "C is a company in B."]
    jsonl = tmp_path / "test.jsonl"
    jsonl.write_text("\n".join(json.dumps({**r, "golden entity": eval(r["golden entity"])}) for r in records))
    assert load_exfever(jsonl) == rows
    check_scm_dataset(rows, label_set="exfever")


def test_loaders_reject_bad_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="`path`"):
        load_hover(tmp_path / "missing.json")
    (tmp_path / "obj.json").write_text("{}")
    with pytest.raises(ValueError, match="`path`"):
        load_hover(tmp_path / "obj.json")
    (tmp_path / "bad.json").write_text(json.dumps([{**HOVER[0], "label": "MAYBE"}]))
    with pytest.raises(ValueError, match="`label`"):
        load_hover(tmp_path / "bad.json")


def test_synthetic_world_gold_graphs() -> None:
    rows = make_synthetic_mhfv(3, 200, max_pad=3)
    assert rows == make_synthetic_mhfv(3, 200, max_pad=3) != make_synthetic_mhfv(4, 200, max_pad=3)
    assert {r["num_hops"] for r in rows} == {2, 3, 4} and {r["pad"] for r in rows} == {0, 1, 2, 3}
    for r in rows:
        graph = parse_scm_graph(r["graph"])
        assert graph.is_valid and graph.label == r["label"]
        assert graph.depth == r["num_hops"] + r["pad"] == len(r["chain"])
        head, *_, end = r["claim"].split()
        objects = {f.split()[-1] for f in r["evidence"]}
        assert (end in objects) == (r["label"] == "SUPPORTED")
        assert r["chain"][-1] in r["evidence"] and any(f.split()[0] == head for f in r["evidence"])
    labels = [r["label"] for r in rows]
    assert 0.35 < labels.count("SUPPORTED") / len(labels) < 0.65


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"n": -1}, "n"),
        ({"hops": ()}, "hops"),
        ({"hops": (0, 2)}, "hops"),
        ({"max_pad": 4}, "max_pad"),
        ({"n_entities": 5}, "n_entities"),
        ({"p_supported": 1.5}, "p_supported"),
    ],
)
def test_synthetic_world_rejects_bad_arguments(kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError, match=f"`{name}`"):
        make_synthetic_mhfv(0, **{"n": 4, **kwargs})


def test_check_scm_dataset_errors() -> None:
    rows = [{"label": "SUPPORTED", "num_hops": 2}]
    with pytest.raises(KeyError, match=r"`label`.*columns seen: \['num_hops'\]"):
        check_scm_dataset([{"num_hops": 2}])
    with pytest.raises(KeyError, match="`num_hops`"):
        check_scm_dataset([{"label": "SUPPORTED"}])
    assert check_scm_dataset([{"label": "SUPPORTED"}], default_target=3)["targets"] == {3: 1}
    with pytest.raises(ValueError, match=r"`label`.*NOT_SUPPORTED"):
        check_scm_dataset([{"label": "REFUTED", "num_hops": 2}])
    with pytest.raises(ValueError, match="`num_hops`"):
        check_scm_dataset([{"label": "SUPPORTED", "num_hops": 0}])
    with pytest.raises(TypeError, match="`num_hops`"):
        check_scm_dataset([{"label": "SUPPORTED", "num_hops": "two"}])
    with pytest.raises(ValueError, match="`label_set`"):
        check_scm_dataset(rows, label_set="fever")
    datasets = pytest.importorskip("datasets")
    assert check_scm_dataset(datasets.Dataset.from_list(rows))["n"] == 1


def test_prompt_builder_plain_and_conversational() -> None:
    row = {"claim": "A is in C.", "evidence": ["A is in B.", "B is in C."]}
    plain = SCMPromptBuilder()(row)["prompt"]
    assert plain.endswith("Claim: A is in C.\nEvidence:\n1. A is in B.\n2. B is in C.")
    assert "SUPPORTED, NOT_SUPPORTED" in plain and "<graph>" in plain and "<answer>" in plain
    conv = SCMPromptBuilder("exfever", conversational=True, system="Be careful.").as_map_fn()(row)["prompt"]
    assert conv[0] == {"role": "system", "content": "Be careful."} and conv[1]["role"] == "user"
    assert "NOT_ENOUGH_INFO" in conv[1]["content"]
    with pytest.raises(KeyError, match="`evidence`"):
        SCMPromptBuilder()({"claim": "x"})
    with pytest.raises(ValueError, match="`claim`"):
        SCMPromptBuilder()({"claim": " ", "evidence": []})
    with pytest.raises(ValueError, match="`instruction`"):
        SCMPromptBuilder(instruction="no placeholder")
    datasets = pytest.importorskip("datasets")
    mapped = datasets.Dataset.from_list([row]).map(SCMPromptBuilder().as_map_fn())
    assert mapped[0]["prompt"] == plain


def test_depth_binned_accuracy() -> None:
    wrong = chain(2).replace("SUPPORTED", "NOT_SUPPORTED")
    completions = [chain(1), chain(2), wrong, chain(4), "junk"]
    bins = depth_binned_accuracy(completions, ["SUPPORTED"] * 5)
    assert bins == [
        {"depth": 1, "n": 1, "accuracy": 1.0},
        {"depth": 2, "n": 2, "accuracy": 0.5},
        {"depth": 4, "n": 1, "accuracy": 1.0},
        {"depth": "invalid", "n": 1, "accuracy": 0.0},
    ]
    rel = depth_binned_accuracy(completions, ["SUPPORTED"] * 5, targets=[2] * 5, relative=True)
    assert [b["depth"] for b in rel] == [-1, 0, 2, "invalid"]
    with pytest.raises(ValueError, match="`completions` and `labels`"):
        depth_binned_accuracy(completions, ["SUPPORTED"])
    with pytest.raises(ValueError, match="`targets`"):
        depth_binned_accuracy(completions, ["SUPPORTED"] * 5, relative=True)
