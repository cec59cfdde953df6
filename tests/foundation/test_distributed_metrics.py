"""Every torchmetrics ``Metric`` the registry ships gives its single-process value on two gloo processes.

The ranks hold uneven shards (rank 0 the first 37% of the rows, rank 1 the rest, two ``update`` calls
each); ``compute()`` synchronises through torchmetrics' process group. One spawn computes every metric, so
the whole check costs one process start-up. ``CASES`` holds each metric's constructor arguments and data;
a metric added to the registry without a case fails ``test_every_registered_metric_has_a_case``.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

import pytest

from hf_ext.testing import requires

pytestmark = [requires("metrics", "sklearn"), pytest.mark.distributed]

N = 400
SPLIT = 148  # rank 0 rows [0, SPLIT), rank 1 rows [SPLIT, N)


def _columns(seed: int = 0) -> dict[str, Any]:
    """Shared per-row data: features, coverage, groups, set sizes, labels, decisions, predictions, grades."""
    import torch

    g = torch.Generator().manual_seed(seed)
    features = torch.rand(N, 2, generator=g, dtype=torch.float64) * 2 - 1
    p_cover = torch.where(features[:, 0] > 0.3, 0.75, 0.95)
    return {
        "features": features,
        "covered": (torch.rand(N, generator=g, dtype=torch.float64) < p_cover).double(),
        "groups": torch.randint(0, 3, (N,), generator=g),
        "sizes": torch.randint(1, 6, (N,), generator=g).double(),
        "labels": torch.randint(0, 4, (N,), generator=g),
        "decisions": (torch.rand(N, generator=g) < 0.6).long(),
        "qualified": torch.rand(N, generator=g) < 0.5,
        "levels": torch.rand(N, generator=g, dtype=torch.float64),
        "preds": torch.randint(0, 4, (N,), generator=g),
        "ai_scores": torch.randint(0, 7, (N,), generator=g).double() / 2,
        "ref_scores": torch.randint(0, 7, (N,), generator=g).double() / 2,
        "run_scores": torch.randint(0, 7, (N, 3), generator=g).double() / 2,
    }


def _rows(names: tuple[str, ...]) -> Callable[[dict[str, Any], slice], list[tuple[tuple[Any, ...], dict]]]:
    def batches(cols: dict[str, Any], rows: slice) -> list[tuple[tuple[Any, ...], dict]]:
        start, stop = rows.start, rows.stop
        mid = (start + stop) // 2
        return [(tuple(cols[n][a:b] for n in names), {}) for a, b in ((start, mid), (mid, stop))]

    return batches


def _corruption_batches(cols: dict[str, Any], rows: slice) -> list[tuple[tuple[Any, ...], dict]]:
    """Even rows are clean images, odd rows ``gaussian_noise`` at severity 2."""
    preds, labels = cols["preds"][rows], cols["labels"][rows]
    clean = (_row_ids(rows) % 2) == 0
    return [
        ((preds[clean], labels[clean]), {}),
        ((preds[~clean], labels[~clean], "gaussian_noise", 2), {}),
    ]


def _row_ids(rows: slice) -> Any:
    import torch

    return torch.arange(rows.start, rows.stop)


def _ert_kwargs() -> dict[str, Any]:
    from sklearn.linear_model import LogisticRegression

    return {"classifier": LogisticRegression(), "n_splits": 3}


CASES: dict[str, tuple[Callable[[], dict[str, Any]], Callable[..., list]]] = {
    "ExcessRiskTargetCoverage": (_ert_kwargs, _rows(("features", "covered"))),
    "CoverageGap": (lambda: {"num_groups": 3}, _rows(("groups", "covered"))),
    "FeatureStratifiedCoverage": (lambda: {"num_groups": 3}, _rows(("groups", "covered"))),
    "SizeStratifiedCoverage": (lambda: {"num_groups": 3}, _rows(("sizes", "covered"))),
    "EqualOpportunityCoverage": (lambda: {"num_groups": 3}, _rows(("labels", "covered"))),
    "WorstSlabCoverage": (lambda: {"num_directions": 20, "holdout": 0.5}, _rows(("features", "covered"))),
    "SizeCoverageCorrelation": (dict, _rows(("sizes", "covered"))),
    "MeanCorruptionError": (
        lambda: {"corruptions": ["gaussian_noise"], "severities": (2,), "reference": None},
        _corruption_batches,
    ),
    "GroupRate": (lambda: {"num_groups": 3}, _rows(("decisions", "groups"))),
    "DemographicParityDifference": (lambda: {"num_groups": 3}, _rows(("decisions", "groups"))),
    "EqualOpportunityDifference": (lambda: {"num_groups": 3}, _rows(("decisions", "groups", "qualified"))),
    "MeanLevelGap": (lambda: {"num_groups": 3}, _rows(("levels", "groups"))),
    "UncertaintyAUROC": (dict, _rows(("levels", "covered"))),
    "PredictionRejectionRatio": (dict, _rows(("levels", "covered"))),
    "GradingAgreement": (
        lambda: {"max_points": 3.0, "n_bootstrap": 50},
        _rows(("ai_scores", "ref_scores")),
    ),
    "RunStability": (lambda: {"tau": 1.0}, _rows(("run_scores",))),
}


def _registered_metrics() -> dict[str, type]:
    from torchmetrics import Metric

    from hf_ext._registry import methods

    found = {}
    for info in methods().values():
        for name, module in info.public.items():
            if module.startswith("hf_ext.metrics."):
                obj = getattr(importlib.import_module(module), name)
                if inspect.isclass(obj) and issubclass(obj, Metric):
                    found[name] = obj
    return found


def _flat(value: Any) -> dict[str, float]:
    if isinstance(value, dict):
        return {f"{k}.{i}": v for k, sub in value.items() for i, v in _flat(sub).items()}
    return {str(i): float(v) for i, v in enumerate(value.reshape(-1).tolist())}


def _values(rows: slice) -> dict[str, dict[str, float]]:
    """Every metric's ``compute()`` after updating it with ``rows``, flattened to floats."""
    cols = _columns()
    out = {}
    for name, cls in sorted(_registered_metrics().items()):
        make_kwargs, batches = CASES[name]
        metric = cls(**make_kwargs())
        for args, kwargs in batches(cols, rows):
            metric.update(*args, **kwargs)
        out[name] = _flat(metric.compute())
    return out


def _rank_values(rank: int) -> dict[str, dict[str, float]]:
    return _values(slice(0, SPLIT) if rank == 0 else slice(SPLIT, N))


@pytest.fixture(scope="module")
def per_rank() -> dict[int, dict[str, dict[str, float]]]:
    from hf_ext.testing.distributed import run_on_processes

    return run_on_processes(_rank_values)


@pytest.fixture(scope="module")
def single() -> dict[str, dict[str, float]]:
    return _values(slice(0, N))


def test_every_registered_metric_has_a_case():
    assert set(_registered_metrics()) == set(CASES)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_two_processes_with_uneven_shards_match_one(name, per_rank, single):
    assert single[name], f"{name} computed nothing"
    for rank in (0, 1):
        assert per_rank[rank][name] == pytest.approx(single[name], abs=1e-10, nan_ok=True), f"rank {rank}"
