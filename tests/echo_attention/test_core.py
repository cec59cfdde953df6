"""EchoAttention core math: layout, FLOP counts, allocation, echo exactness, stage-1 fit, routing."""

from __future__ import annotations

import pytest
import torch

from hf_ext.echo_attention.allocation import allocate, select_exact
from hf_ext.echo_attention.calibrate import mixture_loss
from hf_ext.echo_attention.core import identity_theta, sparse_echo_attention, static_route
from hf_ext.echo_attention.fit import (
    accumulate_theta_stats,
    band_partials,
    new_theta_stats,
    solve_theta,
)
from hf_ext.echo_attention.layout import Layout, flop_costs


def test_layout_is_frame_major_and_tiles_never_straddle_frames():
    lay = Layout(frames=3, tokens_per_frame=20, block=16)
    assert (lay.n_s, lay.n_t, lay.padded_len) == (2, 6, 96)
    x = torch.arange(60.0).view(1, 1, 60, 1)
    padded = lay.pad(x)
    tiles = padded.view(3, 2, 16)
    for f in range(3):  # every tile holds tokens of one frame only; padding rows are zeros at the frame end
        assert tiles[f, 0].min() >= 20 * f and tiles[f, 1, :4].max() < 20 * (f + 1)
        assert (tiles[f, 1, 4:] == 0).all()
    valid = lay.valid(torch.device("cpu"))
    assert valid.view(3, 32).sum(-1).tolist() == [20, 20, 20]
    torch.testing.assert_close(lay.unpad(padded), x)


def test_band_partials_mask_padded_keys_per_key_tile():
    lay = Layout(frames=3, tokens_per_frame=20, block=16)  # tile 1 of each frame: 4 real keys, 12 padding
    g = torch.Generator().manual_seed(0)
    q, k, v = (lay.pad(torch.randn(1, 1, 60, 8, generator=g)) for _ in range(3))
    tiles = [x.view(3, 2, 16, 8) for x in (q, k, v)]
    n_valid = (16, 4)
    for delta in (-1, 0, 2):
        out, lse = band_partials(q, k, v, lay, delta)
        for i, fq in enumerate(range(max(0, -delta), 3 - max(0, delta))):
            for s in range(2):
                for t in range(2):
                    kk, vv = tiles[1][fq + delta, t, : n_valid[t]], tiles[2][fq + delta, t, : n_valid[t]]
                    logits = tiles[0][fq, s] @ kk.T * 8**-0.5
                    torch.testing.assert_close(lse[0, 0, s, t, i], logits.logsumexp(-1))
                    torch.testing.assert_close(out[0, 0, s, t, i], logits.softmax(-1) @ vv)


def test_hand_counted_flops_for_two_frames_two_tiles():
    lay = Layout(frames=2, tokens_per_frame=32, block=16)  # S = 64, n_t = 4
    cost = flop_costs(lay, head_dim=8, pool=4)
    assert cost == {
        "dense": 4 * 64 * 64 * 8.0,
        "estimate": 2 * 64 * 8 + 2 * 16 * 8.0,
        "exact": 4 * 256 * 8.0,
        "pool_keys": 2 * 64 * 8.0,
        "coarse": 4 * 16 * 4 * 8.0,
        "echo": 6 * 16 * 8.0,
    }
    p_hat = torch.full((1, 4, 4), 0.25)
    alloc = allocate(p_hat, lay, 8, torch.tensor([0.5]), torch.tensor([0.0]), 4)
    n = int(alloc.exact.sum())
    assert n == (0.5 * cost["dense"] - cost["estimate"]) // cost["exact"] == 7
    assert float(alloc.flops) == (cost["estimate"] + 7 * cost["exact"]) / cost["dense"]


def test_diagonal_always_kept_and_exactly_kq_per_query_tile():
    g = torch.Generator().manual_seed(0)
    p_hat = torch.rand(3, 8, 8, generator=g)
    p_hat.diagonal(dim1=-2, dim2=-1).zero_()  # the diagonal is kept even with the lowest estimate
    mask = select_exact(p_hat, torch.tensor([24, 24, 24]))
    assert mask.diagonal(dim1=-2, dim2=-1).all()
    assert (mask.sum(-1) == 3).all()
    top2 = p_hat.topk(2, -1).indices
    assert torch.gather(mask, -1, top2).all()


def test_identical_frames_echo_is_exact():
    g = torch.Generator().manual_seed(0)
    lay = Layout(frames=4, tokens_per_frame=32, block=16)
    frame = [torch.randn(1, 2, 1, 32, 8, generator=g) for _ in range(3)]
    q, k, v = (x.expand(1, 2, 4, 32, 8).reshape(1, 2, 128, 8) for x in frame)
    dense = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    theta = identity_theta(2, lay, 8)
    out, alloc = sparse_echo_attention(
        q, k, v, lay, [0.3] * 2, [0.7] * 2, theta, model="band", backend="torch"
    )
    assert alloc.echoed.any() and not (alloc.exact | alloc.echoed).all(-1).all(-1).logical_not().any()
    torch.testing.assert_close(out, dense, atol=1e-5, rtol=1e-5)


def test_sparse_budget_one_equals_dense_and_echo_share_counts():
    g = torch.Generator().manual_seed(1)
    lay = Layout(frames=2, tokens_per_frame=40, block=16)
    q, k, v = (torch.randn(1, 2, 80, 8, generator=g) for _ in range(3))
    out, alloc = sparse_echo_attention(
        q, k, v, lay, [1.0] * 2, [0.0] * 2, identity_theta(2, lay, 8), backend="torch"
    )
    torch.testing.assert_close(
        out, torch.nn.functional.scaled_dot_product_attention(q, k, v), atol=1e-5, rtol=1e-5
    )
    assert not alloc.echoed.any()


def test_stage1_least_squares_recovers_known_theta():
    g = torch.Generator().manual_seed(0)
    h, m, b, d = 2, 30, 8, 4
    a, c, u, w = (
        torch.tensor([0.7, 1.3]),
        torch.randn(h, d, generator=g),
        torch.tensor([0.2, -0.1]),
        torch.tensor([0.5, 0.0]),
    )
    o_x, l_x = torch.randn(h, m, b, d, generator=g), torch.randn(h, m, b, generator=g)
    dist = torch.randint(1, 5, (m,), generator=g).float()
    o_y = a[:, None, None, None] * o_x + c[:, None, None, :]
    l_y = l_x + u[:, None, None] * dist[None, :, None] + w[:, None, None]
    stats = new_theta_stats(h, 3, d)
    accumulate_theta_stats(stats, 1, o_x, l_x, o_y, l_y, dist, torch.rand(h, m, b, generator=g))
    ta, tc, tu, tw = solve_theta(stats)
    for got, want in ((ta[:, 1], a), (tc[:, 1], c), (tu[:, 1], u), (tw[:, 1], w)):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert (ta[:, 0] == 1).all() and (tc[:, 0] == 0).all()  # no samples: identity


def test_static_routing_toy():
    # options: dense (err 0, cost 1), sparse (cost 0.25); head 0 has a large sparse error, head 1 near zero
    errors = torch.tensor([[0.0, 0.9], [0.0, 0.001]])
    costs = torch.tensor([[1.0, 0.25], [1.0, 0.25]])
    assert static_route(errors, costs, budget=0.7).tolist() == [0, 1]
    assert static_route(errors, costs, budget=0.25).tolist() == [1, 1]


def test_static_routing_splits_heads_and_fills_the_budget():
    # options: b/2, b, 2b; head 0's error falls steeply with cost, head 1's is flat
    costs = torch.tensor([[0.125, 0.25, 0.5], [0.125, 0.25, 0.5]])
    errors = torch.tensor([[0.40, 0.20, 0.05], [0.11, 0.10, 0.095]])
    choice = static_route(errors, costs, budget=0.3125)
    assert choice.tolist() == [2, 0]  # the steep head gets 2b, the flat one b/2: mean cost 0.3125
    # homogeneous heads with a convex error curve keep one option each, and the mean cost stays <= budget
    same = static_route(errors[:1].repeat(4, 1), costs[:1].repeat(4, 1), budget=0.25)
    assert float(costs[0, same].mean()) <= 0.25


def test_learned_routing_gradient_reaches_logits():
    g = torch.Generator().manual_seed(0)
    dense = [torch.randn(1, 2, 16, 4, generator=g)]
    sp, ec = [dense[0] + 0.5], [dense[0] + 0.1]
    cost = torch.tensor([[1.0, 0.25, 0.25], [1.0, 0.25, 0.25]])
    logits = torch.zeros(1, 2, 3, requires_grad=True)
    loss = mixture_loss(logits, [(dense, sp, ec, cost)], 0.25, 10.0, 1.0, g)
    loss.backward()
    assert logits.grad is not None and logits.grad.abs().sum() > 0


def _run_constant_qkv(seed=0, frames=4, tokens=32, block=16, pool=4, heads=2, d=8):
    """Q/K/V whose keys and values are constant over every run of ``block // pool`` tokens, so pooled keys and
    values equal the tokens they stand for."""
    g = torch.Generator().manual_seed(seed)
    s = frames * tokens
    q = torch.randn(1, heads, s, d, generator=g)
    k, v = (
        torch.randn(1, heads, s // (block // pool), d, generator=g).repeat_interleave(block // pool, 2)
        for _ in range(2)
    )
    return q, k, v


def test_pooled_echo_is_exact_when_runs_are_constant():
    from hf_ext.echo_attention.core import identity_theta

    lay = Layout(frames=4, tokens_per_frame=32, block=16)  # n_t = 8
    q, k, v = _run_constant_qkv()
    dense = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    # 0.26 of dense buys 16 exact tiles (2 per query tile), 0.69 the 6 others of each query tile as echo
    out, alloc = sparse_echo_attention(
        q, k, v, lay, [0.26] * 2, [0.69] * 2, identity_theta(2, lay, 8), pool=4, backend="torch"
    )
    assert (alloc.exact | alloc.echoed).all() and not (alloc.exact & alloc.echoed).any()
    torch.testing.assert_close(out, dense, atol=1e-5, rtol=1e-5)


def test_pooled_fit_finds_no_gap_when_runs_are_constant():
    from hf_ext.echo_attention.fit import pooled_stats

    lay = Layout(frames=3, tokens_per_frame=32, block=16)
    q, k, _ = _run_constant_qkv(frames=3)
    stats = new_theta_stats(2, 5, 8)
    pooled_stats(q, k, lay, 4, stats)
    a, c, u, w = solve_theta(stats)
    assert (a == 1).all() and (c == 0).all() and (u == 0).all()
    torch.testing.assert_close(w, torch.zeros_like(w), atol=1e-5, rtol=0)


def test_plan_tiles_static_widths_and_counted_flops():
    from hf_ext.echo_attention.allocation import plan_tiles, tile_counts

    lay = Layout(frames=4, tokens_per_frame=64, block=16)  # n_t = 16, S = 256
    d, pool = 8, 4
    n_ex, n_co = tile_counts(lay, d, [0.3, 0.5], [0.1, 0.0], pool)
    assert n_co[1] == 0 and n_co[0] > 0
    cost = flop_costs(lay, d, pool)
    assert n_ex[1] == (0.5 * cost["dense"] - cost["estimate"]) // cost["exact"]
    p_hat = torch.rand(2, 16, 16, generator=torch.Generator().manual_seed(0)).softmax(-1)
    widths = (-(-max(n_ex) // 16), max(n_co))
    alloc = plan_tiles(p_hat, lay, d, torch.tensor(n_ex), torch.tensor(n_co), widths, pool)
    assert alloc.lut.shape == (2, 16, widths[0]) and alloc.coarse_lut is not None
    assert alloc.exact.diagonal(dim1=-2, dim2=-1).all()
    assert alloc.exact.flatten(1).sum(-1).tolist() == n_ex
    assert alloc.echoed[0].sum(-1).eq(n_co[0]).all() and not alloc.echoed[1].any()
    assert not (alloc.exact & alloc.echoed).any()
    for row in range(16):  # the echoed tiles are the next of the ranking after the exact ones
        kept = p_hat[0, row][alloc.exact[0, row]].clone()
        kept[kept == p_hat[0, row, row]] = 1.0  # the diagonal is kept whatever its estimate
        assert p_hat[0, row][alloc.echoed[0, row]].max() <= kept.min() + 1e-7
        assert (
            p_hat[0, row][~alloc.exact[0, row] & ~alloc.echoed[0, row]].max()
            <= p_hat[0, row][alloc.echoed[0, row]].min()
        )
    expected = cost["estimate"] + cost["exact"] * n_ex[0] + cost["pool_keys"] + cost["coarse"] * 16 * n_co[0]
    assert float(alloc.flops[0]) == expected / cost["dense"]


@pytest.mark.parametrize("tokens", [64, 36])  # whole tiles, and a padded last tile per frame
def test_estimate_pass_equals_tile_mass_and_pooled_keys(tokens):
    from hf_ext.echo_attention.core import estimate, pooled_keys, tile_mass

    lay = Layout(frames=3, tokens_per_frame=tokens, block=16)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, lay.seq_len, 3, 2, 8, generator=g)  # diffusers layout [B, S, 3, H, D]
    q, k, v = (lay.pad(x[:, :, i].transpose(1, 2)) for i in range(3))
    p_hat, pooled = estimate(q, k, v, lay, pool=4)
    torch.testing.assert_close(p_hat, tile_mass(q, k, lay))
    for got, want in zip(pooled, pooled_keys(k, v, lay, 4)):
        torch.testing.assert_close(got, want)
    assert estimate(q, k, v, lay)[1] is None
