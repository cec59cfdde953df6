"""Real-model loaders: checksum-verified cache (fast tests) and the real weights themselves (marked real)."""

from __future__ import annotations

import pytest
import torch

from hf_ext import assets
from hf_ext.testing import requires


def test_manifest_detects_corruption_and_partial_builds(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"0123456789")
    (tmp_path / "config.json").write_text("{}")
    assert assets.verify_manifest(tmp_path) == "no manifest (partial build)"
    assets.write_manifest(tmp_path)
    assert assets.verify_manifest(tmp_path) is None
    (tmp_path / "weights.bin").write_bytes(b"0123456788")
    assert assets.verify_manifest(tmp_path) == "weights.bin fails its SHA-256 check"
    (tmp_path / "weights.bin").write_bytes(b"01234")
    assert "weights.bin has 5 bytes, expected 10" in assets.verify_manifest(tmp_path)
    (tmp_path / "config.json").unlink()
    assert assets.verify_manifest(tmp_path) == "config.json is missing"


def test_cache_dir_honours_env(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_EXT_CACHE", str(tmp_path / "c"))
    assert assets.cache_dir() == tmp_path / "c" and (tmp_path / "c").is_dir()


def test_missing_extra_names_pip_line(monkeypatch):
    monkeypatch.setattr(assets, "require", _refuse)
    with pytest.raises(ImportError, match=r"pip install hf-ext\[gemma\]"):
        assets.gemma3_path()


def _refuse(extra: str, what: str) -> None:
    raise ImportError(f"{what} needs x; install it with `pip install hf-ext[{extra}]`.")


def test_english_texts_are_real_prose_and_code():
    texts = assets.english_texts()
    assert {"docs", "code"} <= set(texts)
    assert "JSON (JavaScript Object Notation)" in texts["docs"]
    assert "def " in texts["code"] and len(texts["code"]) > 50_000


@pytest.mark.slow
@pytest.mark.real
@requires("gemma", "transformers")
def test_gemma_loads_and_models_english():
    model, tok = assets.gemma3_270m()
    assert type(model).__name__ == "Gemma3ForCausalLM"
    assert sum(p.numel() for p in model.parameters()) == 268_098_176
    ids = tok(
        "The quick brown fox jumps over the lazy dog. Paris is the capital of France.", return_tensors="pt"
    ).input_ids
    with torch.no_grad():
        ppl = torch.exp(model(ids, labels=ids).loss).item()
    assert ppl < 40  # random weights give about 262k


@pytest.mark.slow
@pytest.mark.real
@requires("real-models", "timm")
def test_efficientnet_recognises_coffee():
    import timm
    from skimage import data

    net = assets.efficientnet_lite0()
    cfg = timm.data.resolve_data_config({}, model=net)
    transform = timm.data.create_transform(**cfg)
    from PIL import Image

    x = transform(Image.fromarray(data.coffee())).unsqueeze(0)
    with torch.no_grad():
        top = net(x).softmax(-1).argmax(-1).item()
    assert timm.data.ImageNetInfo().index_to_description(top).lower().startswith("espresso")


@pytest.mark.slow
@pytest.mark.real
@requires("real-models", "transformers")
def test_minilm_similarity_is_semantic():
    model, tok = assets.minilm()
    e = assets.embed(
        model, tok, ["A man is eating food.", "A man is eating a piece of bread.", "A man rides a horse."]
    )
    assert e.shape == (3, 384)
    assert float(e[0] @ e[1]) > 0.6 > float(e[0] @ e[2]) + 0.2


def test_corrupt_gemma_cache_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_EXT_CACHE", str(tmp_path))
    monkeypatch.setattr(assets, "require", lambda extra, what: None)
    built = []

    def fake_build(target):
        target.mkdir(exist_ok=True)
        (target / "model.safetensors").write_bytes(b"weights")
        assets.write_manifest(target)
        built.append(target)

    monkeypatch.setattr(assets, "_build_gemma", fake_build)
    path = assets.gemma3_path()
    assert len(built) == 1 and assets.verify_manifest(path) is None
    assets.gemma3_path()
    assert len(built) == 1, "a verified cache must not be rebuilt"
    (path / "model.safetensors").write_bytes(b"weightz")
    assets.gemma3_path()
    assert len(built) == 2, "a corrupt cache must be rebuilt"
