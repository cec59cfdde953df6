"""Constrained JSON grades on tiny seeded models from config (character-level tokenizer): every reply parses,
greedy walking equals ``generate`` with the logits processor, the shared-prefix state changes nothing, and
bad inputs raise naming the argument."""

from __future__ import annotations

import json
import random

import pytest

from hf_ext.ai_grading.core import Question, RubricItem, json_prefill, parse_grade_output
from hf_ext.testing import requires

pytestmark = requires("transformers")

Q = Question(
    "q1",
    "Differentiate sin(x^2).",
    (RubricItem("outer", 1.0, "cos(x^2)"), RubricItem("inner", 2.0, "times 2x")),
    reference_solution="2*x*cos(x**2)",
)


@pytest.fixture(scope="module")
def tok():
    from benchmarks.ai_grading.graders import char_tokenizer

    return char_tokenizer()


def _lm(tok, arch="llama", seed=0):
    from hf_ext.testing import tiny_causal_lm

    return tiny_causal_lm(arch, seed, vocab_size=len(tok), max_position_embeddings=4096)


def test_every_walk_of_the_grammar_is_a_valid_grade(tok):
    from hf_ext.ai_grading.constrained import GradeGrammar

    grammar = GradeGrammar(Q, tok, points_step=0.5)
    assert grammar.values == [(0.0, 0.5, 1.0), (0.0, 0.5, 1.0, 1.5, 2.0)]
    rng = random.Random(0)
    for _ in range(20):
        ids: list[int] = []
        while allowed := grammar.allowed(ids):
            ids.append(rng.choice(allowed))
        result = parse_grade_output(tok.decode(ids), Q)
        assert not result.total_mismatch and set(result.items) == {"outer", "inner"}
    with pytest.raises(ValueError, match="`generated` left the grammar at token 0"):
        grammar.allowed(tok("[", add_special_tokens=False)["input_ids"])


@pytest.mark.parametrize("decoding", ["constrained", "expected"])
def test_tiny_random_model_always_returns_a_parsed_grade(tok, decoding):
    from hf_ext.ai_grading import RubricGrader, Submission, TransformersBackend

    backend = TransformersBackend(_lm(tok), tok, decoding=decoding, points_step=0.5)
    grader = RubricGrader(backend, n_runs=2, temperature=0.7, compact=True, prefill=True)
    reports = [grader.grade(Submission(f"s{k}", {"q1": f"{k} cos(x^2)"}), _quiz())[0] for k in range(3)]
    for r in reports:
        assert not r.parse_errors and r.final is not None and 0 <= r.final <= 3
        assert all(0 <= run.confidence <= 1 for run in r.runs)
        if decoding == "constrained":
            assert all(p in (0.0, 0.5, 1.0, 1.5, 2.0) for run in r.runs for p in run.items.values())


def _quiz():
    from hf_ext.ai_grading import Quiz

    return Quiz((Q,))


@pytest.mark.parametrize("arch", ["llama", "gemma3"])  # gemma3: a sliding window of 16 tokens
def test_greedy_walk_equals_generate_and_the_shared_prefix_changes_nothing(tok, arch):
    from hf_ext.ai_grading import TransformersBackend
    from hf_ext.ai_grading.constrained import GradeGrammar, GradeLogitsProcessor
    from hf_ext.ai_grading.core import rubric_messages

    lm = _lm(tok, arch, seed=1)
    backend = TransformersBackend(lm, tok, decoding="constrained", points_step=1.0)
    replies = []
    for work in ("2x cos(x^2)", "cos(x^2)", "2x cos(x^2)"):
        messages = [
            *rubric_messages(Q, work, compact=True),
            {"role": "assistant", "content": json_prefill(Q)},
        ]
        replies.append(backend(messages, seed=0, temperature=0.0, question=Q))
        fresh = TransformersBackend(lm, tok, decoding="constrained", points_step=1.0)
        assert fresh(messages, seed=0, temperature=0.0, question=Q) == replies[-1]
        prompt = tok(backend.render(messages), return_tensors="pt")["input_ids"]
        keep = GradeLogitsProcessor(
            GradeGrammar(Q, tok, points_step=1.0, prefix=json_prefill(Q)), prompt.shape[1], 2
        )
        out = lm.generate(prompt, logits_processor=[keep], do_sample=False, max_new_tokens=80, pad_token_id=0)
        generated = json_prefill(Q) + tok.decode(out[0, prompt.shape[1] :], skip_special_tokens=True)
        reply = json.loads(replies[-1])
        del reply["confidence"]
        assert json.loads(generated) == reply
    assert backend._shared is not None and replies[0] == replies[2]


def test_few_shot_examples_are_shown_before_the_answer(tok):
    from hf_ext.ai_grading import CallableBackend, RubricGrader, Submission

    seen = []
    reply = '{"items": [{"id": "outer", "points": 1}, {"id": "inner", "points": 2}], "total": 3}'
    backend = CallableBackend(lambda messages, **kw: seen.append(messages) or reply)
    RubricGrader(backend, n_runs=1, examples=[(Q, "2x cos(x^2)", reply)]).grade(
        Submission("s", {"q1": "0"}), _quiz()
    )
    roles = [m["role"] for m in seen[0]]
    assert roles == ["system", "user", "assistant", "user"] and seen[0][2]["content"] == reply
    with pytest.raises(ValueError, match=r"`examples\[0\]` has a reply that does not parse"):
        RubricGrader(backend, examples=[(Q, "work", '{"items": []}')])
    with pytest.raises(ValueError, match=r"`examples\[0\]` must be a \(Question, work, reply\) tuple"):
        RubricGrader(backend, examples=[("q1", "work", reply)])


def test_bad_inputs_name_the_argument(tok):
    from hf_ext.ai_grading import TransformersBackend
    from hf_ext.ai_grading.constrained import GradeDecoding, GradeGrammar, GradeLogitsProcessor
    from hf_ext.testing import word_tokenizer

    with pytest.raises(ValueError, match="`points_step` must be"):
        GradeGrammar(Q, tok, points_step=0)
    with pytest.raises(ValueError, match="`points_step` 0.75 must divide .* item 'outer' has 1"):
        GradeGrammar(Q, tok, points_step=0.75)
    with pytest.raises(ValueError, match="`prefix` must open the reply"):
        GradeGrammar(Q, tok, prefix='{"items"')
    with pytest.raises(ValueError, match="`tokenizer` cannot represent the grade text"):
        GradeGrammar(Q, word_tokenizer())
    grammar = GradeGrammar(Q, tok)
    with pytest.raises(ValueError, match="`prompt_length` must be an int >= 0, got -1"):
        GradeLogitsProcessor(grammar, -1, 2)
    with pytest.raises(ValueError, match="`eos_token_id` must be a token id"):
        GradeLogitsProcessor(grammar, 0, None)
    with pytest.raises(ValueError, match="`decoding` must be one of"):
        GradeDecoding(grammar, grammar.values, [(1.0, 0, 0), (1.0, 0, 0, 0, 0)], [0.0, 0.0]).text("best")
    with pytest.raises(ValueError, match="`decoding` must be one of .*'bogus'"):
        TransformersBackend(_lm(tok), tok, decoding="bogus")
    backend = TransformersBackend(_lm(tok), tok, decoding="constrained")
    with pytest.raises(ValueError, match="`question` must be given with decoding='constrained'"):
        backend([{"role": "user", "content": "grade"}], seed=0, temperature=0.0)


def test_decoding_from_a_prefix_state_equals_decoding_the_whole_prompt(tok):
    from hf_ext.ai_grading.constrained import GradeGrammar, decode_grade, prefix_state

    lm = _lm(tok, seed=2)
    grammar = GradeGrammar(Q, tok, points_step=0.5, prefix=json_prefill(Q))
    ids = tok("Grade: 2x cos(x^2)\n" + json_prefill(Q), add_special_tokens=False)["input_ids"]
    whole = decode_grade(lm, grammar, ids)
    resumed = decode_grade(lm, grammar, ids[8:], prompt_state=prefix_state(lm, ids[:8]))
    assert resumed.chosen == whole.chosen
    for a, b in zip(resumed.probs, whole.probs):
        assert a == pytest.approx(b, abs=1e-5)
