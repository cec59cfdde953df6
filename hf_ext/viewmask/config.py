"""Training settings of ViewMask-1-to-3: the LFQ tokenizer and the multi-view masked-token transformer.

Every default is [reconstructed] for a CPU-sized demo (the paper's optimiser settings are not published).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from hf_ext._registry import paper
from hf_ext._validation import check_choice, check_float, check_int, check_probability

SCHEDULES = ("cosine", "linear")
VIEW_SAMPLING = ("joint", "independent")


@dataclass
class LFQTrainingConfig:
    """Settings of :func:`~hf_ext.viewmask.training.train_lfq_autoencoder`.

    The loss is ``L1 + MSE`` reconstruction plus the LFQ auxiliary loss of the model's config; MAGVIT-v2's GAN
    and perceptual losses are left out [reconstructed simplification].

    Args:
        steps (`int`, *optional*, defaults to 300): optimiser steps.
        batch_size (`int`, *optional*, defaults to 64): images per step.
        learning_rate (`float`, *optional*, defaults to 5e-3): AdamW learning rate.
        weight_decay (`float`, *optional*, defaults to 0.0): AdamW weight decay.
        seed (`int`, *optional*, defaults to 0): seed of the batch order.

    Example:
        >>> LFQTrainingConfig(steps=10).batch_size
        64
    """

    _paper = paper("viewmask")

    steps: int = field(default=300, metadata={"help": "optimiser steps"})
    batch_size: int = field(default=64, metadata={"help": "images per step"})
    learning_rate: float = field(default=5e-3, metadata={"help": "AdamW learning rate"})
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay"})
    seed: int = field(default=0, metadata={"help": "seed of the batch order"})

    def __post_init__(self) -> None:
        self.steps = check_int("steps", self.steps, low=1)
        self.batch_size = check_int("batch_size", self.batch_size, low=1)
        self.learning_rate = check_float("learning_rate", self.learning_rate, low=0, low_open=True)
        self.weight_decay = check_float("weight_decay", self.weight_decay, low=0)
        self.seed = check_int("seed", self.seed, low=0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable fields."""
        return asdict(self)


@dataclass
class ViewMaskTrainingConfig:
    """Settings of :func:`~hf_ext.viewmask.training.train_viewmask`.

    Args:
        steps (`int`, *optional*, defaults to 1000): optimiser steps.
        batch_size (`int`, *optional*, defaults to 64): objects per step.
        learning_rate (`float`, *optional*, defaults to 1e-3): AdamW peak learning rate (linear warm-up over
            the first 5% of steps, then cosine decay to ``min_lr_ratio`` of it).
        min_lr_ratio (`float`, *optional*, defaults to 0.1): learning rate at the end of the decay, as a
            fraction of the peak, in ``[0, 1]``.
        weight_decay (`float`, *optional*, defaults to 0.01): AdamW weight decay.
        masking_schedule (`str`, *optional*, defaults to `"cosine"`): mask-ratio schedule of the training
            draws, ``"cosine"`` (``cos(pi/2 r)``) or ``"linear"`` (``1 - r``).
        view_sampling (`str`, *optional*, defaults to `"joint"`): ``"joint"`` trains on the whole sequence
            ``[view 0][view 1]...[view V-1]`` with the mask spread over every target view (ViewMask);
            ``"independent"`` trains on pairs ``[view 0][view k]`` with ``k`` drawn per object (the
            per-view baseline, same architecture and view ids).
        cond_drop_prob (`float`, *optional*, defaults to 0.0): probability that a sample also masks the
            whole conditioning view (for text-to-multi-view); off in the demo.
        grad_clip (`float`, *optional*, defaults to 1.0): gradient-norm clip.
        seed (`int`, *optional*, defaults to 0): seed of batch order and masks.

    Example:
        >>> ViewMaskTrainingConfig(view_sampling="independent").masking_schedule
        'cosine'
    """

    _paper = paper("viewmask")

    steps: int = field(default=1000, metadata={"help": "optimiser steps"})
    batch_size: int = field(default=64, metadata={"help": "objects per step"})
    learning_rate: float = field(default=1e-3, metadata={"help": "AdamW peak learning rate"})
    min_lr_ratio: float = field(default=0.1, metadata={"help": "final learning rate / peak"})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay"})
    masking_schedule: str = field(default="cosine", metadata={"help": "cosine | linear"})
    view_sampling: str = field(default="joint", metadata={"help": "joint | independent"})
    cond_drop_prob: float = field(default=0.0, metadata={"help": "probability of masking view 0 too"})
    grad_clip: float = field(default=1.0, metadata={"help": "gradient-norm clip"})
    seed: int = field(default=0, metadata={"help": "seed of batch order and masks"})

    def __post_init__(self) -> None:
        self.steps = check_int("steps", self.steps, low=1)
        self.batch_size = check_int("batch_size", self.batch_size, low=1)
        self.learning_rate = check_float("learning_rate", self.learning_rate, low=0, low_open=True)
        self.min_lr_ratio = check_probability("min_lr_ratio", self.min_lr_ratio)
        self.weight_decay = check_float("weight_decay", self.weight_decay, low=0)
        self.masking_schedule = check_choice("masking_schedule", self.masking_schedule, SCHEDULES)
        self.view_sampling = check_choice("view_sampling", self.view_sampling, VIEW_SAMPLING)
        self.cond_drop_prob = check_probability("cond_drop_prob", self.cond_drop_prob, high_open=True)
        self.grad_clip = check_float("grad_clip", self.grad_clip, low=0, low_open=True)
        self.seed = check_int("seed", self.seed, low=0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable fields."""
        return asdict(self)
