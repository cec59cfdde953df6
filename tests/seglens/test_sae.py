"""SparseAutoencoder: training invariants, variants, resampling, metrics, persistence and bad inputs."""

from __future__ import annotations

import pytest
import torch

from hf_ext.seglens import core
from hf_ext.seglens.config import InterventionConfig, SAEConfig
from hf_ext.seglens.sae import SparseAutoencoder


def _data(n: int = 2048, d: int = 8, n_atoms: int = 32, seed: int = 0) -> torch.Tensor:
    """Sparse non-negative mixtures of random unit atoms (k = 2 per row), plus an offset."""
    gen = torch.Generator().manual_seed(seed)
    atoms = core.unit_columns(torch.randn(d, n_atoms, generator=gen))
    codes = torch.zeros(n, n_atoms)
    idx = torch.randint(0, n_atoms, (n, 2), generator=gen)
    codes.scatter_(1, idx, torch.rand(n, 2, generator=gen) + 0.5)
    return codes @ atoms.T + 3.0


def test_batchtopk_fit_keeps_unit_columns_and_threshold_gives_l0_near_k():
    x = _data()
    sae = SparseAutoencoder(d_in=8, expansion=4, k=4, steps=300, batch_size=256)
    sae.fit(x)
    assert torch.allclose(sae.W_dec.norm(dim=0), torch.ones(32), atol=1e-5)
    z_train = sae.encode(x[:256], mode="batchtopk")
    assert int((z_train != 0).sum()) == 4 * 256
    m = sae.metrics(x)
    assert abs(m["l0"] - 4) <= 0.4  # threshold mode: within 10 % of k
    assert m["fvu"] < 0.5
    assert ((sae.encode(x, mode="topk") != 0).sum(1) == 4).all()


def test_every_step_keeps_columns_unit_and_gradient_orthogonal(monkeypatch):
    x = _data(512)
    sae = SparseAutoencoder(d_in=8, expansion=2, k=2, steps=0, batch_size=64).fit(x)
    seen = []
    real = core.remove_parallel_grad

    def spy(W, g):
        out = real(W, g)
        seen.append(float((out * W).sum(0).abs().max()))
        return out

    monkeypatch.setattr(core, "remove_parallel_grad", spy)
    sae.fit(x, steps=5)
    assert len(seen) == 5 and max(seen) < 1e-5
    assert torch.allclose(sae.W_dec.norm(dim=0), torch.ones(16), atol=1e-5)


def test_perfect_dictionary_round_trips_in_original_units():
    sae = SparseAutoencoder(d_in=2, expansion=2, k=1, variant="topk", steps=0)
    x = torch.tensor([[5.0, 1.0], [1.0, 5.0], [3.0, 3.0]])
    sae.fit(x)  # 0 steps: fits the normalisation only
    with torch.no_grad():
        sae.W_dec.copy_(torch.tensor([[1.0, 0.0, -1.0, 0.0], [0.0, 1.0, 0.0, -1.0]]))
        sae.W_enc.copy_(sae.W_dec.T)
        sae.b_enc.zero_()
        sae.b_dec.zero_()
    a = torch.tensor([[5.0, 3.0], [3.0, 1.0]])  # one axis off the mean each
    z = sae.encode(a)
    assert ((z != 0).sum(1) == 1).all()
    assert torch.allclose(sae.decode(z), a, atol=1e-5)


def test_l1_variant_loss_by_hand():
    x = _data(256)
    sae = SparseAutoencoder(d_in=8, expansion=2, k=2, variant="l1", l1_coeff=0.1, steps=0).fit(x)
    xb = (x - sae.mean) / sae.scale
    h = core.pre_codes(xb, sae.W_enc, sae.b_enc, sae.b_dec)
    recon = h @ sae.W_dec.T + sae.b_dec
    expected = (xb - recon).pow(2).mean() + 0.1 * h.sum(-1).mean()
    z = sae.encode(x)
    assert torch.equal(z, h.detach())
    manual = (xb - (z @ sae.W_dec.T + sae.b_dec)).pow(2).mean() + 0.1 * core.l1_penalty(z)
    assert manual.item() == pytest.approx(expected.item(), rel=1e-6)
    sae.fit(x, steps=50)
    assert sae.metrics(x)["fvu"] < 1.0


def test_dead_latents_are_resampled_and_fire_again():
    x = _data(1024)
    sae = SparseAutoencoder(
        d_in=8, expansion=4, k=4, steps=0, batch_size=128, dead_window=256, alpha_aux=0.0
    ).fit(x)
    with torch.no_grad():
        sae.b_enc[:6] = -100.0  # latents 0-5 can never fire
    sae.fit(x, steps=4)
    dead = sae.dead_latents()
    assert dead[:6].all()
    assert (sae.encode(x, mode="relu")[:, :6] == 0).all()
    assert sae.resample_dead(x) == int(dead.sum())
    assert not sae.dead_latents().any()
    assert (sae.encode(x, mode="relu")[:, :6] > 0).any(0).all()
    assert torch.allclose(sae.W_dec.norm(dim=0), torch.ones(32), atol=1e-5)


def test_resample_every_runs_inside_fit():
    x = _data(512)
    sae = SparseAutoencoder(d_in=8, expansion=4, k=2, steps=0, batch_size=64, dead_window=64).fit(x)
    with torch.no_grad():
        sae.b_enc[:4] = -100.0
    sae.config.resample_every = 3
    sae.fit(x, steps=3)
    assert (sae.b_enc[:4] > -100).all()


def test_save_pretrained_round_trip_is_exact(tmp_path):
    pytest.importorskip("safetensors")
    x = _data(512)
    sae = SparseAutoencoder(d_in=8, expansion=2, k=3, steps=20, batch_size=64, site="mid", model_id="unet")
    sae.fit(x)
    sae.save_pretrained(tmp_path / "sae")
    back = SparseAutoencoder.from_pretrained(tmp_path / "sae")
    assert back.site == "mid" and back.model_id == "unet" and back.config == sae.config
    for key, value in sae.state_dict().items():
        assert torch.equal(value, back.state_dict()[key]), key
    assert torch.equal(back.encode(x), sae.encode(x))
    with pytest.raises(FileNotFoundError, match="directory"):
        SparseAutoencoder.from_pretrained(tmp_path / "missing")


def test_unfitted_sae_raises():
    sae = SparseAutoencoder(d_in=4, k=2)
    with pytest.raises(RuntimeError, match="fit the SAE first"):
        sae.encode(torch.randn(2, 4))
    with pytest.raises(RuntimeError, match="fit the SAE first"):
        sae.save_pretrained("unused")


def test_bad_inputs_name_the_argument():
    sae = SparseAutoencoder(d_in=4, expansion=2, k=2, steps=2, batch_size=8).fit(torch.randn(16, 4))
    with pytest.raises(ValueError, match=r"sae.d_in = 4.*\(3, 5\)"):
        sae.encode(torch.randn(3, 5))
    bad = torch.randn(3, 4)
    bad[0, 0] = float("nan")
    bad[1, 2] = float("nan")
    with pytest.raises(ValueError, match="holds 2 NaN"):
        sae.encode(bad)
    with pytest.raises(ValueError, match="`x` holds 1 NaN"):
        SparseAutoencoder(d_in=4, k=2).fit(torch.tensor([[float("nan"), 0.0, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="mode"):
        sae.encode(torch.randn(3, 4), mode="soft")
    with pytest.raises(TypeError, match="either `config`"):
        SparseAutoencoder(SAEConfig(d_in=4, k=2), k=3)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"d_in": 4, "expansion": 2, "k": 8}, "k"),
        ({"d_in": 4, "k": 0}, "k"),
        ({"d_in": 0}, "d_in"),
        ({"d_in": 4, "k": 2, "variant": "gated"}, "variant"),
        ({"d_in": 4, "k": 2, "lr": 0.0}, "lr"),
        ({"d_in": 4, "k": 2, "threshold_beta": 1.0}, "threshold_beta"),
        ({"d_in": 4, "k": 2, "resample_every": -1}, "resample_every"),
    ],
)
def test_config_errors_name_the_field(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=f"`{name}`"):
        SAEConfig(**kwargs)


def test_config_defaults():
    cfg = SAEConfig(d_in=32)
    assert cfg.n_latents == 256 and cfg.k_aux == 16
    assert cfg.lr == pytest.approx(2e-4 / (256 / 2**14) ** 0.5)
    with pytest.raises(ValueError, match="`top_m`"):
        InterventionConfig(top_m=0)
    with pytest.raises(ValueError, match=r"`scales\[0\]`"):
        InterventionConfig(scales=[-1.0])
