"""``SAEConfig`` (the sparse autoencoder and its training) and ``InterventionConfig`` (edit selection)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hf_ext._registry import paper
from hf_ext._validation import (
    check_choice,
    check_float,
    check_int,
    check_probability,
    check_sequence,
)

VARIANTS = ("batchtopk", "topk", "l1")


@dataclass
class SAEConfig:
    """Sparse-autoencoder settings [reconstructed defaults from public TopK/BatchTopK SAE code].

    Args:
        d_in (`int`):
            Width of the activation (channels at the hooked site).
        expansion (`int`, *optional*, defaults to `8`):
            ``n_latents = expansion * d_in``.
        k (`int`, *optional*, defaults to `8`):
            Active latents per sample (``topk``) or on average per sample (``batchtopk``: ``k * B`` per
            batch). Must satisfy ``1 <= k < n_latents``. Ignored by ``l1``.
        variant (`str`, *optional*, defaults to `"batchtopk"`):
            ``"batchtopk"`` (top ``k * B`` over the batch in training, a learned threshold at inference),
            ``"topk"`` (top ``k`` per sample) or ``"l1"`` (ReLU codes with an L1 penalty).
        l1_coeff (`float`, *optional*, defaults to `1e-2`):
            Weight of the L1 penalty ``sum_j z_j`` (decoder columns are unit-norm) for ``variant="l1"``.
        k_aux (`int`, *optional*):
            Dead latents used by the auxiliary loss; defaults to ``d_in // 2``.
        alpha_aux (`float`, *optional*, defaults to `1/32`):
            Weight of the auxiliary dead-latent loss (``0`` turns it off).
        dead_window (`int`, *optional*, defaults to `100_000`):
            A latent is dead when it has not fired in this many training samples.
        resample_every (`int`, *optional*, defaults to `0`):
            Re-initialise dead latents from badly reconstructed inputs every this many steps (``0``: never).
        lr (`float`, *optional*):
            Adam learning rate; defaults to ``2e-4 / sqrt(n_latents / 2**14)``.
        steps (`int`, *optional*, defaults to `2000`):
            Training steps of ``fit``.
        batch_size (`int`, *optional*, defaults to `1024`):
            Activation rows per step.
        threshold_beta (`float`, *optional*, defaults to `0.999`):
            EMA factor of the inference threshold (mean smallest kept activation).
        seed (`int`, *optional*, defaults to `0`):
            Seed of the initial dictionary and the batch order.

    Example:
        >>> SAEConfig(d_in=32).n_latents
        256
    """

    _paper = paper("seglens")

    d_in: int = field(metadata={"help": "Width of the hooked activation (channels)."})
    expansion: int = field(default=8, metadata={"help": "n_latents = expansion * d_in."})
    k: int = field(default=8, metadata={"help": "Active latents per sample (mean for batchtopk)."})
    variant: str = field(default="batchtopk", metadata={"help": "batchtopk, topk or l1."})
    l1_coeff: float = field(default=1e-2, metadata={"help": "L1 penalty weight (variant l1)."})
    k_aux: int | None = field(default=None, metadata={"help": "Dead latents in the aux loss (d_in // 2)."})
    alpha_aux: float = field(default=1 / 32, metadata={"help": "Weight of the auxiliary dead-latent loss."})
    dead_window: int = field(default=100_000, metadata={"help": "Samples without firing before 'dead'."})
    resample_every: int = field(default=0, metadata={"help": "Resample dead latents every N steps (0: off)."})
    lr: float | None = field(default=None, metadata={"help": "Adam lr (2e-4 / sqrt(n_latents / 2**14))."})
    steps: int = field(default=2000, metadata={"help": "Training steps of fit()."})
    batch_size: int = field(default=1024, metadata={"help": "Activation rows per step."})
    threshold_beta: float = field(default=0.999, metadata={"help": "EMA factor of the threshold."})
    seed: int = field(default=0, metadata={"help": "Seed of the dictionary init and batch order."})

    def __post_init__(self) -> None:
        self.d_in = check_int("d_in", self.d_in, low=1)
        self.expansion = check_int("expansion", self.expansion, low=1)
        self.variant = check_choice("variant", self.variant, VARIANTS)
        n = self.d_in * self.expansion
        self.k = check_int("k", self.k, low=1, high=n - 1, hint=f"n_latents is {n}")
        self.l1_coeff = check_float("l1_coeff", self.l1_coeff, low=0)
        if self.k_aux is None:
            self.k_aux = max(1, self.d_in // 2)
        self.k_aux = check_int("k_aux", self.k_aux, low=1, high=n)
        self.alpha_aux = check_float("alpha_aux", self.alpha_aux, low=0)
        self.dead_window = check_int("dead_window", self.dead_window, low=1)
        self.resample_every = check_int("resample_every", self.resample_every, low=0)
        if self.lr is None:
            self.lr = 2e-4 / math.sqrt(n / 2**14)
        self.lr = check_float("lr", self.lr, low=0, low_open=True)
        self.steps = check_int("steps", self.steps, low=0)
        self.batch_size = check_int("batch_size", self.batch_size, low=1)
        self.threshold_beta = check_probability("threshold_beta", self.threshold_beta, high_open=True)
        self.seed = check_int("seed", self.seed, low=0)

    @property
    def n_latents(self) -> int:
        return self.d_in * self.expansion


@dataclass
class InterventionConfig:
    """How :func:`hf_ext.seglens.select_intervention` picks latents and edit sizes [reconstructed].

    Latents are ranked by differential reliance between the shifted and the reference cohort (absolute
    log-ratio of the mean code, or of the firing frequency). ``strategy="joint"`` steers the top ``m``
    latents together, each multiplied by ``(mean_ref / mean_target) ** s`` (towards the reference cohort's
    reliance), with ``(m, s)`` chosen on the calibration images from ``m_grid`` x ``strengths``;
    ``strategy="greedy"`` tries every edit of the ``scales`` / ``shifts`` grid on each of the ``top_m``
    latents in turn and keeps the best when it raises the calibration lesion Dice by ``min_gain``.

    Args:
        strategy (`str`, *optional*, defaults to `"joint"`):
            ``"joint"`` or ``"greedy"``.
        rank_by (`str`, *optional*, defaults to `"mean"`):
            ``"mean"`` (log-ratio of the mean code: frequency and magnitude) or ``"frequency"``.
        m_grid (`list[int]`, *optional*, defaults to `[4, 8, 16, 32]`):
            Numbers of top-ranked latents tried by ``joint``.
        strengths (`list[float]`, *optional*, defaults to `[0.25, 0.5, 1.0]`):
            Exponents ``s`` of the mean-matching factor tried by ``joint`` (1 matches the means).
        top_m (`int`, *optional*, defaults to `8`):
            Candidate latents examined by ``greedy``.
        scales (`list[float]`, *optional*, defaults to `[0, 0.25, 0.5, 2]`):
            Multiplicative edits ``z_j * gamma`` tried (``0`` is ablation).
        shifts (`list[float]`, *optional*, defaults to `[-2, -1, -0.5, 0.5, 1, 2]`):
            Additive edits ``z_j + alpha * sigma_j`` tried, in units of the latent's standard deviation.
        gate (`int`, *optional*, defaults to `0`):
            Edit only the positions where one of the ``gate`` most target-specific latents (largest
            positive firing log-ratio) fires; ``0`` edits every position.
        failure_dice (`float`, *optional*, defaults to `0.5`):
            An image whose lesion Dice is below this is a failure; recovered when it reaches it.
        min_gain (`float`, *optional*, defaults to `1e-3`):
            Smallest calibration Dice gain for an edit to be kept.
        eps (`float`, *optional*, defaults to `1e-3`):
            Smoothing of the firing-frequency log-ratio ``log((f_B + eps) / (f_A + eps))``.

    Example:
        >>> InterventionConfig(top_m=4).scales
        [0.0, 0.25, 0.5, 2.0]
    """

    _paper = paper("seglens")

    strategy: str = field(default="joint", metadata={"help": "joint (top-m mean matching) or greedy."})
    rank_by: str = field(default="mean", metadata={"help": "Rank latents by mean-code or frequency ratio."})
    m_grid: list[int] = field(
        default_factory=lambda: [4, 8, 16, 32], metadata={"help": "Latent counts tried by joint."}
    )
    strengths: list[float] = field(
        default_factory=lambda: [0.25, 0.5, 1.0], metadata={"help": "Mean-matching exponents tried."}
    )
    top_m: int = field(default=8, metadata={"help": "Candidate latents examined by greedy."})
    scales: list[float] = field(
        default_factory=lambda: [0.0, 0.25, 0.5, 2.0], metadata={"help": "Scale edits tried."}
    )
    shifts: list[float] = field(
        default_factory=lambda: [-2.0, -1.0, -0.5, 0.5, 1.0, 2.0],
        metadata={"help": "Additive edits tried, in latent standard deviations."},
    )
    gate: int = field(default=0, metadata={"help": "Gate edits by the top-n target-specific latents."})
    failure_dice: float = field(default=0.5, metadata={"help": "Lesion Dice below which an image fails."})
    min_gain: float = field(default=1e-3, metadata={"help": "Smallest calibration gain to keep an edit."})
    eps: float = field(default=1e-3, metadata={"help": "Smoothing of the firing log-ratio."})

    def __post_init__(self) -> None:
        self.strategy = check_choice("strategy", self.strategy, ("joint", "greedy"))
        self.rank_by = check_choice("rank_by", self.rank_by, ("mean", "frequency"))
        self.m_grid = check_sequence("m_grid", self.m_grid, lambda n, v: check_int(n, v, low=1), min_length=1)
        self.strengths = check_sequence(
            "strengths", self.strengths, lambda n, v: check_float(n, v, low=0, low_open=True), min_length=1
        )
        self.top_m = check_int("top_m", self.top_m, low=1)
        self.scales = check_sequence("scales", self.scales, lambda n, v: check_float(n, v, low=0))
        self.shifts = check_sequence("shifts", self.shifts, check_float)
        self.gate = check_int("gate", self.gate, low=0)
        self.failure_dice = check_probability("failure_dice", self.failure_dice)
        self.min_gain = check_float("min_gain", self.min_gain, low=0)
        self.eps = check_float("eps", self.eps, low=0, low_open=True)
