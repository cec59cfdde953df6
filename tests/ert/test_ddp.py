"""DDP: two gloo CPU processes with uneven shards give the single-process value on every rank."""

from __future__ import annotations

import socket

import pytest

from hf_ext.testing import requires

pytestmark = [requires("metrics", "sklearn"), pytest.mark.slow, pytest.mark.distributed]


def _data():
    import torch

    g = torch.Generator().manual_seed(0)
    x = torch.rand(500, 2, generator=g, dtype=torch.float64) * 2 - 1
    z = (torch.rand(500, generator=g, dtype=torch.float64) < torch.where(x[:, 0] > 0.3, 0.75, 0.97)).double()
    return x, z


def _values(rank_slice):
    from sklearn.linear_model import LogisticRegression

    from hf_ext.metrics import ExcessRiskTargetCoverage, WorstSlabCoverage

    x, z = _data()
    ert = ExcessRiskTargetCoverage(classifier=LogisticRegression(), n_splits=3)
    wsc = WorstSlabCoverage(num_directions=20, holdout=0.5)
    for metric in (ert, wsc):
        metric.update(x[rank_slice], z[rank_slice])
    return float(ert.compute()["kl"]), float(wsc.compute())


def _worker(rank: int, world: int, port: int, out) -> None:
    import os

    import torch.distributed as dist

    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        out.put((rank, _values(slice(0, 180) if rank == 0 else slice(180, 500))))
    finally:
        dist.destroy_process_group()


def test_two_process_gloo_matches_single_process():
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(r, 2, port, out)) for r in range(2)]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=300) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    ref = _values(slice(0, 500))
    assert results[0] == pytest.approx(ref, abs=1e-12)
    assert results[1] == pytest.approx(ref, abs=1e-12)
