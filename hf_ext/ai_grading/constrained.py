"""Constrained JSON grades: a local LM can only write a valid compact grade, with points from the allowed set.

A reply to a :class:`~hf_ext.ai_grading.Question` is fixed text with one free slot per rubric item::

    {"question_id": "q1", "items": [{"id": "a", "points": <v_a>}, {"id": "b", "points": <v_b>}],
     "total": <sum>}

where each ``v`` is a multiple of ``points_step`` between 0 and the item's points, written with a fixed
number of decimals (``"0.0"``, ``"0.5"``, ``"1.0"``: no value is a prefix of another) and ``total`` is their
sum. :class:`GradeGrammar` holds the token ids of every fixed piece and a token trie of each slot's values;
:class:`GradeLogitsProcessor` keeps ``model.generate`` inside the grammar, and :func:`decode_grade` walks it
directly: one forward pass per slot (the fixed text between slots is fed in the same pass), which also gives
the model's probability of every allowed value. All of this is [reconstructed]: the paper's graders are API
models with a JSON prompt.
"""

from __future__ import annotations

import copy
import inspect
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from hf_ext._registry import paper
from hf_ext._validation import check_float
from hf_ext.ai_grading.core import Question

DECODINGS = ("constrained", "expected")


def _decimals(step: float) -> int:
    for d in range(7):
        if abs(round(step, d) - step) < 1e-9:
            return max(1, d)
    raise ValueError(f"`points_step` must have at most 6 decimals, got {step!r}.")


def compact_reply(
    question_id: str, points: Mapping[str, float], *, decimals: int = 1, confidence: float | None = None
) -> str:
    """The compact grade JSON of the grammar: items in ``points`` order, ``total`` = their sum."""
    items = ", ".join(f'{{"id": {json.dumps(k)}, "points": {v:.{decimals}f}}}' for k, v in points.items())
    total = sum(points.values())
    text = f'{{"question_id": {json.dumps(question_id)}, "items": [{items}], "total": {total:.{decimals}f}'
    if confidence is not None:
        text += f', "confidence": {confidence:.4f}'
    return text + "}"


@dataclass
class _Node:
    children: dict[int, _Node] = field(default_factory=dict)
    value: float | None = None  # set on leaves


def _trie(values: Sequence[float], tokens: Sequence[list[int]]) -> _Node:
    root = _Node()
    for v, ids in zip(values, tokens):
        node = root
        for t in ids:
            if node.value is not None:
                raise ValueError(f"the tokens of points {v} extend those of points {node.value}.")
            node = node.children.setdefault(t, _Node())
        if node.children or node.value is not None:
            raise ValueError(f"the tokens of points {v} are a prefix of another value's tokens.")
        node.value = v
    return root


class GradeGrammar:
    """Every valid compact reply to ``question``, tokenized by ``tokenizer``.

    Args:
        question: The question being graded; its rubric items give the slots.
        tokenizer: A transformers tokenizer; every piece must decode back to its text.
        points_step: Allowed points are the multiples of this up to each item's points, defaults to 0.5.
        prefix: Text the reply already starts with (a JSON prefill); it must open the grammar's text.

    Raises:
        ValueError: ``points_step`` is not positive or does not divide an item's points; ``prefix`` does not
            open the reply; the tokenizer cannot represent a piece (it does not decode back).

    Example:
        >>> from hf_ext.ai_grading import Question, RubricItem
        >>> q = Question("q1", "d/dx x^2", (RubricItem("rule", 1, "power rule"),))
        >>> compact_reply("q1", {"rule": 1.0})
        '{"question_id": "q1", "items": [{"id": "rule", "points": 1.0}], "total": 1.0}'
    """

    _paper = paper("ai_grading")

    def __init__(
        self, question: Question, tokenizer: Any, *, points_step: float = 0.5, prefix: str = ""
    ) -> None:
        step = check_float("points_step", points_step, low=0, low_open=True)
        self.question, self.tokenizer, self.step = question, tokenizer, step
        self.decimals = _decimals(step)
        self.values: list[tuple[float, ...]] = []
        for item in question.rubric:
            n = item.points / step
            if abs(n - round(n)) > 1e-6:
                raise ValueError(
                    f"`points_step` {step:g} must divide the points of every rubric item; item {item.id!r} "
                    f"has {item.points:g}."
                )
            self.values.append(tuple(k * step for k in range(round(n) + 1)))
        ids = [item.id for item in question.rubric]
        head = (
            f'{{"question_id": {json.dumps(question.id)}, "items": [{{"id": {json.dumps(ids[0])}, "points": '
        )
        if not isinstance(prefix, str) or not head.startswith(prefix):
            raise ValueError(f"`prefix` must open the reply {head!r}, got {prefix!r}.")
        self.prefix = prefix
        pieces = [head[len(prefix) :]] + [f'}}, {{"id": {json.dumps(i)}, "points": ' for i in ids[1:]]
        self.fixed = [self._encode(p) for p in pieces]
        self.tries = [_trie(vs, [self._encode(self.format(v)) for v in vs]) for vs in self.values]

    def _encode(self, text: str) -> list[int]:
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []
        back = self.tokenizer.decode(ids)
        if back != text:
            raise ValueError(
                f"`tokenizer` cannot represent the grade text {text!r} (it decodes back to {back!r})."
            )
        return ids

    def format(self, value: float) -> str:
        return f"{value:.{self.decimals}f}"

    def render(self, points: Sequence[float], confidence: float | None = None) -> str:
        """The reply text (after ``prefix``) for slot values ``points``, in rubric order."""
        ids = [item.id for item in self.question.rubric]
        text = compact_reply(
            self.question.id, dict(zip(ids, points)), decimals=self.decimals, confidence=confidence
        )
        return text[len(self.prefix) :]

    def tail(self, points: Sequence[float]) -> list[int]:
        """Token ids after the last slot: ``}], "total": <sum>}``."""
        return self._encode(f'}}], "total": {self.format(sum(points))}}}')

    def allowed(self, generated: Sequence[int]) -> list[int]:
        """Token ids allowed after ``generated`` (the reply's ids so far); ``[]`` once the reply is complete.

        Raises:
            ValueError: ``generated`` has left the grammar.
        """
        pos, chosen = 0, []

        def follow(expected: list[int]) -> list[int] | None:
            nonlocal pos
            for t in expected:
                if pos == len(generated):
                    return [t]
                if generated[pos] != t:
                    raise ValueError(
                        f"`generated` left the grammar at token {pos}: {generated[pos]} is not {t}."
                    )
                pos += 1
            return None

        for fixed, root in zip(self.fixed, self.tries):
            nxt = follow(fixed)
            if nxt is not None:
                return nxt
            node = root
            while node.value is None:
                if pos == len(generated):
                    return sorted(node.children)
                if generated[pos] not in node.children:
                    raise ValueError(
                        f"`generated` left the grammar at token {pos}: {generated[pos]} is no points."
                    )
                node = node.children[generated[pos]]
                pos += 1
            chosen.append(node.value)
        return follow(self.tail(chosen)) or []


class GradeLogitsProcessor:
    """A transformers ``LogitsProcessor`` that keeps ``generate`` inside a :class:`GradeGrammar`.

    Args:
        grammar: The grammar of the reply.
        prompt_length: Number of prompt tokens in ``input_ids`` (the reply starts after them).
        eos_token_id: Forced once the reply is complete, so generation stops.

    Scores outside the grammar become ``-inf``; each row of the batch is constrained on its own.

    Example:
        >>> keep = GradeLogitsProcessor(grammar, ids.shape[1], tok.eos_token_id)
        >>> out = model.generate(ids, logits_processor=[keep], do_sample=False)  # doctest: +SKIP
    """

    _paper = paper("ai_grading")

    def __init__(self, grammar: GradeGrammar, prompt_length: int, eos_token_id: int) -> None:
        if not isinstance(grammar, GradeGrammar):
            raise TypeError(f"`grammar` must be a GradeGrammar, got {type(grammar).__name__}.")
        if isinstance(prompt_length, bool) or not isinstance(prompt_length, int) or prompt_length < 0:
            raise ValueError(f"`prompt_length` must be an int >= 0, got {prompt_length!r}.")
        if isinstance(eos_token_id, bool) or not isinstance(eos_token_id, int) or eos_token_id < 0:
            raise ValueError(f"`eos_token_id` must be a token id (int >= 0), got {eos_token_id!r}.")
        self.grammar, self.prompt_length, self.eos_token_id = grammar, prompt_length, eos_token_id

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """``input_ids`` ``[B, T]`` (prompt + reply so far), ``scores`` ``[B, V]`` -> masked ``[B, V]``."""
        import torch

        mask = torch.full_like(scores, -math.inf)
        for row in range(input_ids.shape[0]):
            allowed = self.grammar.allowed(input_ids[row, self.prompt_length :].tolist()) or [
                self.eos_token_id
            ]
            mask[row, allowed] = 0.0
        return scores + mask


@dataclass(frozen=True)
class GradeDecoding:
    """The outcome of :func:`decode_grade`: per slot, the allowed ``values``, the model's ``probs`` of them
    (renormalised over the allowed set), and the ``chosen`` value (the next slots are conditioned on it)."""

    _paper: ClassVar[dict[str, object]] = paper("ai_grading")

    grammar: GradeGrammar
    values: list[tuple[float, ...]]
    probs: list[tuple[float, ...]]
    chosen: list[float]

    @property
    def expected(self) -> list[float]:
        """Per slot, the probability-weighted mean of the allowed points."""
        return [sum(v * p for v, p in zip(vs, ps)) for vs, ps in zip(self.values, self.probs)]

    @property
    def confidence(self) -> float:
        """The smallest probability of a chosen value over the slots."""
        return min(ps[vs.index(c)] for vs, ps, c in zip(self.values, self.probs, self.chosen))

    def text(self, decoding: str = "constrained") -> str:
        """The reply after the prefix: the ``chosen`` points (``"constrained"``) or the ``"expected"`` points
        (not rounded to the allowed set), with ``confidence`` = :attr:`confidence`."""
        if decoding not in DECODINGS:
            raise ValueError(f"`decoding` must be one of {DECODINGS}, got {decoding!r}.")
        points = self.chosen if decoding == "constrained" else self.expected
        if decoding == "expected":
            points = [float(f"{p:.4f}") for p in points]
            ids = [item.id for item in self.grammar.question.rubric]
            text = json.dumps(
                {
                    "question_id": self.grammar.question.id,
                    "items": [{"id": i, "points": p} for i, p in zip(ids, points)],
                    "total": round(sum(points), 4),
                    "confidence": round(self.confidence, 4),
                }
            )
            return text[len(self.grammar.prefix) :] if text.startswith(self.grammar.prefix) else text
        return self.grammar.render(points, confidence=self.confidence)


class _Forward:
    """``model`` on a growing token sequence with a KV cache: last-position logits ``[V]`` per call."""

    def __init__(self, model: Any) -> None:
        self.model = model
        params = inspect.signature(model.forward).parameters
        self.keep = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
        self.cache_arg = "cache" if "cache" in params else "past_key_values"  # renamed in transformers 5.x

    def __call__(self, ids: Sequence[int], cache: Any) -> tuple[Any, Any]:
        import torch

        x = torch.tensor([list(ids)], dtype=torch.long, device=self.model.device)
        out = self.model(input_ids=x, use_cache=True, **{self.cache_arg: cache}, **self.keep)
        return out.logits[0, -1].float(), out[self.cache_arg]


def prefix_state(model: Any, ids: Sequence[int]) -> tuple[Any, Any]:
    """``(last-position logits [V], KV cache)`` after running ``ids`` through ``model``: the
    ``prompt_state`` that :func:`decode_grade` continues from (e.g. a prompt prefix many answers share)."""
    import torch

    with torch.no_grad():
        return _Forward(model)(ids, None)


def _leaves(node: _Node, logits: Any, cache: Any, forward: _Forward) -> dict[float, tuple[float, list[int]]]:
    """``value -> (probability, tokens from node)`` over the leaves under ``node`` (``logits`` at ``node``).
    Forced tokens have probability 1; the cache at ``node`` is never modified (deeper passes use copies)."""
    out: dict[float, tuple[float, list[int]]] = {}
    toks = sorted(node.children)
    logp = logits[toks].log_softmax(-1)
    for t, lp in zip(toks, logp.tolist()):
        path, child = [t], node.children[t]
        while child.value is None and len(child.children) == 1:
            (nxt,) = child.children
            path.append(nxt)
            child = child.children[nxt]
        if child.value is not None:
            out[child.value] = (math.exp(lp), path)
            continue
        sub_logits, sub_cache = forward(path, copy.deepcopy(cache))
        for v, (p, rest) in _leaves(child, sub_logits, sub_cache, forward).items():
            out[v] = (math.exp(lp) * p, path + rest)
    return out


def decode_grade(
    model: Any,
    grammar: GradeGrammar,
    prompt_ids: Sequence[int],
    *,
    temperature: float = 0.0,
    seed: int = 0,
    prompt_state: tuple[Any, Any] | None = None,
) -> GradeDecoding:
    """Walk ``grammar`` with ``model``: one forward pass per rubric item.

    At each slot the model's next-token distribution, restricted to the grammar, gives a probability to
    every allowed value (the product over the value's tokens; forced tokens count 1). Temperature 0 takes
    the most probable value (greedy constrained decoding: the reply of ``generate`` with
    :class:`GradeLogitsProcessor` when the values differ in their first token, e.g. whole points; otherwise
    the most probable *value*, which token-by-token greedy decoding can miss); a temperature ``T > 0``
    samples a value with weight ``p ** (1 / T)``.

    Args:
        model: A causal LM returning ``.logits`` ``[1, T, V]`` and its KV cache.
        grammar: The reply's grammar.
        prompt_ids: The prompt's token ids (ending with the grammar's ``prefix``), or with ``prompt_state``
            the ones after the tokens already run.
        temperature: 0 for greedy, else the sampling temperature.
        seed: Seed of the sampling.
        prompt_state: ``(last-position logits [V], cache)`` of tokens the caller already ran (a shared
            prompt prefix).
    """
    import torch

    temperature = check_float("temperature", temperature, low=0)
    forward = _Forward(model)
    gen = torch.Generator().manual_seed(int(seed))
    pending = list(prompt_ids)
    logits, cache = prompt_state if prompt_state is not None else (None, None)
    probs, chosen = [], []
    with torch.no_grad():
        for slot, (fixed, root) in enumerate(zip(grammar.fixed, grammar.tries)):
            pending += fixed
            if pending or logits is None:
                logits, cache = forward(pending, cache)
            leaves = _leaves(root, logits, cache, forward)
            vals = grammar.values[slot]
            p = [leaves[v][0] for v in vals]
            z = sum(p)
            p = [x / z for x in p]
            if temperature == 0:
                pick = max(range(len(vals)), key=lambda i: (p[i], -i))
            else:
                w = torch.tensor([x ** (1 / temperature) for x in p], dtype=torch.float64)
                pick = int(torch.multinomial(w / w.sum(), 1, generator=gen))
            probs.append(tuple(p))
            chosen.append(vals[pick])
            pending = list(leaves[vals[pick]][1])
            logits = None
    return GradeDecoding(grammar, list(grammar.values), probs, chosen)
