"""Run a function on several CPU processes joined over gloo, for the distributed tests."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any


def _entry(
    rank: int, world_size: int, port: int, init_group: bool, fn: Callable[..., Any], args: tuple, out: Any
) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(world_size),
    )
    import torch.distributed as dist

    if init_group:
        dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        out.put((rank, fn(rank, *args)))
    except BaseException as exc:  # the parent reports the rank's error instead of waiting for a timeout
        out.put((rank, exc))
        raise
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def run_on_processes(
    fn: Callable[..., Any], *args: Any, world_size: int = 2, init_group: bool = True, timeout: float = 300.0
) -> dict[int, Any]:
    """``{rank: fn(rank, *args)}`` from ``world_size`` spawned CPU processes.

    Each process gets the torchrun environment (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``/``PORT`` on a free
    local port), so accelerate and the Trainer join the group themselves; with ``init_group`` the gloo group
    is also initialised before ``fn`` runs (what torchmetrics' ``sync`` needs). ``fn`` must be importable by
    name (a module-level function) and return picklable values (no tensors: convert them to numpy or
    floats). A rank that raises re-raises here as ``RuntimeError`` naming the rank.
    """
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_entry, args=(rank, world_size, port, init_group, fn, args, out))
        for rank in range(world_size)
    ]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=timeout) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    for rank, value in sorted(results.items()):
        if isinstance(value, BaseException):
            raise RuntimeError(f"rank {rank} failed: {value!r}") from value
    return results
