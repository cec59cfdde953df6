"""InformationFlowScorer end to end on tiny Llama / Qwen2 / Gemma3: reference trace, batching, bad inputs."""

from __future__ import annotations

import pytest
import torch

from hf_ext.testing import requires

pytestmark = requires("transformers")

RULES = ("attention_value_norm", "attention", "rollout")
IDS = torch.tensor([1, 5, 6, 7, 8, 9, 10, 11, 12])
CTX = torch.tensor([0, 1, 1, 1, 1, 1, 0, 0, 0]).bool()


def _model(arch="llama", impl="eager"):
    from hf_ext.testing import tiny_causal_lm

    return tiny_causal_lm(arch, attn_implementation=impl)


def _scorer(model, **kw):
    from hf_ext.infoflow_uq import InformationFlowScorer

    return InformationFlowScorer(model, **kw)


def _manual(model, ids, ctx, positions):
    """The trace recomputed from ``output_attentions`` and hooked ``v_proj`` outputs, layer by layer."""
    layers = model.model.layers
    values = {}
    handles = [
        layer.self_attn.v_proj.register_forward_hook(lambda m, a, o, i=i: values.__setitem__(i, o))
        for i, layer in enumerate(layers)
    ]
    with torch.no_grad():
        out = model(ids[None], output_attentions=True)
    for h in handles:
        h.remove()
    heads = model.config.num_attention_heads
    head_dim = layers[0].self_attn.o_proj.weight.shape[1] // heads
    kv = values[0].shape[-1] // head_dim
    result = {rule: [] for rule in RULES}
    roll = torch.eye(len(ids))
    for i, attn in enumerate(out.attentions):
        a = attn[0]  # [H, T, T]
        w = layers[i].self_attn.o_proj.weight
        norms = torch.zeros(heads, len(ids))
        for h in range(heads):
            g = h // (heads // kv)
            v = values[i][0, :, g * head_dim : (g + 1) * head_dim]
            norms[h] = (v @ w[:, h * head_dim : (h + 1) * head_dim].T).norm(dim=-1)
        mixed = 0.5 * a.mean(0) + 0.5 * torch.eye(len(ids))
        roll = (mixed / mixed.sum(-1, keepdim=True)) @ roll
        raw = {
            "attention": a.mean(0)[positions],
            "attention_value_norm": (a * norms[:, None, :]).sum(0)[positions],
            "rollout": roll[positions],
        }
        for rule, rows in raw.items():
            c = rows[:, ctx] / rows[:, ctx].sum(-1, keepdim=True)
            result[rule].append(c.mean(0))
    return {rule: torch.stack(rows) for rule, rows in result.items()}, out.logits[0, positions[0]]


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gemma3"])
def test_trace_equals_manual_computation(arch):
    model = _model(arch)
    scorer = _scorer(model, contribution=RULES)
    res = scorer.trace(IDS, CTX, [8, 7])
    ref, logits = _manual(model, IDS, CTX, [8, 7])
    for rule in RULES:
        assert res.traces[rule].shape == (2, int(CTX.sum()))
        assert torch.allclose(res.traces[rule], ref[rule], atol=1e-6), rule
        assert torch.allclose(res.traces[rule].sum(-1), torch.ones(2), atol=1e-6)
    probs = logits.softmax(-1)
    assert res.max_probability == pytest.approx(probs.max().item(), abs=1e-6)
    assert res.predicted_token == int(probs.argmax())
    assert 0.0 <= res.concentration() <= 1.0
    assert -1.0 <= res.simulatability([0, 1.0, 1.0, 0, 0]) <= 1.0
    assert 0.0 < res.attention_mass() < 1.0


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_batch_with_left_padding_equals_single_rows(arch):
    model = _model(arch)
    scorer = _scorer(model, contribution=RULES)
    ids = torch.tensor([[0, 0, 1, 5, 6, 7, 8, 9, 10], IDS.tolist()])
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1, 1], [1] * 9])
    ctx = torch.tensor([[0, 0, 0, 1, 1, 1, 0, 0, 0], CTX.tolist()]).bool()
    batch = scorer.trace_batch(ids, ctx, [[8], [8, 6]], attention_mask=mask)
    singles = [scorer.trace(ids[0, 2:], ctx[0, 2:], [6]), scorer.trace(IDS, CTX, [8, 6])]
    for got, want in zip(batch, singles):
        for rule in RULES:
            assert torch.allclose(got.traces[rule], want.traces[rule], atol=1e-5), rule
        assert got.max_probability == pytest.approx(want.max_probability, abs=1e-5)


def test_layer_subset_matches_the_full_trace():
    model = _model()
    full = _scorer(model, contribution=RULES).trace(IDS, CTX, [8])
    one = _scorer(model, contribution=RULES, layers=(-1,)).trace(IDS, CTX, [8])
    assert one.layers == (1,)
    for rule in RULES:
        assert torch.allclose(one.traces[rule], full.traces[rule][1:], atol=1e-6)


def test_sdpa_model_is_refused_and_switching_to_eager_works():
    model = _model(impl="sdpa")
    with pytest.raises(ValueError, match='attn_implementation="eager"'):
        _scorer(model)
    model.set_attn_implementation("eager")
    assert _scorer(model).trace(IDS, CTX, [8]).trace.shape == (2, 5)


def test_switching_away_from_eager_after_construction_is_caught():
    model = _model()
    scorer = _scorer(model)
    model.set_attn_implementation("sdpa")
    with pytest.raises(ValueError, match='attn_implementation="eager"'):
        scorer.trace(IDS, CTX, [8])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s: s.trace(IDS, CTX[:-1], [8]), "`context_mask` must have the shape"),
        (lambda s: s.trace(IDS, torch.zeros(9, dtype=torch.bool), [8]), "`context_mask` selects no"),
        (lambda s: s.trace(IDS, CTX, [9]), r"`answer_positions\[0\]` must be"),
        (lambda s: s.trace(IDS, CTX, []), r"`answer_positions\[0\]` must be"),
        (lambda s: s.trace(IDS, CTX, [8]).simulatability([1.0, 0.0]), "`relevance` must have shape"),
        (
            lambda s: s.trace(IDS, CTX, [8]).simulatability([1.0, -1.0, 0, 0, 0]),
            "`relevance` must hold finite values >= 0",
        ),
        (lambda s: s.trace(IDS, CTX, [8]).concentration("variance"), "`concentration` must be one of"),
        (lambda s: s.trace(IDS, CTX, [8]).simulatability([1.0, 0, 0, 0, 0], "kendall"), "`simulatability`"),
        (lambda s: s.trace(IDS, CTX, [8]).concentration(contribution="rollout"), "`contribution` must be"),
        (
            lambda s: s.trace_batch(
                torch.tensor([[0, 1, 5, 6], [1, 5, 6, 7]]), torch.ones(2, 4, dtype=torch.bool), [[3], [3]]
            ),
            "`attention_mask` is required",
        ),
    ],
)
def test_bad_inputs_name_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call(_scorer(_model()))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"contribution": "gradient"}, "`contribution` must be one of"),
        ({"concentration": "variance"}, "`concentration` must be one of"),
        ({"simulatability": "kendall"}, "`simulatability` must be one of"),
        ({"layers": (0, 2)}, r"`layers\[1\]` must be an int in \[-2, 1\]"),
        ({"top_k": 0}, "`top_k` must be an int >= 1"),
    ],
)
def test_bad_settings_name_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _scorer(_model(), **kwargs)


def test_unsupported_model_is_named():
    from hf_ext.infoflow_uq import InformationFlowScorer

    class Fake:
        class config:
            _attn_implementation = "eager"

    with pytest.raises(NotImplementedError, match="Fake is not supported"):
        InformationFlowScorer(Fake())


def test_grounded_scores_and_claim_probability_from_a_trace():
    from hf_ext.infoflow_uq import core

    res = _scorer(_model()).trace(IDS, CTX, [8])
    raw, mass = res.raw["attention_value_norm"], res.context_mass["attention_value_norm"]
    expected = core.flow_concentration(res.trace, context_mass=mass)
    assert res.concentration(context_mass=True) == pytest.approx(float(expected))
    r = torch.tensor([0.0, 1.0, 1.0, 0.0, 0.0])
    # grounded relevance mass = the raw row's share on the relevant tokens, layer mean
    flow = (raw[:, CTX] @ r / raw.sum(-1)).mean()
    assert res.simulatability(r, "relevance_mass", context_mass=True) == pytest.approx(float(flow), rel=1e-5)

    assert res.top_tokens.shape == res.top_probabilities.shape == (10,)
    assert int(res.top_tokens[0]) == res.predicted_token
    assert float(res.top_probabilities[0]) == pytest.approx(res.max_probability)

    class Words:  # the greedy token reads " Rome", the second "\n" (no claim), the rest other cities
        def decode(self, ids):
            return {int(res.top_tokens[0]): " Rome", int(res.top_tokens[1]): "\n"}.get(ids[0], " Paris")

    p = res.top_probabilities.double()
    assert res.claim_conditioned_probability(Words()) == pytest.approx(float(p[0] / (p[0] + p[2:].sum())))
