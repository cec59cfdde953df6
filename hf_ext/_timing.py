"""Wall-clock timing of a block, synchronised with accelerator work (used by the library's own reports and by
the benchmarks)."""

from __future__ import annotations

import time
from typing import Any


def synchronize(device: Any = None) -> None:
    """Wait for queued accelerator work on ``device`` (a ``torch.device``, string or tensor; no-op on CPU).

    Timing asynchronous GPU work without this measures the launch, not the work.
    """
    if device is None:
        return
    import torch

    if isinstance(device, torch.Tensor):
        device = device.device
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()
    elif device.type == "xpu":
        torch.xpu.synchronize(device)


class Timer:
    """Wall-clock seconds of a block: ``with Timer(device) as t: ...; t.seconds``.

    With a ``device`` (or a tensor on it), queued accelerator work is synchronised at both ends of the block.
    """

    seconds: float = 0.0

    def __init__(self, device: Any = None) -> None:
        self.device = device

    def __enter__(self) -> Timer:
        synchronize(self.device)
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        synchronize(self.device)
        self.seconds = time.perf_counter() - self._start
