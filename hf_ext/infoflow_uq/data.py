"""Offline retrieval-style QA with known relevance: fictional people and the real cities they live in.

Each example is a one-shot prompt ``Context: <k facts> Question: Where does <First Last> live?\\nAnswer:``.
The facts ``"First Last lives in City."`` are about fictional people, so the model cannot answer from
parametric knowledge; distractor facts share the first or the last name with the asked person, so naive
word overlap with the question also marks distractors. The gold fact's tokens are the relevance labels. With
``unanswerable_rate > 0`` some examples drop the gold fact (no token is relevant, ``answer`` is ``None``).

``distractors="passages"`` builds a second, harder set: besides the gold fact, up to three distractor
passages are about the asked person themself but state another relation to another city ("was born in",
"works in", "once visited"), so the wrong answers are grounded in a passage that matches the question's
name exactly; the one-shot example shows such a passage too.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from hf_ext._registry import paper
from hf_ext._validation import check_choice, check_int, check_probability, check_sequence

FIRST_NAMES = "Kai Ada Milo Ines Tove Rafe Lina Otto Yara Bram Nell Ivo Sana Emil Maud Tarek".split()
LAST_NAMES = "Norell Voss Brandt Okafor Lindqvist Marlow Ferreira Halden Quist Aberg Castell Dunmore".split()
CITIES = (
    "Rome Paris Berlin Madrid Lisbon Vienna Prague Dublin Oslo Athens Cairo Tokyo Lima Bogota Nairobi "
    "Sydney Toronto Chicago Moscow Warsaw"
).split()
DEMO = (
    "Context: Kai Norell lives in Rome. Ada Voss lives in Paris.\n"
    "Question: Where does Kai Norell live?\nAnswer: Rome\n\n"
)
DEMO_PEOPLE = {("Kai", "Norell"), ("Ada", "Voss")}
PASSAGE_DEMO = (
    "Context: Kai Norell was born in Oslo. Kai Norell lives in Rome. Ada Voss lives in Paris.\n"
    "Question: Where does Kai Norell live?\nAnswer: Rome\n\n"
)
# relations of the distractor passages about the asked person (never "lives in")
RELATIONS = ("was born in", "works in", "once visited")
DISTRACTORS = ("names", "passages")


@dataclass(frozen=True)
class RAGExample:
    """One retrieval-style question.

    Attributes:
        prompt: The full prompt text, ending with ``"Answer:"``.
        question: The asked person, ``"First Last"``.
        answer: The gold city, or ``None`` when the gold fact was left out.
        num_facts: Facts in the context (``k``).
        context_span: ``(start, end)`` character span of the context facts in ``prompt``.
        gold_span: ``(start, end)`` character span of the gold fact, or ``None``.
        question_span: ``(start, end)`` character span of the asked name in the question line.
    """

    _paper = paper("infoflow_uq")

    prompt: str
    question: str
    answer: str | None
    num_facts: int
    context_span: tuple[int, int]
    gold_span: tuple[int, int] | None
    question_span: tuple[int, int]


def _people(rng: random.Random, k: int) -> list[tuple[str, str]]:
    """``k`` distinct people; the first is asked, the others share its first or last name where possible."""
    pool = [(f, last) for f in FIRST_NAMES for last in LAST_NAMES if (f, last) not in DEMO_PEOPLE]
    target = rng.choice(pool)
    close = [p for p in pool if p != target and (p[0] == target[0] or p[1] == target[1])]
    far = [p for p in pool if p != target and p not in close]
    rng.shuffle(close)
    rng.shuffle(far)
    n_close = min(len(close), k // 2)
    return [target, *close[:n_close], *far[: k - 1 - n_close]]


def make_rag_examples(
    n: int,
    *,
    num_facts: Any = (4, 6, 8, 10, 12, 14, 16),
    unanswerable_rate: float = 0.0,
    distractors: str = "names",
    seed: int = 0,
) -> list[RAGExample]:
    """``n`` seeded examples, cycling through the context sizes ``num_facts``.

    Args:
        n: Number of examples.
        num_facts: Context sizes ``k`` (facts per context, 1 to 20: cities are distinct within a context).
        unanswerable_rate: Share of examples whose gold fact is replaced by one more distractor.
        distractors: ``"names"`` (other people sharing the asked first or last name) or ``"passages"``
            (as ``"names"``, but ``min(3, k // 3)`` of the ``k`` facts are distractor passages about the
            asked person with another relation, e.g. ``"First Last was born in City."``).
        seed: Seed of the draw.

    Returns:
        A list of :class:`RAGExample`.

    Example:
        >>> ex = make_rag_examples(1, num_facts=[2], seed=0)[0]
        >>> ex.prompt[ex.gold_span[0] : ex.gold_span[1]].startswith(ex.question)
        True
    """
    n = check_int("n", n, low=1)
    ks = check_sequence("num_facts", num_facts, lambda nm, v: check_int(nm, v, low=1, high=20), min_length=1)
    rate = check_probability("unanswerable_rate", unanswerable_rate)
    kind = check_choice("distractors", distractors, DISTRACTORS)
    rng = random.Random(seed)
    out = []
    for i in range(n):
        k = ks[i % len(ks)]
        answerable = rng.random() >= rate
        n_self = min(3, k // 3) if kind == "passages" else 0
        people = _people(rng, k + (0 if answerable else 1) - n_self)
        cities = rng.sample(CITIES, len(people) + n_self)
        target = people[0]
        facts = [f"{f} {last} lives in {c}." for (f, last), c in zip(people, cities)]
        relations = rng.sample(RELATIONS, n_self)
        facts += [f"{target[0]} {target[1]} {rel} {c}." for rel, c in zip(relations, cities[len(people) :])]
        gold = facts[0] if answerable else None
        facts = facts if answerable else facts[1:]
        rng.shuffle(facts)
        head = (PASSAGE_DEMO if kind == "passages" else DEMO) + "Context: "
        context = " ".join(facts)
        name = f"{target[0]} {target[1]}"
        tail = f"\nQuestion: Where does {name} live?\nAnswer:"
        prompt = head + context + tail
        start = len(head)
        gold_span = None
        if gold is not None:
            g = prompt.index(gold, start)
            gold_span = (g, g + len(gold))
        q = len(head) + len(context) + len("\nQuestion: Where does ")
        out.append(
            RAGExample(
                prompt=prompt,
                question=name,
                answer=cities[0] if answerable else None,
                num_facts=k,
                context_span=(start, start + len(context)),
                gold_span=gold_span,
                question_span=(q, q + len(name)),
            )
        )
    return out


def encode_rag_example(example: RAGExample, tokenizer: Any) -> dict[str, Any]:
    """Token-level view of ``example``: masks and labels from the tokenizer's character offsets.

    A token belongs to a span when its character range overlaps it (leading-space tokens included).

    Returns:
        ``{"input_ids": [T] long, "context_mask": [T] bool, "relevance": [n_ctx] float (gold-fact tokens),
        "question_mask": [T] bool (the asked name), "answer_positions": [T - 1], "answer_token": int or
        None (first token of " City")}``.
    """
    import torch

    enc = tokenizer(example.prompt, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]

    def span_mask(span: tuple[int, int] | None) -> Any:
        if span is None:
            return torch.zeros(len(offsets), dtype=torch.bool)
        a, b = span
        return torch.tensor([s < b and e > a and e > s for s, e in offsets], dtype=torch.bool)

    context = span_mask(example.context_span)
    gold = span_mask(example.gold_span)
    answer = None
    if example.answer is not None:
        answer = tokenizer(" " + example.answer, add_special_tokens=False)["input_ids"][0]
    ids = torch.tensor(enc["input_ids"], dtype=torch.long)
    return {
        "input_ids": ids,
        "context_mask": context,
        "relevance": gold[context].float(),
        "question_mask": span_mask(example.question_span),
        "answer_positions": [len(ids) - 1],
        "answer_token": answer,
    }
