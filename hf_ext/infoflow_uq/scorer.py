"""``InformationFlowScorer``: trace context-token contributions through a transformers causal LM with hooks.

One forward pass in eager attention records, per decoder layer, the attention rows of the answer positions
(a forward hook on each ``self_attn``, whose eager output carries the probabilities) and the value vectors
(a forward hook on ``self_attn.v_proj``), reduces them at once to the contribution rows of
:mod:`hf_ext.infoflow_uq.core`, and keeps only ``[L, A, T]`` per rule rather than the
``[L, H, T, T]`` attention maps. Works on Llama, Qwen2 and Gemma3 (``model.model.layers[i].self_attn`` with
``v_proj`` and ``o_proj``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from hf_ext._registry import paper
from hf_ext._validation import check_choice
from hf_ext.infoflow_uq import core
from hf_ext.infoflow_uq.config import (
    CONCENTRATIONS,
    SIMULATABILITIES,
    InformationFlowConfig,
)

logger = logging.getLogger(__name__)
ALTERNATIVES = 10  # next-token alternatives kept per example for claim-conditioned probabilities


@dataclass
class FlowTrace:
    """The information flow of one example into its answer positions.

    Attributes:
        traces: Rule -> ``[L, n_ctx]`` contribution trace, each row on the simplex over the context tokens
            (NaN rows: layers that put no mass on the context).
        context_mass: Rule -> ``[L]``, the share of each layer's raw row that fell on the context before
            renormalising (the rest went to BOS, the prompt and the question).
        raw: Rule -> ``[L, T]`` raw contribution rows over the example's unpadded tokens.
        attention: ``[L, T]`` head-mean attention rows (answer positions averaged), for attention baselines.
        context_mask: ``[T]`` bool, the context tokens among the unpadded ones.
        layers: 0-based decoder layers of the rows.
        max_probability: Probability of the greedy token at the first answer position.
        entropy: Entropy (nats) of the next-token distribution at the first answer position.
        predicted_token: Greedy token id at the first answer position.
        top_probabilities: ``[K]`` probabilities of the ``K`` (10) most likely next tokens at the first answer
            position, descending (the alternatives of a claim-conditioned probability).
        top_tokens: ``[K]`` their token ids.
        config: The scorer's settings (default rule and score kinds).
    """

    _paper = paper("infoflow_uq")

    traces: dict[str, Tensor]
    context_mass: dict[str, Tensor]
    raw: dict[str, Tensor]
    attention: Tensor
    context_mask: Tensor
    layers: tuple[int, ...]
    max_probability: float
    entropy: float
    predicted_token: int
    top_probabilities: Tensor
    top_tokens: Tensor
    config: InformationFlowConfig = field(repr=False)

    def _rule(self, contribution: str | None) -> str:
        rule = contribution or self.config.contributions[0]
        if rule not in self.traces:
            raise ValueError(
                f"`contribution` must be one of the recorded rules {tuple(self.traces)}, got {rule!r}. "
                "Record it with InformationFlowScorer(model, contribution=(...))."
            )
        return rule

    @property
    def trace(self) -> Tensor:
        """The default rule's ``[L, n_ctx]`` trace."""
        return self.traces[self._rule(None)]

    def concentration(
        self, kind: str | None = None, contribution: str | None = None, context_mass: bool = False
    ) -> float:
        """:func:`~hf_ext.infoflow_uq.core.flow_concentration` of a recorded trace; with ``context_mass``
        each layer is weighted by its share on the context before renormalising."""
        kind = check_choice("concentration", kind or self.config.concentration, CONCENTRATIONS)
        rule = self._rule(contribution)
        mass = self.context_mass[rule] if context_mass else None
        return float(core.flow_concentration(self.traces[rule], kind, self.config.top_k, mass))

    def simulatability(
        self,
        relevance: Any,
        kind: str | None = None,
        contribution: str | None = None,
        context_mass: bool = False,
    ) -> float:
        """:func:`~hf_ext.infoflow_uq.core.flow_simulatability` against ``relevance`` [n_ctx]; with
        ``context_mass`` each layer is weighted by its share on the context before renormalising."""
        kind = check_choice("simulatability", kind or self.config.simulatability, SIMULATABILITIES)
        rule = self._rule(contribution)
        r = torch.as_tensor(relevance, dtype=self.traces[rule].dtype)
        mass = self.context_mass[rule] if context_mass else None
        return float(core.flow_simulatability(self.traces[rule], r, kind, mass))

    def claim_conditioned_probability(self, tokenizer: Any) -> float:
        """LM-Polygraph-style claim-conditioned probability of the first answer token (label-free
        baseline): :func:`~hf_ext.infoflow_uq.core.claim_conditioned_probability` over the recorded
        alternatives, their equivalence decided from the words ``tokenizer`` decodes them to."""
        words = [tokenizer.decode([int(t)]) for t in self.top_tokens]
        labels = core.alternative_equivalence(words)
        return float(core.claim_conditioned_probability(self.top_probabilities.double(), labels))

    def attention_mass(self, relevance: Any = None) -> float:
        """Layer- and head-mean raw attention mass on the context (label-free, Lookback-Lens style), or with
        ``relevance`` ``[n_ctx]`` the mass weighted by it (the gold span's share for binary labels)."""
        ctx = self.attention[:, self.context_mask]
        if relevance is None:
            return float(ctx.sum(dim=-1).mean())
        r = core.check_relevance(torch.as_tensor(relevance, dtype=ctx.dtype), ctx.shape[-1])
        return float((ctx @ r).mean())


def _decoder_layers(model: Any) -> Sequence[Any]:
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None or not all(hasattr(getattr(layer, "self_attn", None), "v_proj") for layer in layers):
        raise NotImplementedError(
            f"{type(model).__name__} is not supported: InformationFlowScorer needs "
            "`model.model.layers[i].self_attn.{v_proj,o_proj}` (Llama, Qwen2, Gemma3 causal LMs)."
        )
    return list(layers)


def _check_eager(model: Any) -> None:
    impl = getattr(model.config, "_attn_implementation", None)
    if impl != "eager":
        raise ValueError(
            f'InformationFlowScorer needs attn_implementation="eager" (attention weights), got {impl!r}. '
            'Load with from_pretrained(..., attn_implementation="eager") or call '
            'model.set_attn_implementation("eager").'
        )


class InformationFlowScorer:
    """Layer-wise information-flow tracer and confidence scores for a transformers causal LM.

    Args:
        model: A ``LlamaForCausalLM``, ``Qwen2ForCausalLM`` or ``Gemma3ForCausalLM`` (or another model with
            ``model.model.layers[i].self_attn.{v_proj,o_proj}``) in eager attention.
        config: :class:`~hf_ext.infoflow_uq.InformationFlowConfig`, *optional*; keyword
            arguments override its fields.

    Raises:
        ValueError: the model does not run eager attention (sdpa and flash attention return no weights,
            silently).
        NotImplementedError: the model has no ``model.model.layers[i].self_attn.v_proj``.

    Example:
        >>> from hf_ext.testing import tiny_llama
        >>> model = tiny_llama(attn_implementation="eager")
        >>> scorer = InformationFlowScorer(model)
        >>> ids = torch.tensor([1, 5, 6, 7, 8, 9])
        >>> ctx = torch.tensor([False, True, True, True, False, False])
        >>> res = scorer.trace(ids, ctx, answer_positions=[5])
        >>> res.trace.shape
        torch.Size([2, 3])
        >>> 0.0 <= res.concentration() <= 1.0
        True
    """

    _paper = paper("infoflow_uq")

    def __init__(self, model: Any, config: InformationFlowConfig | None = None, **kwargs: Any) -> None:
        if config is None:
            config = InformationFlowConfig(**kwargs)
        elif kwargs:
            from dataclasses import asdict

            config = InformationFlowConfig(**{**asdict(config), **kwargs})
        _check_eager(model)
        self.model, self.config = model, config
        self._layers = _decoder_layers(model)
        self.layers = tuple(sorted(set(config.layer_indices(len(self._layers)))))
        self.num_heads = int(model.config.num_attention_heads)

    def trace(
        self,
        input_ids: Any,
        context_mask: Any,
        answer_positions: Any,
        attention_mask: Any = None,
    ) -> FlowTrace:
        """Trace one example.

        Args:
            input_ids: ``[T]`` or ``[1, T]`` token ids: prefix, context, question, answer cue (and the
                answer tokens generated so far).
            context_mask: ``[T]`` bool, True at the context tokens (build it from token offsets).
            answer_positions: Positions whose next-token distribution produces an answer token: the last
                prompt position plus each generated answer token except the last.
            attention_mask: *optional* ``[T]`` 0/1 mask.

        Returns:
            The example's :class:`FlowTrace`.
        """
        ids = torch.as_tensor(input_ids)
        if ids.ndim == 1:
            ids = ids[None]
            context_mask = torch.as_tensor(context_mask)[None]
            if attention_mask is not None:
                attention_mask = torch.as_tensor(attention_mask)[None]
        if ids.ndim != 2 or ids.shape[0] != 1:
            raise ValueError(
                f"`input_ids` must be one example ([T] or [1, T]), got shape {tuple(ids.shape)}; "
                "use trace_batch for a batch."
            )
        return self.trace_batch(ids, context_mask, [answer_positions], attention_mask)[0]

    @torch.no_grad()
    def trace_batch(
        self,
        input_ids: Any,
        context_mask: Any,
        answer_positions: Sequence[Any],
        attention_mask: Any = None,
    ) -> list[FlowTrace]:
        """Trace a batch in one forward pass.

        Args:
            input_ids: ``[B, T]`` token ids, padded on either side.
            context_mask: ``[B, T]`` bool, True at each row's context tokens (never at padding).
            answer_positions: ``B`` sequences of positions (indices into ``T``).
            attention_mask: ``[B, T]`` 0/1, required when a row holds padding (``pad_token_id``).

        Returns:
            One :class:`FlowTrace` per row.
        """
        _check_eager(self.model)
        ids, ctx, mask, positions = self._check_inputs(
            input_ids, context_mask, answer_positions, attention_mask
        )
        keep = torch.unique(torch.cat(positions))
        index = [torch.searchsorted(keep, p) for p in positions]
        rows, logits = self._record(ids, mask, keep)
        out = []
        for b in range(ids.shape[0]):
            valid = mask[b].bool()
            sel = {rule: r[:, b, index[b]][..., valid] for rule, r in rows.items()}  # [L, A_b, T_b]
            traces, masses, raw = {}, {}, {}
            for rule in self.config.contributions:
                c, m = core.restrict_to_context(sel[rule], ctx[b][valid])
                traces[rule] = torch.nanmean(c, dim=1)
                masses[rule] = m.mean(dim=1)
                raw[rule] = sel[rule].mean(dim=1)
            first = logits[b, int(index[b][0])]
            top = first.float().softmax(dim=-1).topk(min(ALTERNATIVES, first.shape[-1]))
            out.append(
                FlowTrace(
                    traces=traces,
                    context_mass=masses,
                    raw=raw,
                    attention=sel["attention"].mean(dim=1),
                    context_mask=ctx[b][valid],
                    layers=self.layers,
                    max_probability=float(core.max_probability(first)),
                    entropy=float(core.predictive_entropy(first)),
                    predicted_token=int(first.argmax()),
                    top_probabilities=top.values,
                    top_tokens=top.indices,
                    config=self.config,
                )
            )
        return out

    def _check_inputs(
        self, input_ids: Any, context_mask: Any, answer_positions: Sequence[Any], attention_mask: Any
    ) -> tuple[Tensor, Tensor, Tensor, list[Tensor]]:
        ids = torch.as_tensor(input_ids)
        if ids.ndim != 2 or ids.dtype not in (torch.int64, torch.int32) or ids.shape[1] == 0:
            raise ValueError(f"`input_ids` must be a non-empty [B, T] int tensor, got {tuple(ids.shape)}.")
        batch, seq = ids.shape
        ctx = torch.as_tensor(context_mask)
        if tuple(ctx.shape) != (batch, seq):
            raise ValueError(
                f"`context_mask` must have the shape of `input_ids` {(batch, seq)}, got {tuple(ctx.shape)}."
            )
        ctx = ctx.bool()
        pad = getattr(self.model.config, "pad_token_id", None)
        if attention_mask is None:
            if batch > 1 and pad is not None and bool((ids == pad).any()):
                raise ValueError(
                    f"`attention_mask` is required: a batch of {batch} rows holds padding "
                    f"(pad_token_id={pad}). Pass the tokenizer's attention_mask."
                )
            mask = torch.ones_like(ids)
        else:
            mask = torch.as_tensor(attention_mask)
            if tuple(mask.shape) != (batch, seq):
                raise ValueError(
                    f"`attention_mask` must have the shape of `input_ids` {(batch, seq)}, "
                    f"got {tuple(mask.shape)}."
                )
        empty = [b for b in range(batch) if not bool((ctx[b] & mask[b].bool()).any())]
        if empty:
            raise ValueError(f"`context_mask` selects no (unpadded) token in row(s) {empty}.")
        if len(answer_positions) != batch:
            raise ValueError(
                f"`answer_positions` must hold one sequence per row ({batch}), got {len(answer_positions)}."
            )
        positions = []
        for b, p in enumerate(answer_positions):
            pos = torch.as_tensor(p, dtype=torch.long).reshape(-1)
            bad = pos[(pos < 0) | (pos >= seq)]
            if pos.numel() == 0 or bad.numel() or not bool(mask[b, pos].bool().all()):
                raise ValueError(
                    f"`answer_positions[{b}]` must be non-empty positions of unpadded tokens in [0, {seq}), "
                    f"got {pos.tolist()}."
                )
            positions.append(pos.to(ids.device))
        return ids, ctx.to(ids.device), mask.to(ids.device), positions

    def _record(self, ids: Tensor, mask: Tensor, keep: Tensor) -> tuple[dict[str, Tensor], Tensor]:
        """One hooked forward: rule -> ``[L, B, A, T]`` rows of the positions ``keep``, and their logits."""
        rules = set(self.config.contributions)
        selected = set(self.layers)
        values: dict[int, Tensor] = {}
        stacks: dict[str, list[Tensor]] = {rule: [] for rule in {*rules, "attention"}}
        state: dict[str, Tensor] = {}
        key_mask = mask.bool()

        def on_values(i: int) -> Any:
            def hook(module: Any, args: Any, output: Tensor) -> None:
                values[i] = output.detach()

            return hook

        def on_attention(i: int) -> Any:
            def hook(module: Any, args: Any, output: Any) -> None:
                weights = output[1] if isinstance(output, tuple) and len(output) > 1 else None
                if weights is None:
                    raise ValueError(
                        f"layer {i} returned no attention weights; the scorer needs "
                        'attn_implementation="eager".'
                    )
                weights = weights.detach().float()
                if "rollout" in rules:
                    prev = state.get("rollout")
                    if prev is None:
                        eye = torch.eye(weights.shape[-1], device=weights.device)
                        prev = eye.expand(weights.shape[0], -1, -1)
                    state["rollout"] = core.rollout_step(prev, weights, key_mask)
                if i not in selected:
                    return
                attn_rows = weights[:, :, keep, :]
                stacks["attention"].append(core.contribution_rows(attn_rows, "attention"))
                if "attention_value_norm" in rules:
                    norms = core.value_norms(
                        values.pop(i).float(), module.o_proj.weight.float(), self.num_heads
                    )
                    stacks["attention_value_norm"].append(
                        core.contribution_rows(attn_rows, "attention_value_norm", norms)
                    )
                if "rollout" in rules:
                    stacks["rollout"].append(state["rollout"][:, keep, :])

            return hook

        handles = []
        try:
            for i, layer in enumerate(self._layers):
                handles.append(layer.self_attn.register_forward_hook(on_attention(i)))
                if "attention_value_norm" in rules and i in selected:
                    handles.append(layer.self_attn.v_proj.register_forward_hook(on_values(i)))
            position_ids = (mask.long().cumsum(-1) - 1).clamp_min(0)
            out = self.model(
                input_ids=ids,
                attention_mask=mask,
                position_ids=position_ids,
                logits_to_keep=keep,
                use_cache=False,
            )
        finally:
            for handle in handles:
                handle.remove()
        return {rule: torch.stack(stack) for rule, stack in stacks.items()}, out.logits
