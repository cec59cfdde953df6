"""``SCMGRPOConfig``: trl's ``GRPOConfig`` plus the settings of SCM-GRPO's default reward set."""

from __future__ import annotations

from dataclasses import dataclass, field

from trl import GRPOConfig

from hf_ext._registry import paper
from hf_ext._validation import check_bool, check_choice, check_float, check_int
from hf_ext.scm_grpo.core import DEPTH_MODES


@dataclass
class SCMGRPOConfig(GRPOConfig):
    r"""Configuration of :class:`hf_ext.scm_grpo.trainer.SCMGRPOTrainer`.

    Everything from ``trl.GRPOConfig`` applies; trl's defaults already match the GRPO settings SCM-GRPO is
    reconstructed with (``num_generations=8``, ``beta=0``, ``loss_type="dapo"``, ``scale_rewards="group"``).
    The fields below build the default reward set ``[SCMLabelReward, SCMGraphFormatReward, SCMDepthReward]``
    with ``reward_weights=[1, scm_format_weight, scm_depth_weight]`` when ``reward_weights`` is unset. Every
    default is a **reconstruction** from the paper's abstract and introduction.

    Args:
        scm_label_set (`str`, *optional*, defaults to `"hover"`):
            `"hover"` (SUPPORTED / NOT_SUPPORTED) or `"exfever"` (SUPPORTED / REFUTED / NOT_ENOUGH_INFO).
        scm_label_key (`str`, *optional*, defaults to `"label"`):
            Dataset column of the gold label.
        scm_target_key (`str`, *optional*, defaults to `"num_hops"`):
            Dataset column of the target depth `d*`; rows without it use `scm_default_target`.
        scm_default_target (`int`, *optional*, defaults to `3`):
            Target depth where the column is absent.
        scm_sigma (`float`, *optional*, defaults to `1.0`):
            Width of the structure reward `exp(-(d - d*)^2 / (2 sigma^2))`.
        scm_gate_on_correct (`bool`, *optional*, defaults to `True`):
            Multiply the structure reward by label correctness.
        scm_depth (`str`, *optional*, defaults to `"longest_path"`):
            `"longest_path"` (edges on the longest path into C) or `"num_evidence"` (E nodes reaching C).
        scm_format_weight (`float`, *optional*, defaults to `0.5`):
            Weight `lambda_f` of the format reward.
        scm_depth_weight (`float`, *optional*, defaults to `0.5`):
            Weight `lambda_s` of the structure reward.
        scm_require_all_connected (`bool`, *optional*, defaults to `False`):
            The format reward also requires every E node to reach C.

    Example:
        >>> cfg = SCMGRPOConfig(output_dir="out", report_to=[], use_cpu=True)
        >>> cfg.scm_label_set, cfg.num_generations, cfg.beta, cfg.loss_type
        ('hover', 8, 0.0, 'dapo')
    """

    _paper = paper("scm_grpo")

    scm_label_set: str = field(
        default="hover", metadata={"help": "Label set: 'hover' (2 labels) or 'exfever' (3 labels)."}
    )
    scm_label_key: str = field(default="label", metadata={"help": "Dataset column of the gold label."})
    scm_target_key: str = field(
        default="num_hops", metadata={"help": "Dataset column of the target depth d* (HoVer's num_hops)."}
    )
    scm_default_target: int = field(
        default=3, metadata={"help": "Target depth d* where the target column is absent."}
    )
    scm_sigma: float = field(default=1.0, metadata={"help": "Width sigma of the structure reward (> 0)."})
    scm_gate_on_correct: bool = field(
        default=True, metadata={"help": "Multiply the structure reward by label correctness."}
    )
    scm_depth: str = field(
        default="longest_path",
        metadata={
            "help": "Depth definition: 'longest_path' (into C) or 'num_evidence' (E nodes reaching C)."
        },
    )
    scm_format_weight: float = field(default=0.5, metadata={"help": "Weight lambda_f of the format reward."})
    scm_depth_weight: float = field(
        default=0.5, metadata={"help": "Weight lambda_s of the structure reward."}
    )
    scm_require_all_connected: bool = field(
        default=False, metadata={"help": "The format reward also requires every E node to reach C."}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("scm_label_set", self.scm_label_set, ("hover", "exfever"))
        self.scm_default_target = check_int("scm_default_target", self.scm_default_target, low=1)
        self.scm_sigma = check_float("scm_sigma", self.scm_sigma, low=0, low_open=True)
        self.scm_gate_on_correct = check_bool("scm_gate_on_correct", self.scm_gate_on_correct)
        self.scm_depth = check_choice("scm_depth", self.scm_depth, DEPTH_MODES)
        self.scm_format_weight = check_float("scm_format_weight", self.scm_format_weight, low=0)
        self.scm_depth_weight = check_float("scm_depth_weight", self.scm_depth_weight, low=0)
        self.scm_require_all_connected = check_bool(
            "scm_require_all_connected", self.scm_require_all_connected
        )
