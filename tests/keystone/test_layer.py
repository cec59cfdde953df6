"""KeystoneLayer math: the row delta by hand, merge/unmerge, gradients equal dense row gradients."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hf_ext.testing import requires

pytestmark = requires("peft")


def _linear():
    lin = nn.Linear(3, 4)
    with torch.no_grad():
        lin.weight.copy_(torch.arange(12.0).view(4, 3))
        lin.bias.copy_(torch.tensor([1.0, -1.0, 0.5, 0.0]))
    return lin


def test_forward_adds_the_delta_to_the_selected_rows_only():
    from hf_ext.keystone.tuner.layer import Linear

    layer = Linear(_linear(), "default", rows=[3, 1])
    with torch.no_grad():
        layer.keystone_delta["default"].copy_(torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 2.0]]))  # rows 1, 3
    x = torch.tensor([[1.0, 2.0, 3.0]])
    # W x + b = [0+2+6+1, 3+8+15-1, 6+14+24+0.5, 9+20+33+0] = [9, 25, 44.5, 62]
    # row 1 gains [1, 0, 0] . x = 1; row 3 gains [0, 0, 2] . x = 6.
    torch.testing.assert_close(layer(x), torch.tensor([[9.0, 26.0, 44.5, 68.0]]))
    assert layer.keystone_rows["default"].tolist() == [1, 3]
    assert layer.get_delta_weight("default").nonzero()[:, 0].unique().tolist() == [1, 3]


def test_merge_unmerge_and_disable():
    from hf_ext.keystone.tuner.layer import Linear

    base = _linear()
    before = base.weight.detach().clone()
    layer = Linear(base, "default", rows=[0, 2], init_weights=False)
    x = torch.randn(5, 3)
    adapted = layer(x)
    layer.merge(safe_merge=True)
    assert layer.merged
    torch.testing.assert_close(layer(x), adapted)
    changed = (base.weight != before).any(1).nonzero().flatten().tolist()
    assert changed == [0, 2]
    layer.unmerge()
    torch.testing.assert_close(base.weight, before)
    layer.enable_adapters(False)
    torch.testing.assert_close(layer(x), _linear()(x))
    with pytest.warns(UserWarning, match="no keystone adapter is merged"):
        layer.unmerge()


def test_safe_merge_refuses_non_finite_deltas():
    from hf_ext.keystone.tuner.layer import Linear

    layer = Linear(_linear(), "default", rows=[0])
    with torch.no_grad():
        layer.keystone_delta["default"].fill_(float("nan"))
    with pytest.raises(ValueError, match=r"adapter .default. would write NaN/inf into weight rows \[0\]"):
        layer.merge(safe_merge=True)


def test_gradient_equals_the_dense_weight_rows_gradient():
    from hf_ext.keystone.tuner.layer import Linear

    torch.manual_seed(0)
    dense = _linear().double()
    layer = Linear(_linear().double(), "default", rows=[1, 3])
    x = torch.randn(7, 3, dtype=torch.float64)
    target = torch.randn(7, 4, dtype=torch.float64)
    ((dense(x) - target) ** 2).sum().backward()
    ((layer(x) - target) ** 2).sum().backward()
    torch.testing.assert_close(
        layer.keystone_delta["default"].grad, dense.weight.grad[[1, 3]], atol=1e-12, rtol=0
    )


def test_bad_rows_and_bad_base_layers():
    from hf_ext.keystone.tuner.layer import Linear

    for rows in ([0, 0], [4], [-1]):
        with pytest.raises(ValueError, match=r"`rows` must be distinct indices in \[0, 4\)"):
            Linear(_linear(), "default", rows=rows)
    with pytest.raises(ValueError, match=r"`columns` must be distinct indices in \[0, \d+\)"):
        Linear(_linear(), "default", rows=[0], columns=[99])
    with pytest.raises(ValueError, match="Adapter 'default' needs `rows` or `columns`, got neither"):
        Linear(_linear(), "default", rows=[])
    with pytest.raises(ValueError, match="`delta_scale` must be 'none' or 'weight_norm', got 'rms'"):
        Linear(_linear(), "default", rows=[0], delta_scale="rms")
    with pytest.raises(TypeError, match="wrap torch.nn.Linear only, got Embedding"):
        Linear(nn.Embedding(4, 3), "default", rows=[0])
