"""DDP: two gloo CPU processes with uneven shards give the single-process value on every rank."""

from __future__ import annotations

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


def _rank_values(rank: int) -> tuple[float, float]:
    return _values(slice(0, 180) if rank == 0 else slice(180, 500))


def test_two_process_gloo_matches_single_process():
    from hf_ext.testing.distributed import run_on_processes

    results = run_on_processes(_rank_values)
    ref = _values(slice(0, 500))
    assert results[0] == pytest.approx(ref, abs=1e-12)
    assert results[1] == pytest.approx(ref, abs=1e-12)
