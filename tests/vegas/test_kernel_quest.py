"""``page_minmax`` and ``quest_page_scores``: a hand-computed score and the upper-bound property."""

from __future__ import annotations

import torch

from hf_ext.kernels.quest import page_minmax, quest_page_scores


def test_hand_computed_and_upper_bound():
    q = torch.tensor([1.0, -2.0]).view(1, 1, 1, 2)
    s = quest_page_scores(
        q, torch.tensor([0.0, -1.0]).view(1, 1, 1, 2), torch.tensor([2.0, 3.0]).view(1, 1, 1, 2)
    )
    assert s.item() == 4.0
    g = torch.Generator().manual_seed(2)
    for _ in range(20):
        k = torch.randn(1, 1, 64, 4, generator=g)
        q = torch.randn(1, 2, 1, 4, generator=g)  # two query heads share the KV head
        kmin, kmax = page_minmax(k, 16)
        scores = quest_page_scores(q, kmin, kmax)
        dots = torch.einsum("hd,nd->hn", q[0, :, 0], k[0, 0]).view(2, 4, 16).amax(-1)  # per head, per page
        assert bool((scores[0, 0] >= dots.sum(0) - 1e-5).all())


def test_scores_equal_the_elementwise_definition():
    g = torch.Generator().manual_seed(3)
    k = torch.randn(2, 2, 96, 8, generator=g)
    q = torch.randn(2, 6, 1, 8, generator=g)  # groups of 3 query heads per KV head
    kmin, kmax = page_minmax(k, 16)
    qg = q.double().view(2, 2, 3, 1, 8)
    definition = torch.maximum(qg * kmin.double()[:, :, None], qg * kmax.double()[:, :, None]).sum(-1).sum(2)
    torch.testing.assert_close(quest_page_scores(q, kmin, kmax), definition.float())
