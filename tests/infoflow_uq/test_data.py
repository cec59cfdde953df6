"""The offline RAG generator: facts, distractors, spans and token-level relevance."""

from __future__ import annotations

import pytest
import torch

from hf_ext.infoflow_uq.data import CITIES, encode_rag_example, make_rag_examples
from hf_ext.testing import requires


def test_examples_are_seeded_and_well_formed():
    a = make_rag_examples(14, seed=3)
    assert a == make_rag_examples(14, seed=3)
    assert a != make_rag_examples(14, seed=4)
    for ex in a:
        context = ex.prompt[slice(*ex.context_span)]
        facts = [f for f in context.split(".") if f.strip()]
        assert len(facts) == ex.num_facts
        cities = [f.split()[-1] for f in facts]
        assert len(set(cities)) == len(cities) and set(cities) <= set(CITIES)
        gold = ex.prompt[slice(*ex.gold_span)]
        assert gold == f"{ex.question} lives in {ex.answer}."
        assert ex.prompt[slice(*ex.question_span)] == ex.question
        assert ex.prompt.endswith(f"Where does {ex.question} live?\nAnswer:")
        first, last = ex.question.split()
        others = [" ".join(f.split()[:2]) for f in facts if not f.strip().startswith(ex.question)]
        assert any(o.split()[0] == first or o.split()[1] == last for o in others)


def test_distractor_passages_are_about_the_asked_person_with_other_relations():
    from hf_ext.infoflow_uq.data import PASSAGE_DEMO, RELATIONS

    exs = make_rag_examples(7, num_facts=[3, 4, 6, 9, 12, 16, 20], distractors="passages", seed=2)
    assert exs == make_rag_examples(7, num_facts=[3, 4, 6, 9, 12, 16, 20], distractors="passages", seed=2)
    for ex in exs:
        assert ex.prompt.startswith(PASSAGE_DEMO)
        facts = [f.strip() for f in ex.prompt[slice(*ex.context_span)].split(".") if f.strip()]
        assert len(facts) == ex.num_facts
        cities = [f.split()[-1] for f in facts]
        assert len(set(cities)) == len(cities)
        about = [f for f in facts if f.startswith(ex.question + " ")]
        assert f"{ex.question} lives in {ex.answer}" in about
        # min(3, k // 3) passages about the asked person, each with another relation
        relations = sorted(f[len(ex.question) + 1 : f.rindex(" ")] for f in about if " lives in " not in f)
        assert len(relations) == min(3, ex.num_facts // 3)
        assert set(relations) <= set(RELATIONS) and len(set(relations)) == len(relations)
        assert ex.prompt[slice(*ex.gold_span)] == f"{ex.question} lives in {ex.answer}."


def test_unanswerable_examples_drop_the_gold_fact():
    exs = make_rag_examples(20, num_facts=[5], unanswerable_rate=1.0, seed=0)
    for ex in exs:
        assert ex.answer is None and ex.gold_span is None
        assert f"{ex.question} lives" not in ex.prompt[slice(*ex.context_span)]


@requires("transformers")
def test_encoding_marks_the_gold_tokens():
    from hf_ext.infoflow_uq.data import DEMO, FIRST_NAMES, LAST_NAMES
    from hf_ext.testing import word_tokenizer

    words = {w for w in (DEMO + " lives in Where does live Question Answer Context").split()}
    words |= {*FIRST_NAMES, *LAST_NAMES, *CITIES, ".", "?", ":"}
    tok = word_tokenizer(sorted(words))
    ex = make_rag_examples(1, num_facts=[4], seed=1)[0]
    enc = encode_rag_example(ex, tok)
    ids = enc["input_ids"]
    ctx_tokens = tok.convert_ids_to_tokens(ids[enc["context_mask"]].tolist())
    gold_tokens = [t for t, r in zip(ctx_tokens, enc["relevance"].tolist()) if r]
    assert gold_tokens == [*ex.question.split(), "lives", "in", ex.answer, "."]
    assert len(ctx_tokens) == 4 * 6
    assert tok.convert_ids_to_tokens(ids[enc["question_mask"]].tolist()) == ex.question.split()
    assert enc["answer_positions"] == [len(ids) - 1]
    assert enc["answer_token"] == tok.convert_tokens_to_ids(ex.answer)
    assert enc["relevance"].dtype == torch.float32


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n": 0}, "`n` must be an int >= 1"),
        ({"n": 2, "num_facts": [0]}, r"`num_facts\[0\]` must be an int in \[1, 20\]"),
        ({"n": 2, "num_facts": []}, "`num_facts` must be a list of at least 1"),
        ({"n": 2, "unanswerable_rate": 1.5}, "`unanswerable_rate` must be a finite float in"),
        ({"n": 2, "distractors": "topics"}, "`distractors` must be one of"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_rag_examples(**kwargs)
