"""Vegas math: budget, score rows, selectors (hand-computed cases)."""

from __future__ import annotations

import pytest
import torch

from hf_ext.vegas.config import VegasConfig
from hf_ext.vegas.core import (
    QuestPages,
    budget,
    greedy_accept,
    score_row_index,
    score_rows,
    speculative_accept,
    streamingllm_indices,
    vegas_indices,
    vegas_indices_from_scores,
)


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
    assert score_rows(q, None).flatten().tolist() == [4.0]  # entry 2: last prompt row
    assert score_rows(q, [4]).flatten().tolist() == [0.0, 4.0]  # first and last chunk rows
    assert score_rows(q[:, :, :1], [0]).flatten().tolist() == [0.0]  # entry 1
    q2 = torch.arange(10.0).view(2, 1, 5, 1)  # ragged batch: row 1 drafted 2 tokens (last real row 2)
    assert score_rows(q2, [4, 2]).flatten().tolist() == [0.0, 4.0, 5.0, 7.0]


@pytest.mark.parametrize("mode", ["weight", "logit"])
@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_selection_from_the_verify_scores_equals_the_separate_pass(mode, backend):
    from hf_ext.kernels.chunked import chunk_attention

    g = torch.Generator().manual_seed(2)
    q, k = torch.randn(3, 4, 5, 8, generator=g), torch.randn(3, 2, 40, 8, generator=g)
    n_keys, last, budgets = [40, 37, 38], [4, 1, 0], [6, 5, 6]  # ragged rows; the third drafted nothing
    valid = [n - 5 + 1 for n in n_keys]
    q[1, :, 2:] = 0.0  # a row's padded chunk rows are ignored by its scores
    rows = score_row_index(5, last, 3)
    _, lse, logits = chunk_attention(
        q, k, k, torch.tensor(n_keys), scale=0.3, score_rows=rows, backend=backend
    )
    assert logits is not None
    fused = vegas_indices_from_scores(logits, lse.gather(2, rows[:, None].expand(-1, 4, -1)), valid_len=valid,
                                      budgets=budgets, mode=mode, backend="torch")  # fmt: skip
    for b in range(3):  # each row against the separate pass over its own cache, decoded alone
        alone = vegas_indices(q[b : b + 1, :, : last[b] + 1], k[b : b + 1, :, : valid[b] + last[b]],
                              last=[last[b]], valid_len=[valid[b]], budgets=[budgets[b]], scale=0.3,
                              mode=mode, backend="torch")  # fmt: skip
        assert fused[b, : budgets[b]].tolist() == alone[0].tolist()


def test_vegas_indices_never_select_the_tail():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 2, 3, 4, generator=g), torch.randn(1, 1, 12, 4, generator=g)
    k[:, :, 10:] *= 50  # huge tail keys must still be ignored: valid_len = 12 - 3 + 1 = 10
    idx = vegas_indices(q, k, last=[2], valid_len=[10], budgets=[4], scale=1.0, mode="logit", backend="torch")
    assert idx.shape == (1, 4) and int(idx.max()) < 10


def test_vegas_indices_ragged_rows_pad_with_minus_one():
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 2, 3, 4, generator=g), torch.randn(2, 1, 12, 4, generator=g)
    idx = vegas_indices(
        q, k, last=[2, 1], valid_len=[10, 6], budgets=[4, 2], scale=1.0, mode="weight", backend="torch"
    )
    assert idx.shape == (2, 4)
    assert int(idx[0].min()) >= 0 and int(idx[0].max()) < 10
    assert idx[1, 2:].tolist() == [-1, -1] and int(idx[1, :2].max()) < 6
    alone = vegas_indices(
        q[1:, :, :2], k[1:, :, :8], last=[1], valid_len=[6], budgets=[2], scale=1.0, mode="weight",
        backend="torch",
    )  # fmt: skip
    assert idx[1, :2].tolist() == alone[0].tolist()  # a short row scores as if decoded alone


def test_greedy_and_speculative_accept():
    n_acc, bonus = greedy_accept(
        torch.tensor([[4, 5, 6], [1, 2, 3]]), torch.tensor([[4, 5, 7, 8], [1, 2, 3, 9]])
    )
    assert n_acc.tolist() == [2, 3] and bonus.tolist() == [7, 9]
    p = torch.tensor([[[0.0, 1.0], [0.5, 0.5]]])  # target always says token 1 first
    q = torch.tensor([[[1.0, 0.0]]])  # the draft proposed token 0 with certainty: always rejected
    n_acc, bonus = speculative_accept(torch.tensor([[0]]), q, p)
    assert n_acc.tolist() == [0] and bonus.tolist() == [1]  # the residual max(0, p - q) is all on token 1


def test_quest_pages_extend_and_select():
    k = torch.zeros(1, 1, 40, 2)
    k[0, 0, 20] = torch.tensor([5.0, 0.0])  # page 1 holds the matching key
    pages = QuestPages(16)
    pages.extend(k, 20)
    assert pages.n_pages == 1
    pages.extend(k, 40)
    assert pages.n_pages == 2  # position 32..39 is an incomplete page
    slots, counts = pages.select(torch.tensor([1.0, 0.0]).view(1, 1, 1, 2), [10])
    assert slots.tolist() == [[list(range(16, 32))]] and counts.tolist() == [16]


def test_quest_select_keeps_each_rows_best_pages_in_ascending_order():
    k = torch.zeros(2, 1, 64, 2)
    for page, value in ((3, 9.0), (0, 5.0), (2, 1.0)):  # page scores 9 > 5 > 1 > 0 (page 1)
        k[:, 0, 16 * page] = torch.tensor([value, 0.0])
    pages = QuestPages(16)
    pages.extend(k, 64)
    slots, counts = pages.select(torch.tensor([1.0, 0.0]).view(1, 1, 1, 2).expand(2, -1, -1, -1), [20, 40])
    assert counts.tolist() == [32, 48]  # two pages for row 0, three for row 1
    assert slots[0, 0, :32].tolist() == [*range(0, 16), *range(48, 64)]  # pages 0 and 3, ascending
    assert slots[1, 0, :48].tolist() == [*range(0, 16), *range(32, 64)]  # pages 0, 2 and 3


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
        ({"cache": "static"}, "`cache`"),
    ],
)
def test_config_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        VegasConfig(**kwargs)
