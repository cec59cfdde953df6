"""``CAMPConfig``: trl's ``DPOConfig`` plus the CAMP fields (all defaults [reconstructed])."""

from __future__ import annotations

from dataclasses import dataclass, field

from trl import DPOConfig

from hf_ext._registry import paper
from hf_ext._validation import check_choice, check_float, check_sequence
from hf_ext.camp.core import CAMP_MODES, CONFLICT_LOSSES, CONFLICT_RULES

MODES = (*CAMP_MODES, "off")


@dataclass
class CAMPConfig(DPOConfig):
    r"""Configuration of :class:`hf_ext.camp.trainer.CAMPTrainer`.

    Everything from ``trl.DPOConfig`` applies; CAMP needs the plain DPO sigmoid loss, so ``loss_type`` must
    stay ``["sigmoid"]`` with ``f_divergence_type="reverse_kl"``, ``use_weighting=False``,
    ``label_smoothing=0``, ``loss_weights`` unset or ``[1.0]`` and ``ld_alpha`` unset (the conflict loss reads
    token-summed log-probs). The loss form and every default below are a
    **reconstruction** from the paper's abstract.

    Args:
        camp_mode (`str`, *optional*, defaults to `"margin"`):
            `"margin"`: the adaptive margin `m_i` (consistent pairs: `-log sigmoid(beta * delta - m_i)`;
            conflict pairs: see `camp_conflict_loss`); `"weight"`: conflict pairs weighted by
            `camp_conflict_weight`; `"off"`: plain DPO through trl's own loss code (our addition, for A/B runs
            and parity checks).
        camp_gamma (`float`, *optional*, defaults to `1.0`):
            Margin scale, in logit units of `beta * delta`: `m = 1` at `beta = 0.1` asks for a 10-nat
            log-ratio gap, so keep it small for long completions. `0` with `camp_conflict_loss="sigmoid"`
            gives DPO exactly.
        camp_weights (`list[float]`, *optional*, defaults to `[0.5, 0.5]`):
            `(w_T, w_H)` of the conflict-pair trade-off margin `w_T * t + w_H * h`. Truth-prioritised weights
            (`w_T > w_H`) make a conflict pair whose chosen answer is less truthful settle at a negative
            target, i.e. move toward the more truthful answer.
        camp_conflict_loss (`str`, *optional*, defaults to `"soft_label"`):
            Loss of conflict pairs in margin mode. `"soft_label"`: two-sided, `-sigmoid(m) * log sigmoid(z) -
            sigmoid(-m) * log sigmoid(-z)` with `z = beta * delta`, minimal at `z = m`, so a conflict pair
            settles at its trade-off instead of following the overall label; `"sigmoid"`: the one-sided
            `-log sigmoid(z - m)` used for consistent pairs (a MODPO-style margin gated by the conflict).
        conflict_rule (`str`, *optional*, defaults to `"sign"`):
            `"sign"`: `c = 1[t * h < 0]`; `"soft"`: `c = sigmoid(-camp_kappa * t * h)`.
        camp_kappa (`float`, *optional*, defaults to `10.0`):
            Sharpness of the soft rule.
        camp_conflict_weight (`float`, *optional*, defaults to `0.5`):
            Loss weight `omega` of conflict pairs in weight mode; `1` gives DPO.
        truth_margin_key (`str`, *optional*, defaults to `"truth_margin"`):
            Dataset column of the normalised truthfulness gap `t` in [-1, 1].
        help_margin_key (`str`, *optional*, defaults to `"help_margin"`):
            Dataset column of the normalised helpfulness gap `h` in [-1, 1].
        conflict_key (`str`, *optional*):
            Dataset column of a precomputed conflict `c` in [0, 1] (e.g. a knowledge-boundary probe); it
            replaces the rule.
        completion_only_lm_head (`bool`, *optional*, defaults to `True`):
            Score only the completion positions in trl's fused LM head on a CPU as well (hf-ext addition, a
            speed option). trl 1.16 projects only the positions with a label onto the vocabulary on
            CUDA/XPU with Triton, and every position elsewhere; on a CPU with a large vocabulary (Gemma-3:
            262k) the prompt positions are most of the step. The log-probs are the same per position (the
            prompt positions are zeroed either way); `False` keeps trl's path. Other devices are unchanged.

    Example:
        >>> cfg = CAMPConfig(output_dir="out", camp_gamma=0.5, report_to=[], use_cpu=True)
        >>> cfg.loss_type, cfg.camp_mode
        (['sigmoid'], 'margin')
    """

    _paper = paper("camp")

    camp_mode: str = field(
        default="margin",
        metadata={
            "help": "CAMP form: 'margin' (adaptive margin), 'weight' (conflict down-weighting) or 'off'."
        },
    )
    camp_gamma: float = field(
        default=1.0, metadata={"help": "Margin scale in logit units (units of beta * delta); 0 gives DPO."}
    )
    camp_weights: list[float] = field(
        default_factory=lambda: [0.5, 0.5],
        metadata={"help": "(w_T, w_H): weights of the truth and help gaps in the conflict-pair margin."},
    )
    camp_conflict_loss: str = field(
        default="soft_label",
        metadata={
            "help": "Conflict-pair loss in margin mode: 'soft_label' (two-sided, settles at the trade-off "
            "margin) or 'sigmoid' (one-sided margin loss)."
        },
    )
    conflict_rule: str = field(
        default="sign", metadata={"help": "Conflict rule: 'sign' (t*h < 0) or 'soft' (sigmoid(-kappa*t*h))."}
    )
    camp_kappa: float = field(default=10.0, metadata={"help": "Sharpness of the soft conflict rule."})
    camp_conflict_weight: float = field(
        default=0.5, metadata={"help": "Loss weight of conflict pairs in weight mode; 1 gives DPO."}
    )
    truth_margin_key: str = field(
        default="truth_margin", metadata={"help": "Column of the normalised truthfulness gap t in [-1, 1]."}
    )
    help_margin_key: str = field(
        default="help_margin", metadata={"help": "Column of the normalised helpfulness gap h in [-1, 1]."}
    )
    conflict_key: str | None = field(
        default=None, metadata={"help": "Optional column of a precomputed conflict c in [0, 1]."}
    )
    completion_only_lm_head: bool = field(
        default=True,
        metadata={"help": "Score only completion positions in trl's fused LM head on CPU too (speed only)."},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.loss_type != ["sigmoid"]:
            sorting = {"aot", "aot_unpaired"} & set(self.loss_type)
            why = (
                f" {sorted(sorting)} sort the batch, which would misalign per-pair margins."
                if sorting
                else ""
            )
            raise ValueError(
                f"`loss_type` must be ['sigmoid'] for CAMP, got {self.loss_type!r}.{why} "
                "Use `camp_mode` to pick the CAMP form."
            )
        if self.loss_weights not in (None, [1.0]):
            raise ValueError(f"`loss_weights` must be unset or [1.0] for CAMP, got {self.loss_weights!r}.")
        check_choice(
            "f_divergence_type",
            self.f_divergence_type,
            ("reverse_kl",),
            hint="The CAMP margin is in units of DPO's reverse-KL log-ratio.",
        )
        if self.use_weighting:
            raise ValueError(
                "`use_weighting` must be False for CAMP: WPO weights would rescale the per-pair margins."
            )
        if self.label_smoothing != 0:
            raise ValueError(
                f"`label_smoothing` must be 0 for CAMP (trl's sigmoid loss ignores it), "
                f"got {self.label_smoothing!r}."
            )
        if self.ld_alpha is not None:
            raise ValueError(
                f"`ld_alpha` must be None for CAMP, got {self.ld_alpha!r}: the CAMP loss is built on the "
                "token-summed log-ratios."
            )
        check_choice("camp_mode", self.camp_mode, MODES)
        check_choice("conflict_rule", self.conflict_rule, CONFLICT_RULES)
        check_choice("camp_conflict_loss", self.camp_conflict_loss, CONFLICT_LOSSES)
        self.camp_weights = check_sequence(
            "camp_weights",
            self.camp_weights,
            lambda name, w: check_float(name, w, low=0),
            length=2,
            hint="Give (w_T, w_H), two finite numbers >= 0.",
        )
        self.camp_gamma = check_float("camp_gamma", self.camp_gamma, low=0)
        self.camp_conflict_weight = check_float("camp_conflict_weight", self.camp_conflict_weight, low=0)
        self.camp_kappa = check_float("camp_kappa", self.camp_kappa, low=0, low_open=True)
