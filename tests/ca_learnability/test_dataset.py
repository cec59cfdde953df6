"""CellularAutomatonDataset: shapes, dtypes, determinism, boundaries, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hf_ext.ca_learnability.automata import ca_step, life_like_rule
from hf_ext.ca_learnability.dataset import CellularAutomatonDataset

LIFE = life_like_rule([3], [2, 3])


def test_shapes_dtypes_and_targets() -> None:
    ds = CellularAutomatonDataset(LIFE, steps=2, grid=(8, 10), n_samples=5, density=0.3, seed=1)
    x, y = ds[3]
    assert len(ds) == 5 and x.shape == y.shape == (1, 8, 10) and x.dtype == y.dtype == torch.float32
    assert ds.inputs.shape == (5, 1, 8, 10) and set(ds.inputs.unique().tolist()) <= {0.0, 1.0}
    want = ca_step(ds.inputs.numpy().astype(np.uint8), LIFE, steps=2)
    assert (ds.targets.numpy() == want).all()
    assert 0.15 < float(ds.inputs.mean()) < 0.45
    loader = torch.utils.data.DataLoader(ds, batch_size=2)
    assert next(iter(loader))[0].shape == (2, 1, 8, 10)


def test_determinism_by_seed() -> None:
    a = CellularAutomatonDataset(LIFE, grid=(6, 6), n_samples=3, seed=7)
    b = CellularAutomatonDataset(LIFE, grid=(6, 6), n_samples=3, seed=7)
    c = CellularAutomatonDataset(LIFE, grid=(6, 6), n_samples=3, seed=8)
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
    assert not torch.equal(a.inputs, c.inputs)


def test_zero_boundary_differs_only_near_edges() -> None:
    wrap = CellularAutomatonDataset(LIFE, steps=2, grid=(12, 12), n_samples=20, seed=0)
    zero = CellularAutomatonDataset(LIFE, steps=2, grid=(12, 12), n_samples=20, boundary="zero", seed=0)
    assert torch.equal(wrap.inputs, zero.inputs)
    diff = (wrap.targets != zero.targets).any(0)[0]
    assert diff.any() and not diff[2:-2, 2:-2].any()  # k = 2: only cells within 2 of the edge


def test_small_torus_warns_and_bad_inputs() -> None:
    with pytest.warns(UserWarning, match="smaller than the 3x3 window"):
        CellularAutomatonDataset(LIFE, grid=(2, 8), n_samples=1)
    with pytest.raises(ValueError, match="`steps`"):
        CellularAutomatonDataset(LIFE, steps=0)
    with pytest.raises(ValueError, match="`n_samples`"):
        CellularAutomatonDataset(LIFE, n_samples=0)
    with pytest.raises(ValueError, match="`density`"):
        CellularAutomatonDataset(LIFE, density=1.2)
    with pytest.raises(ValueError, match="`boundary`"):
        CellularAutomatonDataset(LIFE, boundary="mirror")
    with pytest.raises(ValueError, match="`grid`"):
        CellularAutomatonDataset(LIFE, grid=(8,))
