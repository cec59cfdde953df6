"""DemHECTask: timm task contract, parity with ClassificationTask, end-to-end steps, bad inputs."""

from __future__ import annotations

import copy

import pytest
import torch

from hf_ext.testing import requires, tiny_timm_model

pytestmark = requires("timm", "metrics")


def _batch(n=4, size=32):
    g = torch.Generator().manual_seed(0)
    return torch.rand(n, 3, size, size, generator=g), torch.arange(n) % 3


def test_method_off_equals_classification_task():
    from timm.task import ClassificationTask

    from hf_ext.dem_hec import DemHECTask

    model = tiny_timm_model("test_resnet", num_classes=3)
    x, y = _batch()
    ours = DemHECTask(model, he_ce_weight=0, contrastive_weight=0, distill_weight=0, verbose=False)
    ref = ClassificationTask(copy.deepcopy(model), verbose=False)
    ours.train(), ref.train()
    torch.testing.assert_close(ours(x, y)["loss"], ref(ours.normalize(x), y)["loss"])


def test_two_steps_change_weights_and_report_every_term():
    from hf_ext.dem_hec import DemHECTask

    model = tiny_timm_model("test_efficientnet", num_classes=3)
    before = copy.deepcopy(model.state_dict())
    task = DemHECTask(model, steps=1, verbose=False).train()
    opt = torch.optim.SGD(task.get_trainable_module().parameters(), lr=0.1)
    x, y = _batch(8)
    for _ in range(2):
        out = task(x, y)
        opt.zero_grad()
        out["loss"].backward()
        opt.step()
    assert set(out) == {"loss", "output", "ce_clean", "ce_he", "con_loss", "kd_loss", "he_entropy"}
    assert torch.isfinite(out["loss"]) and out["output"].shape == (8, 3)
    assert all(float(out[k]) > 0 for k in ("ce_he", "con_loss", "he_entropy"))
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in task.teacher.parameters())


def test_teacher_is_a_frozen_distinct_snapshot_and_kd_starts_at_zero():
    from hf_ext.dem_hec import DemHECTask

    model = tiny_timm_model("test_vit", num_classes=3, img_size=32)
    task = DemHECTask(model, steps=1, he_ce_weight=0, contrastive_weight=0, verbose=False)
    ptrs = {p.data_ptr() for p in model.parameters()}
    assert not ptrs & {p.data_ptr() for p in task.teacher.parameters()}
    assert not any(p.requires_grad for p in task.teacher.parameters())
    assert task.get_trainable_module() is model
    task.eval()
    assert float(task(*_batch())["kd_loss"]) == pytest.approx(0.0, abs=1e-6)
    task.train()
    assert not task.teacher.training


def test_checkpoint_state_round_trips_with_teacher():
    from hf_ext.dem_hec import DemHECTask

    a = DemHECTask(tiny_timm_model("test_resnet", num_classes=3), steps=1, verbose=False)
    b = DemHECTask(tiny_timm_model("test_resnet", seed=5, num_classes=3), steps=1, verbose=False)
    state = a.get_checkpoint_state()
    b.load_checkpoint_state(state["state_dict"], state["task_state"])
    x, y = _batch()
    a.eval(), b.eval()
    torch.testing.assert_close(b.trainable_module(x), a.trainable_module(x))
    torch.testing.assert_close(b.teacher(x), a.teacher(x))


def test_prepare_distributed_wraps_only_the_student(monkeypatch):
    import torch.nn.parallel as parallel

    from hf_ext.dem_hec import DemHECTask

    class FakeDDP(torch.nn.Module):
        def __init__(self, module, **kw):
            super().__init__()
            self.module = module

        def forward(self, *a, **k):
            return self.module(*a, **k)

    monkeypatch.setattr(parallel, "DistributedDataParallel", FakeDDP)
    task = DemHECTask(tiny_timm_model("test_resnet", num_classes=3), steps=1, verbose=False)
    teacher = task.teacher
    task.prepare_distributed()
    assert isinstance(task.trainable_module, FakeDDP) and task.teacher is teacher
    out = task.train()(*_batch())
    assert torch.isfinite(out["loss"])


def test_normalized_input_space_matches_pixel_space():
    from hf_ext.dem_hec import DemHECTask

    model = tiny_timm_model("test_resnet", num_classes=3)
    pix = DemHECTask(model, steps=1, distill_weight=0, verbose=False).eval()
    nrm = DemHECTask(model, steps=1, distill_weight=0, input_space="normalized", verbose=False).eval()
    x, y = _batch()
    torch.manual_seed(0)
    a = pix(x, y)["ce_clean"]
    torch.manual_seed(0)
    b = nrm(pix.normalize(x), y)["ce_clean"]
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"eps": 0}, r"`eps` must be a finite float > 0, got 0"),
        ({"steps": -1}, r"`steps` must be an int >= 0, got -1"),
        ({"steps": 0}, r"allow_random=True"),
        ({"step_size": -0.1}, r"`step_size` must be a finite float > 0, got -0.1"),
        ({"norm": "l1"}, r"`norm` must be one of 'linf', 'l2', got 'l1'"),
        ({"objective": "kl"}, r"`objective` must be one of 'entropy', 'ce', got 'kl'"),
        ({"feature_entropy": "mean"}, r"`feature_entropy` must be one of 'token', 'pooled', None"),
        ({"input_space": "rgb"}, r"`input_space` must be one of 'pixel', 'normalized'"),
        ({"distill_temperature": 0}, r"`distill_temperature` must be a finite float > 0, got 0"),
        ({"contrastive_weight": -1}, r"`contrastive_weight` must be a finite float >= 0, got -1"),
    ],
)
def test_bad_config(kwargs, match):
    from hf_ext.dem_hec import DemHECConfig

    with pytest.raises(ValueError, match=match):
        DemHECConfig(**kwargs)
    with pytest.raises(TypeError, match="`steps` must be an int >= 0, got 2.5"):
        DemHECConfig(steps=2.5)


def test_bad_inputs():
    from hf_ext.dem_hec import DemHECTask

    model = tiny_timm_model("test_resnet", num_classes=3)
    task = DemHECTask(model, steps=1, verbose=False)
    x, y = _batch()
    with pytest.raises(ValueError, match=r"expects images in \[0, 1\], found values in \[-2"):
        task(x * 4 - 2, y)
    with pytest.raises(ValueError, match="batch of at least 2, got 1"):
        task(x[:1], y[:1])
    with pytest.raises(ValueError, match="soft or multi-label targets"):
        task(x, torch.nn.functional.one_hot(y, 3).float())
    with pytest.raises(ValueError, match="shares parameters with the student"):
        DemHECTask(model, teacher=model, verbose=False)
    with pytest.raises(ValueError, match="either `config` or its fields"):
        from hf_ext.dem_hec import DemHECConfig

        DemHECTask(model, DemHECConfig(), steps=2, verbose=False)
    with pytest.raises(TypeError, match="needs a timm model with `forward_intermediates`"):
        DemHECTask(torch.nn.Linear(3, 3), verbose=False)


def test_timm_loader_evaluator_and_checkpoint_end_to_end(image_folder):
    """timm's dataset, normalising loader, evaluator and checkpoint: the input space comes from the data
    config and the eval model takes what the loader yields."""
    import timm
    from timm.data import create_dataset, create_loader, resolve_data_config

    from hf_ext.dem_hec import DemHECTask

    model = tiny_timm_model("test_efficientnet", num_classes=3)
    cfg = resolve_data_config({"img_size": 32}, model=model)
    kw = dict(
        input_size=cfg["input_size"], batch_size=4, mean=cfg["mean"], std=cfg["std"], use_prefetcher=False
    )
    train = create_loader(create_dataset("", root=str(image_folder), split="train"), is_training=True, **kw)
    val = create_loader(create_dataset("", root=str(image_folder), split="validation"), **kw)
    task = DemHECTask(model, steps=1, data_config=cfg, verbose=False)
    assert task.input_space == "normalized"
    opt = torch.optim.SGD(task.get_trainable_module().parameters(), lr=0.01)
    task.train()
    for x, y in train:
        assert float(x.min()) < 0  # normalised batches
        out = task(x, y)
        opt.zero_grad()
        out["loss"].backward()
        opt.step()
    eval_model, evaluator = task.get_eval_model(), task.create_evaluator()
    assert eval_model is model
    eval_model.eval()
    with torch.no_grad():
        for x, y in val:
            evaluator.update(eval_model(x), y)
    assert 0 <= evaluator.compute()["top1"] <= 100
    state = task.get_checkpoint_state()
    reloaded = timm.create_model("test_efficientnet", num_classes=3)
    reloaded.load_state_dict(state["state_dict"])


def test_pixel_task_eval_model_normalises_and_checkpoints_the_student():
    from hf_ext.dem_hec import DemHECTask

    model = tiny_timm_model("test_resnet", num_classes=3)
    task = DemHECTask(model, steps=1, verbose=False).eval()
    assert task.input_space == "pixel"
    x, _ = _batch()
    with torch.no_grad():
        torch.testing.assert_close(task.get_eval_model()(x), model(task.normalize(x)))
    assert set(task.get_checkpoint_state()["state_dict"]) == set(model.state_dict())
