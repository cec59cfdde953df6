"""Preference data from what a model knows: probe it with fact-table questions, rate its own answers.

The knowledge-boundary recipe behind ``hf-ext bench camp``'s real-model part, usable on any causal LM:

1. :func:`greedy_answers` -- the model's own greedy answer to each question (left-padded batches).
2. :func:`probe_knowledge` -- each answer checked against a fact table (:class:`Fact`): a question is
   *known* when the answer contains an accepted answer, *unknown* when it does not or when the entity is
   fictional (no accepted answer exists, so any answer is a fabrication).
3. :func:`knowledge_feedback` -- UltraFeedback-style records (the openbmb layout of
   :func:`~hf_ext.camp.data.ultrafeedback_to_camp`): the model's answer and a refusal, each rated for
   ``truthfulness`` and ``helpfulness`` on 1-5, with an ``overall_score`` that weighs the two.

``ultrafeedback_to_camp(records, truth_aspects=("truthfulness",), help_aspects=("helpfulness",),
overall="overall_score")`` then gives CAMP pairs. With the default ratings and a helpfulness-leaning overall
score, a known question prefers the right answer to the refusal on both aspects, and an unknown question
prefers the confident fabrication by the overall score although the refusal is more truthful: the conflict
subset. [reconstructed: the ratings are ours; the paper rates UltraFeedback completions.]
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

RATING_KINDS = ("correct", "wrong", "refusal_known", "refusal_unknown")
# (truthfulness, helpfulness) on 1-5 per response kind: a right answer is both; a confident wrong answer is
# on-format but false; a refusal is honest, and says less when the answer was known.
RATINGS: dict[str, tuple[float, float]] = {
    "correct": (5.0, 5.0),
    "wrong": (1.0, 4.0),
    "refusal_known": (4.0, 1.0),
    "refusal_unknown": (5.0, 2.0),
}


@dataclass(frozen=True)
class Fact:
    """One fact-table question.

    Args:
        prompt: The question as the model sees it, e.g. ``"Q: What is the capital of France?\\nA:"``.
        answers: Accepted answers (aliases), matched case-insensitively as whole words. Empty for a
            fictional entity: it has no true answer, so any answer is a fabrication.
        topic: A free label (``"capital"``, ``"symbol"``, ...) carried into the probe records.
    """

    prompt: str
    answers: tuple[str, ...] = ()
    topic: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise ValueError(f"`prompt` must be a non-empty string, got {self.prompt!r}.")
        if isinstance(self.answers, str) or not all(isinstance(a, str) and a.strip() for a in self.answers):
            raise ValueError(
                f"`answers` must be a tuple of non-empty strings (empty tuple: fictional), got "
                f"{self.answers!r} for prompt {self.prompt!r}."
            )

    @property
    def fictional(self) -> bool:
        return not self.answers


def check_answer(answer: str, accepted: Sequence[str]) -> bool:
    """Whether ``answer`` contains one of ``accepted`` as whole words (case-insensitive).

    Example:
        >>> check_answer("The capital of France is Paris.", ("Paris",))
        True
        >>> check_answer("Parisville", ("Paris",)), check_answer("Au", ())
        (False, False)
    """
    return any(re.search(rf"(?<!\w){re.escape(a.strip())}(?!\w)", answer, re.IGNORECASE) for a in accepted)


def greedy_answers(
    model: Any, tokenizer: Any, prompts: Sequence[str], *, max_new_tokens: int = 8, batch_size: int = 32
) -> list[str]:
    """The model's greedy continuation of each prompt, cut at the first newline and stripped.

    Args:
        model: A causal LM with ``generate``.
        tokenizer: Its tokenizer (needs a pad token; batches are left-padded).
        prompts: The questions, ``len(prompts) = N``.
        max_new_tokens: Tokens generated per prompt.
        batch_size: Prompts per ``generate`` call.

    Returns:
        ``N`` answer strings.
    """
    import torch

    if max_new_tokens < 1:
        raise ValueError(f"`max_new_tokens` must be >= 1, got {max_new_tokens!r}.")
    if batch_size < 1:
        raise ValueError(f"`batch_size` must be >= 1, got {batch_size!r}.")
    if tokenizer.pad_token_id is None:
        raise ValueError("`tokenizer` has no pad token; set `tokenizer.pad_token` before probing.")
    side, tokenizer.padding_side = tokenizer.padding_side, "left"
    answers: list[str] = []
    try:
        for start in range(0, len(prompts), batch_size):
            batch = tokenizer(list(prompts[start : start + batch_size]), return_tensors="pt", padding=True)
            batch = batch.to(model.device)
            with torch.no_grad():
                out = model.generate(
                    **batch,
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    pad_token_id=tokenizer.pad_token_id,
                )
            new = out[:, batch["input_ids"].shape[1] :]
            for text in tokenizer.batch_decode(new, skip_special_tokens=True):
                answers.append(text.strip().split("\n")[0].strip())
    finally:
        tokenizer.padding_side = side
    return answers


def probe_knowledge(facts: Sequence[Fact], answers: Sequence[str]) -> list[dict[str, Any]]:
    """Check the model's answers against the fact table.

    Args:
        facts: The questions, ``N`` :class:`Fact`.
        answers: The model's answer to each (e.g. from :func:`greedy_answers`), ``N`` strings.

    Returns:
        ``N`` records ``{"prompt", "answer", "known", "fictional", "topic"}``; ``known`` is ``False`` for
        every fictional entity.
    """
    if len(facts) != len(answers):
        raise ValueError(
            f"`facts` and `answers` must have the same length, got {len(facts)} and {len(answers)}."
        )
    for i, fact in enumerate(facts):
        if not isinstance(fact, Fact):
            raise ValueError(f"`facts[{i}]` must be a Fact, got {type(fact).__name__}.")
    return [
        {
            "prompt": f.prompt,
            "answer": a,
            "known": (not f.fictional) and check_answer(a, f.answers),
            "fictional": f.fictional,
            "topic": f.topic,
        }
        for f, a in zip(facts, answers)
    ]


def knowledge_feedback(
    probes: Sequence[Mapping[str, Any]],
    *,
    refusal: str = "I don't know.",
    ratings: Mapping[str, tuple[float, float]] | None = None,
    help_weight: float = 0.75,
    separator: str = " ",
) -> list[dict[str, Any]]:
    """UltraFeedback-style records (openbmb layout) rating the model's own answer and a refusal.

    Per probe, two completions: the model's answer (rated ``correct`` when known, else ``wrong``) and
    ``refusal`` (``refusal_known`` or ``refusal_unknown``). Each carries ``annotations`` ``truthfulness``
    and ``helpfulness`` (``{"Rating": "5"}``, strings as in UltraFeedback) and ``overall_score = help_weight
    * helpfulness + (1 - help_weight) * truthfulness``. Probes with an empty answer are skipped.

    Args:
        probes: Records from :func:`probe_knowledge` (``prompt``, ``answer``, ``known``).
        refusal: The refusal response.
        ratings: ``{kind: (truthfulness, helpfulness)}`` on 1-5 for each kind of :data:`RATING_KINDS`;
            defaults to :data:`RATINGS`.
        help_weight: Weight of helpfulness in the overall score, in [0, 1]; above 0.5 the rater leans to
            helpfulness and, with the default ratings, prefers a fabrication to a refusal.
        separator: Prepended to every response (trainers concatenate prompt and response), e.g. the space
            after ``"A:"``.

    Returns:
        One record per probe, with ``instruction``, ``completions`` (each with ``response``,
        ``annotations`` and ``overall_score``) and ``known``, the layout ``ultrafeedback_to_camp`` reads.

    Example:
        >>> probe = {"prompt": "Q: capital of Zorbland?", "answer": "Zorb.", "known": False}
        >>> (record,) = knowledge_feedback([probe])
        >>> for c in record["completions"]:
        ...     print(repr(c["response"]), c["overall_score"])
        ' Zorb.' 3.25
        " I don't know." 2.75
    """
    table = dict(RATINGS if ratings is None else ratings)
    missing = [k for k in RATING_KINDS if k not in table]
    if missing:
        raise ValueError(f"`ratings` lacks the kinds {missing}; it needs all of {RATING_KINDS}.")
    for kind, pair in table.items():
        if (
            not isinstance(pair, Sequence)
            or len(pair) != 2
            or not all(isinstance(v, int | float) and 1 <= v <= 5 for v in pair)
        ):
            raise ValueError(
                f"`ratings[{kind!r}]` must be (truthfulness, helpfulness) with both in [1, 5], got {pair!r}."
            )
    if not (isinstance(help_weight, int | float) and math.isfinite(help_weight) and 0 <= help_weight <= 1):
        raise ValueError(f"`help_weight` must be a number in [0, 1], got {help_weight!r}.")
    if not isinstance(refusal, str) or not refusal.strip():
        raise ValueError(f"`refusal` must be a non-empty string, got {refusal!r}.")

    def completion(response: str, kind: str) -> dict[str, Any]:
        truth, helpful = table[kind]
        return {
            "response": separator + response,
            "annotations": {
                "truthfulness": {"Rating": f"{truth:g}"},
                "helpfulness": {"Rating": f"{helpful:g}"},
            },
            "overall_score": help_weight * helpful + (1 - help_weight) * truth,
        }

    records = []
    for i, probe in enumerate(probes):
        absent = [k for k in ("prompt", "answer", "known") if k not in probe]
        if absent:
            raise ValueError(f"`probes[{i}]` lacks {absent}; build probes with `probe_knowledge`.")
        answer = str(probe["answer"]).strip()
        if not answer:
            continue
        known = bool(probe["known"])
        records.append(
            {
                "instruction": probe["prompt"],
                "completions": [
                    completion(answer, "correct" if known else "wrong"),
                    completion(refusal, "refusal_known" if known else "refusal_unknown"),
                ],
                "known": known,
            }
        )
    return records
