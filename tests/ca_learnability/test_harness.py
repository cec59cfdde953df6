"""The learnability harness end to end on tiny budgets, the five architectures, the config's bad inputs."""

from __future__ import annotations

import math

import pytest
import torch

from benchmarks.harness import pinned_threads
from hf_ext.ca_learnability.automata import life_like_rule, sample_rules
from hf_ext.ca_learnability.config import LearnabilityConfig
from hf_ext.ca_learnability.harness import learnability_study, train_and_evaluate
from hf_ext.ca_learnability.models import build_model
from hf_ext.testing import requires

LIFE = life_like_rule([3], [2, 3])


@pytest.mark.parametrize("arch", ["cnn", "mlp_patch", "mlp_global"])
@pytest.mark.parametrize("k", [1, 2])
def test_models_map_grids_to_logits(arch: str, k: int) -> None:
    model = build_model(arch, steps=k, grid=(8, 12))
    assert model(torch.zeros(3, 1, 8, 12)).shape == (3, 1, 8, 12)


@pytest.mark.parametrize("k", [1, 2])
def test_cnn_receptive_field_is_the_window(k: int) -> None:
    torch.manual_seed(0)
    for arch in ("cnn", "mlp_patch"):
        model = build_model(arch, steps=k, grid=(16, 16))
        x = torch.rand(1, 1, 16, 16, requires_grad=True)
        model(x)[0, 0, 8, 8].backward()
        touched = (x.grad[0, 0] != 0).nonzero()
        assert touched[:, 0].min() >= 8 - k and touched[:, 0].max() <= 8 + k, arch


@requires("timm")
def test_vit_shape_and_size() -> None:
    model = build_model("vit", grid=(16, 16))
    x = torch.zeros(2, 1, 16, 16)
    assert model.encoder(x).shape == (2, 256, 32)
    assert sum(p.numel() for p in model.encoder.parameters()) == 25_408
    assert model(x).shape == (2, 1, 16, 16)


@requires("timm")
@pytest.mark.parametrize("k", [1, 2])
def test_window_vit_sees_exactly_the_window_and_is_translation_equivariant(k: int) -> None:
    torch.manual_seed(0)
    model = build_model("vit_window", steps=k, grid=(9, 11))
    x = torch.rand(2, 1, 9, 11, requires_grad=True)
    out = model(x)
    assert out.shape == (2, 1, 9, 11)
    out[1, 0, 0, 5].backward()  # a top-row cell: its window wraps to the bottom rows
    touched = {tuple(ij) for ij in (x.grad[1, 0] != 0).nonzero().tolist()}
    assert touched == {(i % 9, j) for i in range(-k, k + 1) for j in range(5 - k, 6 + k)}
    assert not x.grad[0].any()
    shifted = torch.roll(x.detach(), (2, -3), dims=(2, 3))
    torch.testing.assert_close(model(shifted), torch.roll(out.detach(), (2, -3), dims=(2, 3)))
    zero = build_model("vit_window", steps=k, grid=(9, 11), boundary="zero")
    zero.load_state_dict(model.state_dict())
    assert not torch.allclose(zero(x)[:, :, 0], out[:, :, 0]) and torch.allclose(
        zero(x)[:, :, 4, 4], out[:, :, 4, 4]
    )


def test_circular_padding_is_translation_equivariant() -> None:
    torch.manual_seed(0)
    model = build_model("cnn", steps=1, grid=(10, 10))
    x = (torch.rand(1, 1, 10, 10) < 0.5).float()
    shifted = torch.roll(x, (3, -2), dims=(2, 3))
    assert torch.allclose(model(shifted), torch.roll(model(x), (3, -2), dims=(2, 3)), atol=1e-6)


def test_end_to_end_three_rules() -> None:
    rules = sample_rules(3, seed=0)
    with pinned_threads(1):
        rows = learnability_study(rules, ["cnn", "mlp_patch"], n_train=4, n_test=8, train_steps=20, seed=0)
    assert len(rows) == 6 and [r["arch"] for r in rows[:2]] == ["cnn", "mlp_patch"]
    for r in rows:
        assert 0 <= r["error"] <= 1 and 0 < r["majority_error"] < 0.6
        assert r["normalized_error"] == pytest.approx(r["error"] / r["majority_error"])
        assert r["train_seconds"] > 0 and math.isfinite(r["train_loss"])
    assert rows[0]["rule"] == "B3/S23" and rows[0]["as"] == pytest.approx(812 / 256)
    again = learnability_study(rules[:1], ["cnn"], n_train=4, n_test=8, train_steps=20, seed=0)
    assert again[0]["error"] == rows[0]["error"]  # seeded


def test_cnn_learns_life() -> None:
    with pinned_threads(1):
        out = train_and_evaluate(LIFE, "cnn", n_train=24, n_test=16, train_steps=200)
    assert out["normalized_error"] < 0.3  # well below the majority baseline


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="`arch` must be one of"):
        train_and_evaluate(LIFE, "resnet")
    with pytest.raises(ValueError, match="`n_train` must be an int >= 1, got 0"):
        train_and_evaluate(LIFE, "cnn", n_train=0)
    with pytest.raises(ValueError, match="`n_train`"):
        LearnabilityConfig(n_train=0)
    with pytest.raises(ValueError, match="`steps`"):
        LearnabilityConfig(steps=0)
    with pytest.raises(ValueError, match="`learning_rates key`"):
        LearnabilityConfig(learning_rates={"rnn": 1e-3})
    with pytest.raises(ValueError, match=r"`learning_rates\['cnn'\]`"):
        LearnabilityConfig(learning_rates={"cnn": 0.0})
    with pytest.raises(TypeError, match="`config`"):
        train_and_evaluate(LIFE, "cnn", config={"n_train": 2})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"`archs\[1\]`"):
        learnability_study([LIFE], ["cnn", "lstm"])
    with pytest.raises(ValueError, match="`rules`"):
        learnability_study([], ["cnn"])
    assert LearnabilityConfig(learning_rates={"cnn": 0.5}).lr("cnn") == 0.5
    assert LearnabilityConfig().lr("vit") == 3e-3
