"""The flow math on hand-computed cases: concentration, simulatability, rollout, value norms, ranks."""

from __future__ import annotations

import math

import pytest
import torch

from hf_ext.infoflow_uq import core


@pytest.mark.parametrize("kind", ["entropy", "gini"])
def test_concentration_uniform_is_zero_and_one_hot_is_one(kind):
    uniform = torch.full((3, 5), 0.2)
    one_hot = torch.zeros(3, 5).index_fill_(1, torch.tensor([2]), 1.0)
    assert core.flow_concentration(uniform, kind).item() == pytest.approx(0.0, abs=1e-6)
    assert core.flow_concentration(one_hot, kind).item() == pytest.approx(1.0, abs=1e-6)


def test_concentration_hand_values():
    c = torch.tensor([[0.5, 0.5, 0.0, 0.0]])
    assert core.flow_concentration(c, "entropy").item() == pytest.approx(1 - math.log(2) / math.log(4))
    # Gini of (0, 0, .5, .5): sum|xi - xj| / (2 n sum x) = 2 / 8 * ... = 0.5; scaled by 4/3
    assert core.flow_concentration(c, "gini").item() == pytest.approx(0.5 * 4 / 3)
    assert core.flow_concentration(torch.tensor([[0.1, 0.2, 0.3, 0.4]]), "topk_mass", 2).item() == (
        pytest.approx(0.7)
    )


def test_concentration_skips_layers_without_context_mass():
    c = torch.tensor([[math.nan, math.nan], [1.0, 0.0]])
    assert core.flow_concentration(c).item() == pytest.approx(1.0)


def test_simulatability_proportional_to_relevance_is_one():
    r = torch.tensor([0.0, 1.0, 3.0, 0.0, 2.0])
    c = (r + 0.5) / (r + 0.5).sum()
    assert core.flow_simulatability(c[None].repeat(2, 1), r).item() == pytest.approx(1.0, abs=1e-6)
    assert core.flow_simulatability(c[None], r, "spearman").item() == pytest.approx(1.0, abs=1e-6)
    assert core.flow_simulatability(c[None], -r + 3, "pearson").item() == pytest.approx(-1.0, abs=1e-6)


def test_simulatability_point_biserial_and_mass_by_hand():
    c = torch.tensor([[0.1, 0.6, 0.3]])
    r = torch.tensor([0.0, 1.0, 0.0])
    cc, rc = c[0] - c[0].mean(), r - r.mean()
    expected = float((cc * rc).sum() / (cc.norm() * rc.norm()))
    assert core.flow_simulatability(c, r).item() == pytest.approx(expected)
    assert core.flow_simulatability(c, r, "relevance_mass").item() == pytest.approx(0.6)


def test_spearman_ties_use_average_ranks():
    assert core._ranks(torch.tensor([3.0, 1.0, 3.0, 2.0])).tolist() == [3.5, 1.0, 3.5, 2.0]


@pytest.mark.parametrize("r", [torch.zeros(3), torch.full((3,), 0.5)])
def test_constant_relevance_is_nan_with_warning(r):
    with pytest.warns(RuntimeWarning, match="relevance"):
        assert math.isnan(core.flow_simulatability(torch.tensor([[0.2, 0.3, 0.5]]), r).item())


def test_rollout_of_identity_attention_is_identity():
    eye = torch.eye(4).expand(2, 4, 4)
    out = core.rollout_step(eye, eye[:, None].expand(2, 3, 4, 4))
    assert torch.equal(out, eye)


def test_rollout_step_by_hand():
    a = torch.tensor([[[[1.0, 0.0], [0.5, 0.5]]]])
    out = core.rollout_step(torch.eye(2)[None], a)
    # 0.5 * A + 0.5 * I = [[1, 0], [.25, .75]]; rows already sum to 1
    assert torch.allclose(out[0], torch.tensor([[1.0, 0.0], [0.25, 0.75]]))
    twice = core.rollout_step(out, a)
    assert torch.allclose(twice[0], torch.tensor([[1.0, 0.0], [0.25 + 0.75 * 0.25, 0.75 * 0.75]]))


def test_equal_value_norms_make_value_norm_rule_equal_attention():
    attn = torch.rand(1, 2, 3, 6).softmax(-1)
    norms = torch.full((1, 2, 6), 3.0)
    ctx = torch.tensor([False, True, True, True, False, True])
    vn, _ = core.restrict_to_context(core.contribution_rows(attn, "attention_value_norm", norms), ctx)
    at, _ = core.restrict_to_context(core.contribution_rows(attn, "attention"), ctx)
    assert torch.allclose(vn, at, atol=1e-6)


def test_restricted_rows_are_on_the_simplex_and_mass_is_the_context_share():
    rows = torch.rand(4, 3, 10)
    ctx = torch.zeros(10, dtype=torch.bool)
    ctx[2:7] = True
    c, mass = core.restrict_to_context(rows, ctx)
    assert c.shape == (4, 3, 5)
    assert torch.allclose(c.sum(-1), torch.ones(4, 3))
    assert (c >= 0).all()
    assert torch.allclose(mass, rows[..., 2:7].sum(-1) / rows.sum(-1))


def test_value_norms_match_a_loop_with_grouped_query_heads():
    torch.manual_seed(0)
    heads, kv, d, hidden, seq = 4, 2, 3, 5, 6
    values = torch.randn(2, seq, kv * d)
    w = torch.randn(hidden, heads * d)
    out = core.value_norms(values, w, heads)
    assert out.shape == (2, heads, seq)
    for b in range(2):
        for h in range(heads):
            g = h // (heads // kv)
            for j in range(seq):
                ref = (w[:, h * d : (h + 1) * d] @ values[b, j, g * d : (g + 1) * d]).norm()
                assert out[b, h, j] == pytest.approx(ref.item(), rel=1e-5)


def test_rank_average_and_nan():
    a = torch.tensor([0.1, 0.9, 0.5, math.nan])
    b = torch.tensor([4.0, 3.0, 2.0, 1.0])
    out = core.rank_average(a, b)
    # a ranks the finite three among themselves (1/3, 3/3, 2/3); b ranks all four
    assert out[:3].tolist() == pytest.approx([(1 / 3 + 4 / 4) / 2, (3 / 3 + 3 / 4) / 2, (2 / 3 + 2 / 4) / 2])
    assert math.isnan(out[3].item())


def test_baseline_scores_by_hand():
    logits = torch.log(torch.tensor([[0.5, 0.25, 0.25]]))
    assert core.max_probability(logits).item() == pytest.approx(0.5)
    expected = -(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25))
    assert core.predictive_entropy(logits).item() == pytest.approx(expected)
    assert core.lexical_relevance(
        torch.tensor([1, 2, 3]), torch.tensor([3, 1]), torch.tensor([1])
    ).tolist() == [
        0.0,
        0.0,
        1.0,
    ]


def test_relevance_checks_name_the_argument():
    with pytest.raises(ValueError, match="`relevance` must have shape"):
        core.flow_simulatability(torch.full((1, 3), 1 / 3), torch.ones(4))
    with pytest.raises(ValueError, match="`relevance` must hold finite values >= 0"):
        core.flow_simulatability(torch.full((1, 3), 1 / 3), torch.tensor([1.0, -1.0, 0.0]))


def test_context_mass_weights_each_layer_before_the_mean():
    c = torch.tensor([[0.5, 0.5, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    mass = torch.tensor([0.2, 0.6])
    # concentration per layer: 1 - log 2 / log 4 = 0.5, and 1; weighted: (0.2 * 0.5 + 0.6 * 1) / 2
    assert core.flow_concentration(c, context_mass=mass).item() == pytest.approx(0.35)
    r = torch.tensor([1.0, 0.0, 0.0, 0.0])
    # relevance mass per layer 0.5 and 1: the raw flow into the relevant token, 0.1 and 0.6, averaged
    assert core.flow_simulatability(c, r, "relevance_mass", mass).item() == pytest.approx(0.35)
    pearson = core.flow_simulatability(c[1:], r).item()  # one-hot row equal to r: 1
    assert pearson == pytest.approx(1.0)
    assert core.flow_simulatability(c[1:], r, context_mass=mass[1:]).item() == pytest.approx(0.6)


def test_context_mass_skips_nan_layers_and_full_mass_changes_nothing():
    c = torch.tensor([[math.nan, math.nan], [0.8, 0.2]])
    r = torch.tensor([1.0, 0.0])
    assert core.flow_simulatability(c, r, "relevance_mass", torch.tensor([0.0, 0.5])).item() == pytest.approx(
        0.4
    )
    ones = torch.ones(2)
    assert core.flow_concentration(c, context_mass=ones).item() == core.flow_concentration(c).item()


@pytest.mark.parametrize(
    ("mass", "match"),
    [
        (torch.ones(3), r"`context_mass` must hold one share per layer, shape \(2,\)"),
        (torch.tensor([0.5, 1.5]), r"`context_mass` must lie in \[0, 1\]"),
    ],
)
def test_bad_context_mass_names_the_argument(mass, match):
    with pytest.raises(ValueError, match=match):
        core.flow_concentration(torch.full((2, 2), 0.5), context_mass=mass)


def test_claim_conditioned_probability_by_hand():
    p = torch.tensor([[0.5, 0.2, 0.2, 0.1], [0.4, 0.3, 0.2, 0.1]])
    eq = torch.tensor([[1, 1, 0, -1], [1, -1, -1, 0]])
    # (0.5 + 0.2) / (0.5 + 0.2 + 0.1); 0.4 / (0.4 + 0.3 + 0.2)
    assert core.claim_conditioned_probability(p, eq).tolist() == pytest.approx([0.7 / 0.8, 0.4 / 0.9])
    assert core.claim_conditioned_probability(torch.tensor([0.3]), torch.tensor([1])).item() == 1.0


def test_alternative_equivalence_from_words():
    words = [" Rome", "Rome", " rom", "\n", " Romeo", " Paris", "."]
    assert core.alternative_equivalence(words).tolist() == [1, 1, 1, 0, 1, -1, 0]
    assert core.alternative_equivalence(["\n", " Paris", ","]).tolist() == [1, -1, 0]


@pytest.mark.parametrize(
    ("p", "eq", "match"),
    [
        (
            torch.ones(3),
            torch.ones(2, dtype=torch.long),
            "`probabilities` and `equivalence` must have the same",
        ),
        (torch.ones(2), torch.tensor([1, 2]), "`equivalence` must hold -1, 0 or 1, got"),
        (torch.ones(2), torch.tensor([0, 1]), r"`equivalence\[..., 0\]` must be 1"),
        (torch.tensor([0.5, -0.1]), torch.tensor([1, -1]), "`probabilities` must be finite and >= 0"),
    ],
)
def test_bad_claim_inputs_name_the_argument(p, eq, match):
    with pytest.raises(ValueError, match=match):
        core.claim_conditioned_probability(p, eq)
    with pytest.raises(ValueError, match="`words` must hold"):
        core.alternative_equivalence([])
