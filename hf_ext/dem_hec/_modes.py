"""Train/eval mode handling shared by the timm components."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn


@contextmanager
def eval_mode(module: nn.Module) -> Iterator[None]:
    """Put every submodule in eval mode (BN running stats, no dropout) and restore each one's mode afterwards.

    Restoring per submodule (not ``module.train(previous)``) keeps mixed states such as BatchNorm layers
    frozen in eval mode inside a model that trains.
    """
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        yield
    finally:
        for m, training in modes:
            m.training = training
