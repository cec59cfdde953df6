"""Fine-tuning recipes as timm tasks and the ``hf-ext timm-finetune`` command."""

from __future__ import annotations

import pytest
import torch

from hf_ext.testing import requires, tiny_timm_model

pytestmark = requires("timm", "metrics")


@pytest.mark.parametrize("recipe", ["plain", "augmix", "dem-hec", "pgd-ce", "random-ball"])
def test_every_recipe_trains_one_step(recipe):
    from hf_ext.dem_hec._pixels import mean_std
    from hf_ext.dem_hec.config import DemHECConfig
    from hf_ext.dem_hec.finetune import make_task, train_epoch

    model = tiny_timm_model("test_efficientnet", num_classes=3)
    before = [p.detach().clone() for p in model.parameters()]
    mean, std = mean_std(model)
    x, y = (torch.rand(4, 3, 32, 32) - mean) / std, torch.tensor([0, 1, 2, 0])
    task = make_task(recipe, model, config=DemHECConfig(steps=1))
    loss = train_epoch(task, [(x, y)], torch.optim.SGD(model.parameters(), lr=0.1))
    assert loss > 0 and any(not torch.equal(a, p) for a, p in zip(before, model.parameters()))
    if recipe in ("pgd-ce", "random-ball"):
        assert task.config.objective == ("ce" if recipe == "pgd-ce" else "entropy")
        assert task.config.steps == (1 if recipe == "pgd-ce" else 0)


def test_unknown_recipe():
    from hf_ext.dem_hec.finetune import make_task

    with pytest.raises(ValueError, match="`recipe` must be one of 'plain', 'augmix'"):
        make_task("mixup", tiny_timm_model("test_efficientnet", num_classes=3))


def _finetune(argv):
    from hf_ext.cli import main

    return main(["timm-finetune", *argv])


@pytest.mark.parametrize("recipe", ["dem-hec", "augmix"])
def test_command_writes_a_checkpoint_timm_loads(image_folder, tmp_path, recipe):
    import timm

    out = tmp_path / "out"
    argv = [
        "--model",
        "test_efficientnet",
        "--data-dir",
        str(image_folder),
        "--epochs",
        "1",
        "--batch-size",
        "4",
    ]
    argv += ["--img-size", "32", "--lr", "1e-3", "--output", str(out), "--recipe", recipe, "--steps", "1"]
    assert _finetune(argv) == 0
    model = timm.create_model(
        "test_efficientnet", num_classes=3, checkpoint_path=str(out / "model_best.pth.tar")
    )
    assert model.get_classifier().out_features == 3


def test_command_needs_a_data_dir(capsys):
    with pytest.raises(SystemExit):
        _finetune(["--model", "test_efficientnet"])
    assert "--data-dir" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.real
@requires("real-models", "timm", "metrics")
def test_command_fine_tunes_pretrained_efficientnet_lite0(image_folder, tmp_path):
    import timm

    out = tmp_path / "out"
    argv = ["--model", "efficientnet_lite0", "--pretrained", "--data-dir", str(image_folder), "--epochs", "1"]
    argv += ["--batch-size", "6", "--img-size", "48", "--output", str(out), "--freeze-bn-stats"]
    assert _finetune(argv) == 0
    model = timm.create_model("efficientnet_lite0", num_classes=3, checkpoint_path=str(out / "last.pth.tar"))
    assert model(torch.rand(1, 3, 48, 48)).shape == (1, 3)
