"""Fixtures of the keystone tests: tiny LMs, a three-module set on the tiny Llama, a short AdamW run."""

from __future__ import annotations

import pytest
import torch

from hf_ext.testing import tiny_causal_lm

_ROWS = {
    "model.layers.0.self_attn.o_proj": [2, 9],
    "model.layers.0.self_attn.q_proj": [5],
    "model.layers.1.mlp.up_proj": [0, 7, 31],
}
_IDS = torch.tensor([[1, 5, 9, 12, 30, 7], [3, 8, 2, 44, 6, 1]])


@pytest.fixture
def make_lm():
    """``make_lm(arch="llama", seed=0, **overrides)``: a fresh tiny causal LM, the same for the same args."""
    return tiny_causal_lm


@pytest.fixture
def rows():
    """Module name -> rows: two attention modules of layer 0 and an MLP module of layer 1."""
    return {name: list(r) for name, r in _ROWS.items()}


@pytest.fixture
def ids():
    """A batch of 2 token sequences of length 6."""
    return _IDS.clone()


@pytest.fixture
def train():
    """``train(model, steps=3, lr=1e-2, weight_decay=0.1)``: AdamW on next-token loss over the trainable
    parameters."""
    return _train


def _train(model, steps=3, lr=1e-2, weight_decay=0.1):
    opt = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=weight_decay
    )
    model.train()
    for _ in range(steps):
        model(input_ids=_IDS, labels=_IDS).loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()
