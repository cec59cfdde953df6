"""Grader backends: ``(messages, *, seed, temperature) -> str``, one call per run.

:class:`TransformersBackend` runs any transformers causal LM (or the model of a ``text-generation``
pipeline) locally; :class:`OpenAICompatibleBackend` posts to an OpenAI-compatible ``/chat/completions``
URL (vLLM, TGI, llama.cpp server or a hosted API); :class:`CallableBackend` wraps a function. A stronger
grader is a one-line swap of the backend. When the last message is an assistant turn, the backend
continues it and the reply includes that opening. A backend whose ``__call__`` takes a keyword ``question``
gets the :class:`~hf_ext.ai_grading.Question` being graded (for constrained decoding).
"""

from __future__ import annotations

import copy
import json
import logging
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from hf_ext._registry import paper
from hf_ext._validation import check_bool, check_choice, check_float, check_int

logger = logging.getLogger(__name__)
Messages = Sequence[dict[str, str]]


class GraderBackend(Protocol):
    def __call__(self, messages: Messages, *, seed: int, temperature: float) -> str: ...


DECODINGS = ("free", "constrained", "expected")
MIN_SHARED = 16  # tokens: a shorter shared prompt prefix is not worth keeping


def _prefix(messages: Messages) -> str:
    return messages[-1]["content"] if messages and messages[-1]["role"] == "assistant" else ""


def plain_layout(messages: Messages) -> str:
    """The fallback prompt for a tokenizer without a chat template: ``System:/User:/Assistant:`` blocks."""
    names = {"system": "System", "user": "User", "assistant": "Assistant"}
    blocks = [f"{names.get(m['role'], m['role'])}: {m['content']}" for m in messages]
    if not _prefix(messages):
        blocks.append("Assistant:")
    return "\n\n".join(blocks)


def json_complete(text: str) -> bool:
    """Whether ``text`` holds a complete JSON object (its first ``{`` closed, strings respected)."""
    depth, in_string, escaped = 0, False, False
    for ch in text[text.find("{") :] if "{" in text else "":
        if in_string:
            escaped, in_string = (not escaped and ch == "\\"), in_string and (escaped or ch != '"')
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return True
    return False


class TransformersBackend:
    """A local transformers causal LM as a grader backend.

    Args:
        model: A ``PreTrainedModel`` with ``generate``, or a transformers ``text-generation`` pipeline
            (its model and tokenizer are used).
        tokenizer: The model's tokenizer (taken from the pipeline when ``model`` is one).
        max_new_tokens: Reply length cap, defaults to 256.
        stop_at_json: Stop generating once the reply holds a complete JSON object, defaults to True.
        decoding: ``"free"`` (``model.generate``, the default), ``"constrained"`` (the reply can only be a
            valid compact grade with points from the allowed set: :class:`~hf_ext.ai_grading.GradeGrammar`,
            walked by :func:`~hf_ext.ai_grading.decode_grade`) or ``"expected"`` (the same pass, each item's
            points = the model's probability-weighted mean over the allowed points). Constrained replies
            carry ``confidence`` = the smallest probability of a chosen value; they need the ``question``
            keyword, which :class:`~hf_ext.ai_grading.RubricGrader` passes.
        points_step: Allowed points of constrained decoding: multiples of this, defaults to 0.5.
        **generate_kwargs: Passed to ``model.generate``.

    A tokenizer without a chat template (e.g. Gemma-3-270M base) gets :func:`plain_layout`, with one warning.
    Constrained decoding keeps the model state after the longest prompt prefix shared with the previous call
    (the system prompt and few-shot examples), so that prefix runs once.

    Example:
        >>> backend = TransformersBackend.from_pretrained("Qwen/Qwen2.5-1.5B-Instruct")  # doctest: +SKIP
    """

    _paper = paper("ai_grading")

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        max_new_tokens: int = 256,
        stop_at_json: bool = True,
        decoding: str = "free",
        points_step: float = 0.5,
        **generate_kwargs: Any,
    ) -> None:
        if tokenizer is None and hasattr(model, "tokenizer") and hasattr(model, "model"):
            model, tokenizer = model.model, model.tokenizer
        if tokenizer is None:
            raise ValueError(
                "`tokenizer` must be given unless `model` is a text-generation pipeline, got None."
            )
        self.model, self.tokenizer = model, tokenizer
        self.max_new_tokens = check_int("max_new_tokens", max_new_tokens, low=1)
        self.stop_at_json = check_bool("stop_at_json", stop_at_json)
        self.decoding = check_choice("decoding", decoding, DECODINGS)
        self.points_step = check_float("points_step", points_step, low=0, low_open=True)
        self.generate_kwargs = generate_kwargs
        self.last_decoding: Any = None
        self._warned = False
        self._last_ids: list[int] = []
        self._shared: tuple[list[int], Any, Any] | None = None

    @classmethod
    def from_pretrained(cls, name_or_path: str, **kwargs: Any) -> TransformersBackend:
        """Load ``AutoModelForCausalLM`` and ``AutoTokenizer`` from a hub id or folder."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(name_or_path).eval()
        return cls(model, AutoTokenizer.from_pretrained(name_or_path), **kwargs)

    def render(self, messages: Messages) -> str:
        """The prompt string the model sees."""
        if getattr(self.tokenizer, "chat_template", None):
            cont = bool(_prefix(messages))
            return str(
                self.tokenizer.apply_chat_template(
                    list(messages),
                    tokenize=False,
                    add_generation_prompt=not cont,
                    continue_final_message=cont,
                )
            )
        if not self._warned:
            logger.warning("tokenizer has no chat template; using the plain System/User/Assistant layout")
            self._warned = True
        return plain_layout(messages)

    def _json_stop(self, start: int, prefix: str) -> Any:
        import torch
        from transformers import StoppingCriteria

        tokenizer = self.tokenizer

        class _JSONEnd(StoppingCriteria):  # type: ignore[misc]
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                done = [
                    json_complete(prefix + tokenizer.decode(row[start:], skip_special_tokens=True))
                    for row in input_ids
                ]
                return torch.tensor(done, dtype=torch.bool, device=input_ids.device)

        return _JSONEnd()

    def _prompt_state(self, ids: list[int]) -> tuple[list[int], Any]:
        """``(ids still to run, (logits, cache) after the shared prefix, or None)``.

        The shared prefix is set from the first two prompts' common start and only ever shortened, to the
        part a later prompt shares, so it converges on the system prompt and the few-shot examples."""
        from hf_ext.ai_grading.constrained import prefix_state

        def common(a: list[int], b: list[int]) -> int:
            n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            return min(n, len(ids) - 1)  # one token is always left to run

        shared, last, self._last_ids = self._shared, self._last_ids, ids
        n = -1
        if shared is not None and ids[: len(shared[0])] != shared[0]:
            n = common(ids, shared[0])
        elif shared is None:
            n = common(ids, last)
        if n >= 0:
            self._shared = shared = None
            if n >= MIN_SHARED:
                logits, cache = prefix_state(self.model, ids[:n])
                self._shared = shared = (ids[:n], logits, cache)
        if shared is None:
            return ids, None
        return ids[len(shared[0]) :], (shared[1], copy.deepcopy(shared[2]))

    def _constrained(
        self, prompt: str, messages: Messages, question: Any, seed: int, temperature: float
    ) -> str:
        from hf_ext.ai_grading.constrained import GradeGrammar, decode_grade

        if question is None:
            raise ValueError(
                f"`question` must be given with decoding={self.decoding!r} (RubricGrader passes it), "
                "got None."
            )
        grammar = GradeGrammar(
            question, self.tokenizer, points_step=self.points_step, prefix=_prefix(messages)
        )
        ids = self.tokenizer(prompt, add_special_tokens=not self.tokenizer.chat_template)["input_ids"]
        rest, state = self._prompt_state(list(ids))
        result = decode_grade(
            self.model, grammar, rest, temperature=temperature, seed=seed, prompt_state=state
        )
        self.last_decoding = result
        return _prefix(messages) + result.text(
            "constrained" if self.decoding == "constrained" else "expected"
        )

    def __call__(self, messages: Messages, *, seed: int, temperature: float, question: Any = None) -> str:
        import torch

        prompt = self.render(messages)
        if self.decoding != "free":
            return self._constrained(prompt, messages, question, seed, temperature)
        enc = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=not self.tokenizer.chat_template)
        enc = {k: v.to(self.model.device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}
        sample = temperature > 0
        kwargs: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "do_sample": sample}
        if sample:
            kwargs["temperature"] = temperature
        pad = self.tokenizer.pad_token_id
        kwargs["pad_token_id"] = pad if pad is not None else self.tokenizer.eos_token_id
        start = enc["input_ids"].shape[1]
        if self.stop_at_json:
            kwargs["stopping_criteria"] = [self._json_stop(start, _prefix(messages))]
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(seed)
            out = self.model.generate(**enc, **{**kwargs, **self.generate_kwargs})
        new = out[0, start:]
        return _prefix(messages) + str(self.tokenizer.decode(new, skip_special_tokens=True))


class OpenAICompatibleBackend:
    """POST ``{"model", "messages", "temperature", "seed", "max_tokens"}`` to ``<url>/chat/completions``.

    Args:
        url: Base URL, e.g. ``"http://localhost:8000/v1"``.
        model: Model name sent in the request.
        api_key: Sent as ``Authorization: Bearer <api_key>`` when given.
        timeout: Seconds per request, defaults to 60.
        max_tokens: Reply length cap, defaults to 256.
        opener: ``urllib``-style ``opener(request, timeout=...)`` (tests pass a stub), defaults to
            ``urllib.request.urlopen``.
    """

    _paper = paper("ai_grading")

    def __init__(
        self,
        url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_tokens: int = 256,
        opener: Callable[..., Any] | None = None,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"`url` must be an http(s) URL, got {url!r}.")
        self.url = url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key
        self.timeout = check_float("timeout", timeout, low=0, low_open=True)
        self.max_tokens = check_int("max_tokens", max_tokens, low=1)
        self.opener = opener or urllib.request.urlopen

    def __call__(self, messages: Messages, *, seed: int, temperature: float) -> str:
        body = {
            "model": self.model,
            "messages": list(messages),
            "temperature": temperature,
            "seed": seed,
            "max_tokens": self.max_tokens,
        }
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, json.dumps(body).encode(), headers, method="POST")
        with self.opener(request, timeout=self.timeout) as response:
            payload = json.loads(response.read().decode())
        try:
            content = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise ValueError(f"{self.url} returned no choices[0].message.content: {payload!r:.200}") from None
        prefix = _prefix(messages)
        return content if content.startswith(prefix) else prefix + content


class CallableBackend:
    """Wrap ``fn(messages, seed=..., temperature=...) -> str`` (an API client, a scripted test double)."""

    _paper = paper("ai_grading")

    def __init__(self, fn: Callable[..., str]) -> None:
        if not callable(fn):
            raise TypeError(f"`fn` must be callable, got {type(fn).__name__}.")
        self.fn = fn

    def __call__(self, messages: Messages, *, seed: int, temperature: float) -> str:
        return self.fn(messages, seed=seed, temperature=temperature)
