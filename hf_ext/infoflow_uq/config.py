"""``InformationFlowConfig``: which contribution rule, layers and scores the flow tracer uses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hf_ext._registry import paper
from hf_ext._validation import check_choice, check_int, check_sequence

CONTRIBUTIONS = ("attention_value_norm", "attention", "rollout")
CONCENTRATIONS = ("entropy", "gini", "topk_mass")
SIMULATABILITIES = ("pearson", "spearman", "relevance_mass")


def _rules(value: Any) -> tuple[str, ...]:
    names = [value] if isinstance(value, str) else check_sequence("contribution", value, min_length=1)
    return tuple(check_choice("contribution", name, CONTRIBUTIONS) for name in names)


@dataclass
class InformationFlowConfig:
    """Settings of :class:`~hf_ext.infoflow_uq.InformationFlowScorer`.

    Every rule and score here is [reconstructed]: the paper names the two scores (simulatability and
    concentration) but its exact definitions are not public.

    Args:
        contribution (`str` or `tuple[str, ...]`, *optional*, defaults to ``"attention_value_norm"``): How a
            context token contributes to an answer position per layer: ``"attention_value_norm"``
            (sum over heads of attention times the norm of the head's output ``W_O^h v_j``),
            ``"attention"`` (head-mean attention) or ``"rollout"`` (attention rollout with the residual
            identity). A tuple records several rules in the same forward pass; the first is the default.
        layers (`"all"` or `tuple[int, ...]`, *optional*, defaults to ``"all"``): 0-based decoder layers
            kept in the trace (negative indices count from the end).
        concentration (`str`, *optional*, defaults to ``"entropy"``): ``"entropy"`` (1 - normalised
            entropy), ``"gini"`` (normalised Gini) or ``"topk_mass"`` (mass of the ``top_k`` largest).
        simulatability (`str`, *optional*, defaults to ``"pearson"``): ``"pearson"``, ``"spearman"`` or
            ``"relevance_mass"`` (contribution-weighted relevance).
        top_k (`int`, *optional*, defaults to 5): ``k`` of ``concentration="topk_mass"``.

    Example:
        >>> InformationFlowConfig(contribution=("attention_value_norm", "rollout")).contributions
        ('attention_value_norm', 'rollout')
    """

    _paper = paper("infoflow_uq")

    contribution: str | tuple[str, ...] = field(
        default="attention_value_norm",
        metadata={"help": "'attention_value_norm', 'attention' or 'rollout' (or a tuple of them)."},
    )
    layers: str | tuple[int, ...] = field(
        default="all", metadata={"help": "'all' or 0-based decoder layer indices kept in the trace."}
    )
    concentration: str = field(default="entropy", metadata={"help": "'entropy', 'gini' or 'topk_mass'."})
    simulatability: str = field(
        default="pearson", metadata={"help": "'pearson', 'spearman' or 'relevance_mass'."}
    )
    top_k: int = field(default=5, metadata={"help": "k of concentration='topk_mass'."})

    def __post_init__(self) -> None:
        rules = _rules(self.contribution)
        self.contribution = rules[0] if len(rules) == 1 else rules
        if self.layers != "all":
            item = lambda n, v: check_int(n, v)  # noqa: E731
            self.layers = tuple(check_sequence("layers", self.layers, item, min_length=1))
        self.concentration = check_choice("concentration", self.concentration, CONCENTRATIONS)
        self.simulatability = check_choice("simulatability", self.simulatability, SIMULATABILITIES)
        self.top_k = check_int("top_k", self.top_k, low=1)

    @property
    def contributions(self) -> tuple[str, ...]:
        """The recorded rules, the default one first."""
        return (self.contribution,) if isinstance(self.contribution, str) else self.contribution

    def layer_indices(self, num_layers: int) -> tuple[int, ...]:
        """The kept layers as non-negative indices for a model of ``num_layers`` decoder layers.

        Raises:
            ValueError: an index lies outside ``[-num_layers, num_layers)``.
        """
        if self.layers == "all":
            return tuple(range(num_layers))
        out = []
        for i, layer in enumerate(self.layers):
            index = check_int(
                f"layers[{i}]",
                layer,
                low=-num_layers,
                high=num_layers - 1,
                hint=f"The model has {num_layers} decoder layers.",
            )
            out.append(index % num_layers)
        return tuple(out)
