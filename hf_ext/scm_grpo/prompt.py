"""``SCMPromptBuilder``: claim + evidence -> a prompt that states SCM-GRPO's output contract."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from hf_ext._registry import paper
from hf_ext._validation import check_bool
from hf_ext.scm_grpo.core import resolve_label_set

INSTRUCTION = (
    "Verify the claim against the evidence. First build a dependency graph from the evidence to the claim "
    "inside <graph></graph>: one line 'E<i>: <atomic fact from the evidence>' per fact you use, one line "
    "'C: <the claim>', then one line 'X -> Y' per dependency, ending at C. Use only the facts you need. "
    "Then give the verdict inside <answer></answer>, one of: {labels}."
)


class SCMPromptBuilder:
    """Builds the SCM-GRPO prompt of one example; the output contract is [reconstructed].

    Args:
        label_set: ``"hover"``, ``"exfever"`` or a collection of labels (listed in the instruction).
        claim_key: Column of the claim text.
        evidence_key: Column of the evidence: a list of sentences or one string.
        conversational: Emit ``[{"role": "user", "content": ...}]`` (plus an optional system message)
            instead of a plain string.
        system: Optional system message (conversational only) or preamble (plain).
        instruction: The instruction template; ``{labels}`` is filled with the label set.

    Example:
        >>> b = SCMPromptBuilder()
        >>> print(b.build("A is in C.", ["A is in B.", "B is in C."]).splitlines()[-4:])
        ['Claim: A is in C.', 'Evidence:', '1. A is in B.', '2. B is in C.']
    """

    _paper = paper("scm_grpo")

    def __init__(
        self,
        label_set: str | Collection[str] = "hover",
        *,
        claim_key: str = "claim",
        evidence_key: str = "evidence",
        conversational: bool = False,
        system: str | None = None,
        instruction: str = INSTRUCTION,
    ) -> None:
        self.labels = resolve_label_set(label_set)
        self.claim_key, self.evidence_key = claim_key, evidence_key
        self.conversational = check_bool("conversational", conversational)
        self.system = system
        if "{labels}" not in instruction:
            raise ValueError(f"`instruction` must contain '{{labels}}', got {instruction!r}.")
        self.instruction = instruction

    def build(self, claim: str, evidence: str | list[str]) -> str:
        """The user text: instruction, claim and numbered evidence."""
        if not isinstance(claim, str) or not claim.strip():
            raise ValueError(f"`{self.claim_key}` must be a non-empty string, got {claim!r}.")
        sentences = [evidence] if isinstance(evidence, str) else list(evidence)
        if not all(isinstance(s, str) for s in sentences):
            raise ValueError(
                f"`{self.evidence_key}` must be a string or a list of strings, got {evidence!r}."
            )
        lines = [self.instruction.format(labels=", ".join(self.labels)), "", f"Claim: {claim}", "Evidence:"]
        lines += [f"{i}. {s}" for i, s in enumerate(sentences, 1)]
        return "\n".join(lines)

    def __call__(self, example: dict[str, Any]) -> dict[str, Any]:
        """``{"prompt": ...}`` for one dataset row (the ``datasets.Dataset.map`` form)."""
        for key in (self.claim_key, self.evidence_key):
            if key not in example:
                raise KeyError(f"column `{key}` is missing; columns seen: {sorted(example)}.")
        text = self.build(example[self.claim_key], example[self.evidence_key])
        if not self.conversational:
            return {"prompt": f"{self.system}\n\n{text}" if self.system else text}
        messages = [{"role": "system", "content": self.system}] if self.system else []
        return {"prompt": [*messages, {"role": "user", "content": text}]}

    def as_map_fn(self) -> SCMPromptBuilder:
        """The builder itself (picklable), for ``dataset.map(builder.as_map_fn())``."""
        return self
