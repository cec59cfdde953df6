"""``GradingConfig``: runs, sampling, parsing, aggregation and deferral settings of the grader."""

from __future__ import annotations

from dataclasses import dataclass, field

from hf_ext._registry import paper
from hf_ext._validation import check_bool, check_choice, check_float, check_int, check_probability
from hf_ext.ai_grading.core import AGGREGATES, LEVELS


@dataclass
class GradingConfig:
    """Settings of :class:`~hf_ext.ai_grading.RubricGrader`.

    The stages (several runs, max rule, deferral to a human) follow the paper; every default below is
    [reconstructed].

    Args:
        n_runs (`int`, *optional*, defaults to 3): Backend calls per answer, with distinct seeds.
        temperature (`float`, *optional*, defaults to 0.7): Sampling temperature. At 0 the runs are
            identical, their spread is 0 and spread-based deferral never fires.
        max_retries (`int`, *optional*, defaults to 1): Extra calls after a reply that does not parse; a
            run still invalid after them is a parse failure (deferred, never scored 0).
        aggregate (`str`, *optional*, defaults to ``"max"``): ``"max"`` (the paper's rule), ``"median"``,
            ``"mean"`` or ``"min"``.
        aggregate_level (`str`, *optional*, defaults to ``"total"``): Combine run totals (``"total"``) or
            each rubric item, then sum (``"item"``).
        defer_spread (`float`, *optional*, defaults to 1.0): Defer when max - min run total
            exceeds it (points).
        defer_ocr_conf (`float`, *optional*, defaults to 0.6): Defer when OCR confidence is below it.
        defer_model_conf (`float`, *optional*, defaults to 0.0): Defer when a run's confidence is below it.
        on_parse_error (`str`, *optional*, defaults to ``"defer"``): ``"defer"`` or ``"raise"`` the
            :class:`~hf_ext.ai_grading.GradeParseError` after the retries.
        on_overflow (`str`, *optional*, defaults to ``"error"``): ``"clip"`` clips item points at most 1e-6
            above the item maximum.
        prefill (`bool`, *optional*, defaults to False): Open the assistant turn with the start of the JSON
            reply and let the model continue it (helps base models that have no chat template).
        compact (`bool`, *optional*, defaults to False): Ask for item points and the total only, without
            rationales, feedback or confidence (short replies for small models).
        keep_raw (`bool`, *optional*, defaults to True): Keep the raw replies on each report (they hold
            the student's work: personal data).
    """

    _paper = paper("ai_grading")

    n_runs: int = field(default=3, metadata={"help": "Backend calls per answer (distinct seeds)."})
    temperature: float = field(default=0.7, metadata={"help": "Sampling temperature (0 = greedy)."})
    max_retries: int = field(default=1, metadata={"help": "Retries after an unparsable reply."})
    aggregate: str = field(default="max", metadata={"help": "'max' (paper), 'median', 'mean' or 'min'."})
    aggregate_level: str = field(default="total", metadata={"help": "'total' or 'item'."})
    defer_spread: float = field(default=1.0, metadata={"help": "Defer when run spread > this (points)."})
    defer_ocr_conf: float = field(default=0.6, metadata={"help": "Defer when OCR confidence < this."})
    defer_model_conf: float = field(default=0.0, metadata={"help": "Defer when a run's confidence < this."})
    on_parse_error: str = field(default="defer", metadata={"help": "'defer' or 'raise'."})
    on_overflow: str = field(default="error", metadata={"help": "'error' or 'clip' (1e-6 overshoot)."})
    prefill: bool = field(default=False, metadata={"help": "Continue an opened JSON assistant turn."})
    compact: bool = field(default=False, metadata={"help": "Ask for item points and the total only."})
    keep_raw: bool = field(default=True, metadata={"help": "Keep raw replies on the reports."})

    def __post_init__(self) -> None:
        self.n_runs = check_int("n_runs", self.n_runs, low=1)
        self.temperature = check_float("temperature", self.temperature, low=0)
        self.max_retries = check_int("max_retries", self.max_retries, low=0)
        self.aggregate = check_choice("aggregate", self.aggregate, AGGREGATES)
        self.aggregate_level = check_choice("aggregate_level", self.aggregate_level, LEVELS)
        self.defer_spread = check_float("defer_spread", self.defer_spread, low=0)
        self.defer_ocr_conf = check_probability("defer_ocr_conf", self.defer_ocr_conf)
        self.defer_model_conf = check_probability("defer_model_conf", self.defer_model_conf)
        self.on_parse_error = check_choice("on_parse_error", self.on_parse_error, ("defer", "raise"))
        self.on_overflow = check_choice("on_overflow", self.on_overflow, ("error", "clip"))
        self.prefill = check_bool("prefill", self.prefill)
        self.compact = check_bool("compact", self.compact)
        self.keep_raw = check_bool("keep_raw", self.keep_raw)
