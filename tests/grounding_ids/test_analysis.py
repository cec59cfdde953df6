from types import SimpleNamespace

import pytest
import torch
from torch import nn

from hf_ext.grounding_ids.analysis import analysis_forward, binding_report, swap_hidden_states, swap_test
from hf_ext.grounding_ids.cues import GroundingCueOverlay
from hf_ext.grounding_ids.processor import CuedProcessor


def _hand_batch():
    # 8 image tokens (positions 0-7: partitions @ = 0-3, # = 4-7), then text: 8 = "@", 9 = "#", 10 = "?"
    parts = {"@": torch.arange(0, 4), "#": torch.arange(4, 8)}
    syms = {"@": torch.tensor([8]), "#": torch.tensor([9])}
    h = torch.zeros(1, 11, 3)
    h[0, :4, 0] = 1.0
    h[0, 4:8, 1] = 1.0
    h[0, 8, 0] = 2.0
    h[0, 9, 1] = 2.0
    h[0, 10, 2] = 1.0
    attn = torch.zeros(1, 2, 11, 11)
    attn[0, :, 8, 0:4] = 0.25  # @ looks only at partition @
    attn[0, 0, 9, 4:8] = 0.25  # head 0: # looks at partition #
    attn[0, 1, 9, 0:8] = 0.125  # head 1: # looks at all image tokens evenly
    out = SimpleNamespace(hidden_states=(h, h), attentions=(attn,))
    enc = {
        "input_ids": torch.tensor([[5] * 8 + [6, 7, 8]]),
        "partition_token_index": [parts],
        "symbol_token_index": [syms],
    }
    return out, enc


def test_binding_report_on_hand_states():
    out, enc = _hand_batch()
    rep = binding_report(out, enc)
    assert [r["layer"] for r in rep] == [0, 1]
    assert rep[1]["alignment_margin"] == pytest.approx(1.0)
    assert rep[1]["within_partition"] == pytest.approx(1.0)
    # image mean (0.5, 0.5, 0), text mean of unit vectors (1/3, 1/3, 1/3)
    assert rep[1]["modality_gap"] == pytest.approx(((1 / 6) ** 2 * 2 + (1 / 3) ** 2) ** 0.5)
    # matched mass: @ 1.0, # mean(1.0, 0.5) = 0.75 -> ratios 2.0 and 1.5 (chance 0.5); other: 0 and 0.25 / 0.5
    assert rep[1]["attention_matched"] == pytest.approx((2.0 + 1.5) / 2)
    assert rep[1]["attention_other"] == pytest.approx((0.0 + 0.5) / 2)
    assert rep[1]["attention_direction"] == "text->image"
    assert "attention_matched" not in rep[0]
    with pytest.raises(IndexError, match="`layers` entry 5"):
        binding_report(out, enc, layers=[5])


def test_binding_report_reverse_direction_when_text_comes_first():
    out, enc = _hand_batch()
    perm = torch.tensor([8, 9, 10, 0, 1, 2, 3, 4, 5, 6, 7])
    h = out.hidden_states[0][:, perm]
    attn = torch.zeros(1, 1, 11, 11)
    attn[0, 0, 3:7, 0] = 1.0  # partition @ tokens look at symbol @
    attn[0, 0, 7:11, 0] = 1.0  # partition # tokens also look at @
    out = SimpleNamespace(hidden_states=(h, h), attentions=(attn,))
    enc = {
        "input_ids": torch.tensor([[6, 7, 8] + [5] * 8]),
        "partition_token_index": [{"@": torch.arange(3, 7), "#": torch.arange(7, 11)}],
        "symbol_token_index": [{"@": torch.tensor([0]), "#": torch.tensor([1])}],
    }
    rep = binding_report(out, enc, layers=[1])[0]
    assert rep["attention_direction"] == "image->text"
    assert rep["attention_matched"] == pytest.approx((2.0 + 0.0) / 2)
    assert rep["alignment_margin"] == pytest.approx(1.0)


def test_binding_report_on_the_tiny_llava(vlm64):
    model, proc = vlm64
    overlay = GroundingCueOverlay(n_partitions=4, processed_size=64, patch_size=8, glyphs="bitmap")
    cued = CuedProcessor(proc, overlay)
    text = "<image> the image is divided into four rows marked @ # $ % . colour of row # ?"
    enc = cued(
        images=[torch.randint(0, 256, (3, 64, 64), dtype=torch.uint8)] * 2,
        text=[text] * 2,
        return_tensors="pt",
    )
    out = analysis_forward(model, cued.model_inputs(enc))
    rep = binding_report(out, enc)
    assert len(rep) == 3
    for row in rep:
        assert all(torch.isfinite(torch.tensor(v)) for k, v in row.items() if isinstance(v, float))
    assert rep[2]["attention_direction"] == "text->image"


def test_analysis_forward_needs_eager_attention():
    from hf_ext.grounding_ids.model import tiny_grounding_vlm

    model, _ = tiny_grounding_vlm(["a"], hidden_size=16, heads=2, attn_implementation="sdpa")
    with pytest.raises(ValueError, match='attn_implementation="eager"'):
        analysis_forward(model, {})


class _Layer(nn.Module):
    def forward(self, h):
        return (h + 0.0,)


class _Toy(nn.Module):
    """Logits at the last position = mean state of tokens 0-1 (the readout of partition @)."""

    def __init__(self):
        super().__init__()
        self.model = nn.Module()
        self.model.language_model = nn.Module()
        self.model.language_model.layers = nn.ModuleList([_Layer(), _Layer()])

    def forward(self, inputs_embeds):
        h = inputs_embeds
        for layer in self.model.language_model.layers:
            h = layer(h)[0]
        logits = h.clone()
        logits[:, -1] = h[:, 0:2].mean(1)
        return SimpleNamespace(logits=logits)


def test_swap_swaps_the_readout_exactly_and_removes_hooks():
    toy = _Toy()
    x = torch.zeros(3, 5, 4)
    x[:, 0:2, 0] = 1.0  # partition @ holds class 0
    x[:, 2:4, 1] = 1.0  # partition # holds class 1
    first, second = [torch.tensor([0, 1])] * 3, [torch.tensor([2, 3])] * 3
    assert toy(x).logits[:, -1].argmax(-1).tolist() == [0, 0, 0]
    assert swap_test(toy, {"inputs_embeds": x}, first, second, layer=0, expected=torch.ones(3)) == 1.0
    assert (
        swap_test(toy, {"inputs_embeds": x}, first, second, layer=1, expected=[1, 1, 1], candidates=[0, 1])
        == 1.0
    )
    with swap_hidden_states(toy, -1, first, second):
        swapped = toy(x).logits[:, -1]
    torch.testing.assert_close(swapped, x[:, 2:4].mean(1))
    assert all(not layer._forward_pre_hooks for layer in toy.model.language_model.layers)
    assert toy(x).logits[:, -1].argmax(-1).tolist() == [0, 0, 0]


def test_swap_bad_inputs():
    toy = _Toy()
    with pytest.raises(IndexError, match="`layer` 2"):
        with swap_hidden_states(toy, 2, [torch.tensor([0])], [torch.tensor([1])]):
            pass
    with pytest.raises(ValueError, match="equal token counts"):
        with swap_hidden_states(toy, 0, [torch.tensor([0, 1])], [torch.tensor([2])]):
            pass
    with pytest.raises(ValueError, match="decoder layers"):
        with swap_hidden_states(nn.Linear(2, 2), 0, [], []):
            pass


def test_tools_on_the_shared_tiny_llava():
    """The library's shared tiny LLaVA (sdpa, 16 image tokens at 1-16): hand-made token maps work, and
    attention maps are refused until the model runs eager attention."""
    from hf_ext.testing import tiny_llava

    model = tiny_llava()
    ids = torch.tensor([[1] + [63] * 16 + [5, 6, 7]])
    inputs = {"input_ids": ids, "pixel_values": torch.rand(1, 3, 32, 32)}
    enc = {
        **inputs,
        "partition_token_index": [{"@": torch.arange(1, 9), "#": torch.arange(9, 17)}],
        "symbol_token_index": [{"@": torch.tensor([17]), "#": torch.tensor([18])}],
    }
    with pytest.raises(ValueError, match="eager"):
        analysis_forward(model, inputs)
    rep = binding_report(analysis_forward(model, inputs, attentions=False), enc)
    assert len(rep) == 3
    assert all(torch.isfinite(torch.tensor(r["alignment_margin"])) for r in rep)
    first, second = [torch.arange(1, 9)], [torch.arange(9, 17)]
    with torch.no_grad():
        plain = model(**inputs).logits
        with swap_hidden_states(model, 0, first, second):
            swapped = model(**inputs).logits
        again = model(**inputs).logits
    assert not torch.allclose(plain, swapped)
    assert torch.equal(plain, again)  # hook removed
