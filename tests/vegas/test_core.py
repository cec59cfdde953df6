"""Vegas math: budget, score rows, selectors (hand-computed cases)."""

from __future__ import annotations

import pytest
import torch

from hf_ext.generation.vegas.config import VegasConfig
from hf_ext.generation.vegas.core import QuestPages, budget, score_rows, streamingllm_indices, vegas_indices


@pytest.mark.parametrize(
    ("seqlen", "valid", "ratio", "m", "max_len", "expected"),
    [
        (4096, 4096, 0.07, 256, 8192, 287),  # the spec's worked example (M = 574)
        (1000, 1000, 0.07, 256, 8192, 256),  # rho * N < m: clamp to the floor
        (200, 150, 0.07, 256, 8192, 150),  # valid_len cap
        (20000, 20000, 0.07, 256, 8192, 574),  # M cap
        (100, 100, 0.1, 16, 140, 16),
    ],
)
def test_budget_table(seqlen, valid, ratio, m, max_len, expected):
    assert budget(seqlen, valid, ratio, m, max_len) == expected


def test_streamingllm_indices_spec_example():
    idx = streamingllm_indices(1000, 1000, 0.07, 16)  # W = 16 * ceil(70 / 16) = 80
    assert idx.tolist() == list(range(16)) + list(range(920, 1000))
    assert streamingllm_indices(20, 20, 0.07, 16).tolist() == list(range(20))


def test_score_rows_entries():
    q = torch.arange(5.0).view(1, 1, 5, 1)
    assert score_rows(q, prefill=True).flatten().tolist() == [4.0]  # entry 2: last prompt row
    assert score_rows(q, prefill=False).flatten().tolist() == [0.0, 4.0]  # first and last chunk rows
    assert score_rows(q[:, :, :1], prefill=False).flatten().tolist() == [0.0]  # entry 1


def test_vegas_indices_never_select_the_tail():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 2, 3, 4, generator=g), torch.randn(1, 1, 12, 4, generator=g)
    k[:, :, 10:] *= 50  # huge tail keys must still be ignored: valid_len = 12 - 3 + 1 = 10
    idx = vegas_indices(q, k, prefill=False, valid_len=10, k=4, scale=1.0, mode="logit", backend="torch")
    assert idx.shape == (1, 4) and int(idx.max()) < 10


def test_quest_pages_extend_and_select():
    k = torch.zeros(1, 1, 40, 2)
    k[0, 0, 20] = torch.tensor([5.0, 0.0])  # page 1 holds the matching key
    pages = QuestPages(16)
    pages.extend(k, 20)
    assert pages.n_pages == 1
    pages.extend(k, 40)
    assert pages.n_pages == 2  # position 32..39 is an incomplete page
    idx = pages.select(torch.tensor([1.0, 0.0]).view(1, 1, 1, 2), k=10)
    assert idx.tolist() == [[list(range(16, 32))]]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sparse_ratio": 0.0}, "`sparse_ratio`"),
        ({"sparse_ratio": 1.5}, "`sparse_ratio`"),
        ({"num_draft_tokens": 0}, "`num_draft_tokens`"),
        ({"min_tokens": 0}, "`min_tokens`"),
        ({"score_mode": "max"}, "`score_mode`"),
        ({"selector": "h2o"}, "`selector`"),
        ({"backend": "cuda"}, "`backend`"),
    ],
)
def test_config_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        VegasConfig(**kwargs)
