import numpy as np
import pytest
import torch
from PIL import Image

from hf_ext.grounding_ids.cues import GroundingCueOverlay
from hf_ext.grounding_ids.processor import EXTRA_KEYS, CuedProcessor

PROMPT = "<image> the image is divided into four rows marked @ # $ % . colour of row # ?"


def _cued(proc, **kw):
    overlay = GroundingCueOverlay(n_partitions=4, processed_size=64, patch_size=8, glyphs="bitmap", **kw)
    return CuedProcessor(proc, overlay, adapter="llava")


def _image(h=64, w=64, seed=0):
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8))


def test_output_equals_the_wrapped_processor_on_the_overlaid_image(vlm64):
    _, proc = vlm64
    cued = _cued(proc)
    img = _image(80, 96)
    enc = cued(images=img, text=PROMPT, return_tensors="pt")
    overlaid, _ = cued.cue(img)
    ref = proc(images=overlaid, text=PROMPT, return_tensors="pt")
    assert set(ref) <= set(enc) and set(enc) - set(ref) == set(EXTRA_KEYS)
    for key in ref:
        assert torch.equal(enc[key], ref[key]), key
    assert not torch.equal(
        enc["pixel_values"], proc(images=img, text=PROMPT, return_tensors="pt")["pixel_values"]
    )


def test_token_maps_by_hand(vlm64):
    _, proc = vlm64
    enc = _cued(proc)(images=_image(), text=PROMPT, return_tensors="pt")
    ids = enc["input_ids"][0]
    first = int((ids == proc.image_token_id).nonzero()[0])
    assert first == 0 and int((ids == proc.image_token_id).sum()) == 65
    # CLS at position 0; partition p = patch rows 2p, 2p+1 = positions 1 + 16 p .. 16 + 16 p
    maps = enc["partition_token_index"][0]
    assert {s: v.tolist() for s, v in maps.items()} == {
        s: list(range(1 + 16 * p, 17 + 16 * p)) for p, s in enumerate("@#$%")
    }
    words = PROMPT.split()
    sym = enc["symbol_token_index"][0]
    # "@ # $ %" in the hint, "#" again in the question; text position = word index - 1 + 65
    assert sym["@"].tolist() == [words.index("@") - 1 + 65]
    assert sym["#"].tolist() == [
        words.index("#") - 1 + 65,
        len(words) - 3 + 65,
    ]  # "#" is the second-last word


def test_model_accepts_model_inputs_and_clean_processor_keeps_pixels(vlm64):
    model, proc = vlm64
    clean = CuedProcessor(proc, None, adapter="auto", config=_cued(proc).config)
    img = _image()
    enc = clean(images=img, text=PROMPT, return_tensors="pt")
    assert torch.equal(enc["pixel_values"], proc(images=img, return_tensors="pt")["pixel_values"])
    out = model(**clean.model_inputs(enc))
    assert out.logits.shape[:2] == enc["input_ids"].shape


def test_prompt_fills_symbols_and_delegates(vlm64, tmp_path):
    _, proc = vlm64
    cued = _cued(proc)
    assert cued.prompt("Describe the {symbols} rows.") == (
        "The image is divided into 4 rows marked @ # $ % . Describe the @ # $ % rows."
    )
    assert cued.tokenizer is proc.tokenizer
    cued.save_pretrained(tmp_path)
    from transformers import LlavaProcessor

    again = LlavaProcessor.from_pretrained(tmp_path)
    assert again.patch_size == proc.patch_size and again.num_additional_image_tokens == 1


def test_tensor_batch(vlm64):
    _, proc = vlm64
    imgs = [torch.randint(0, 256, (3, 64, 64), dtype=torch.uint8) for _ in range(2)]
    enc = _cued(proc)(images=imgs, text=[PROMPT, PROMPT], return_tensors="pt")
    assert enc["pixel_values"].shape == (2, 3, 64, 64) and len(enc["partition_token_index"]) == 2


def test_bad_inputs(vlm64):
    _, proc = vlm64
    with pytest.raises(ValueError, match="`adapter`"):
        CuedProcessor(proc, adapter="idefics9")
    with pytest.raises(ValueError, match="pass `adapter=`"):
        CuedProcessor(proc.image_processor)
    with pytest.raises(ValueError, match=r"lacks the tokens of symbol\(s\) \$ %"):
        _cued(proc)(images=_image(), text="<image> colour of row @ # ?", return_tensors="pt")
    with pytest.raises(ValueError, match="`text` must hold one prompt per image"):
        _cued(proc)(images=[_image(), _image()], text=[PROMPT], return_tensors="pt")
    with pytest.raises(ValueError, match="`images`"):
        _cued(proc)(text=PROMPT)
