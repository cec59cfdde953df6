"""``GFNConfig``: optimiser, exploration and batch settings of the ``GFNTrainer``."""

from __future__ import annotations

from dataclasses import dataclass, field

from hf_ext._registry import paper
from hf_ext._validation import check_float, check_int, check_probability


@dataclass
class GFNConfig:
    """Training settings [reconstructed defaults; the paper's hyperparameters are not known].

    Args:
        lr (`float`, *optional*, defaults to `1e-3`):
            Adam learning rate of the policy, its memory, its flow head and a learned ``p_B``.
        logZ_lr (`float`, *optional*, defaults to `1e-1`):
            Adam learning rate of ``log Z``; kept separate and higher (one shared rate slows TB down).
        epsilon (`float`, *optional*, defaults to `0.05`):
            Exploration: sample from ``(1 - epsilon) p_F + epsilon Uniform(valid actions)``.
        batch_size (`int`, *optional*, defaults to `64`):
            Trajectories per step.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the sampling generator (initial weights are seeded by the caller).

    Example:
        >>> GFNConfig(epsilon=0.1).logZ_lr
        0.1
    """

    _paper = paper("path_gfn")

    lr: float = field(default=1e-3, metadata={"help": "Adam learning rate of the policy and memory."})
    logZ_lr: float = field(default=1e-1, metadata={"help": "Adam learning rate of log Z."})
    epsilon: float = field(
        default=0.05, metadata={"help": "Probability mass mixed in uniformly over valid actions."}
    )
    batch_size: int = field(default=64, metadata={"help": "Trajectories sampled per training step."})
    seed: int = field(default=0, metadata={"help": "Seed of the sampling generator."})

    def __post_init__(self) -> None:
        self.lr = check_float("lr", self.lr, low=0, low_open=True)
        self.logZ_lr = check_float("logZ_lr", self.logZ_lr, low=0, low_open=True)
        self.epsilon = check_probability("epsilon", self.epsilon)
        self.batch_size = check_int("batch_size", self.batch_size, low=1)
        self.seed = check_int("seed", self.seed, low=0)
