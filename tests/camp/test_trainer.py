"""``CAMPTrainer`` on a tiny Llama: reference paths, parity with stock DPO, accumulation, resume, save."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

from hf_ext.testing import requires

pytestmark = requires("trl")


class GradRecorder:
    """Trainer callback keeping a copy of every parameter's gradient right before each optimizer step."""

    def __init__(self, trainer_ref: list[Any] | None = None) -> None:
        from transformers import TrainerCallback

        self.grads: list[dict[str, Any]] = []
        self.metric_counts: list[int] = []
        self.trainer_ref = trainer_ref
        outer = self

        class _CB(TrainerCallback):
            def on_pre_optimizer_step(
                self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any
            ) -> None:
                outer.grads.append(
                    {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
                )
                if outer.trainer_ref:
                    outer.metric_counts.append(
                        len(outer.trainer_ref[0]._metrics["train"]["camp/conflict_frac"])
                    )

        self.callback = _CB()


def _params(model: Any) -> dict[str, Any]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def _assert_same(a: dict[str, Any], b: dict[str, Any], atol: float = 1e-6) -> None:
    import torch

    assert a.keys() == b.keys() and a
    for name in a:
        torch.testing.assert_close(
            a[name], b[name], atol=atol, rtol=0, msg=lambda m, name=name: f"{name}: {m}"
        )


def _camp(model: Any, args: Any, ds: Any, tok: Any, **kw: Any) -> Any:
    from hf_ext import CAMPTrainer

    kw.setdefault("ref_model", copy.deepcopy(model))
    return CAMPTrainer(model=model, args=args, train_dataset=ds, processing_class=tok, **kw)


def _logged(trainer: Any, key: str) -> list[float]:
    return [h[key] for h in trainer.state.log_history if key in h]


@pytest.mark.parametrize("ref_path", ["ref_model", "precompute", "peft"])
def test_end_to_end_reference_paths(
    ref_path: str, tok: Any, make_model: Any, camp_dataset: Any, make_args: Any
) -> None:
    model = make_model()
    kw: dict[str, Any] = {}
    overrides: dict[str, Any] = {"per_device_train_batch_size": 8}
    if ref_path == "precompute":
        kw["ref_model"] = None
        overrides["precompute_ref_log_probs"] = True
    elif ref_path == "peft":
        pytest.importorskip("peft")
        from peft import LoraConfig

        kw.update(
            ref_model=None, peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
        )
    trainer = _camp(model, make_args(**overrides), camp_dataset, tok, **kw)
    before = _params(trainer.model)
    out = trainer.train()
    after = _params(trainer.model)
    changed = [n for n in before if not (before[n] == after[n]).all()]
    assert changed and (ref_path != "peft" or all("lora_" in n for n in changed))
    assert math.isfinite(out.training_loss) and out.global_step == 2
    # the two batches of 8 cover the 16 rows once; 4 of them are in conflict
    assert sum(_logged(trainer, "camp/conflict_frac")) / 2 == pytest.approx(0.25)
    assert _logged(trainer, "camp/margin_mean") and _logged(trainer, "rewards/margins_consistent")


def _recorded_run(trainer_cls: Any, model: Any, args: Any, ds: Any, tok: Any) -> tuple[Any, GradRecorder]:
    rec = GradRecorder()
    trainer = trainer_cls(
        model=model,
        ref_model=copy.deepcopy(model),
        args=args,
        train_dataset=ds,
        processing_class=tok,
        callbacks=[rec.callback],
    )
    trainer.train()
    return trainer, rec


@pytest.mark.parametrize(
    "camp_kw",
    [
        {"camp_gamma": 0.0, "camp_conflict_loss": "sigmoid"},
        {"camp_mode": "off"},
        {"camp_mode": "weight", "camp_conflict_weight": 1.0},
    ],
)
def test_parity_with_stock_dpo_sigmoid(
    camp_kw: dict[str, Any], tok: Any, make_model: Any, camp_dataset: Any, make_args: Any
) -> None:
    """With the CAMP term off, loss, every gradient and the logged rewards equal DPOTrainer's over 2 steps."""
    from trl import DPOConfig, DPOTrainer

    from hf_ext import CAMPConfig, CAMPTrainer

    dpo, dpo_rec = _recorded_run(DPOTrainer, make_model(), make_args(DPOConfig), camp_dataset, tok)
    camp, camp_rec = _recorded_run(
        CAMPTrainer, make_model(), make_args(CAMPConfig, **camp_kw), camp_dataset, tok
    )
    assert len(dpo_rec.grads) == len(camp_rec.grads) == 2
    for g_dpo, g_camp in zip(dpo_rec.grads, camp_rec.grads):
        _assert_same(g_dpo, g_camp)
    for key in (
        "loss",
        "rewards/chosen",
        "rewards/rejected",
        "rewards/accuracies",
        "rewards/margins",
        "logps/chosen",
    ):
        assert _logged(camp, key) == pytest.approx(_logged(dpo, key), abs=1e-6), key
    _assert_same(_params(dpo.model), _params(camp.model))


def test_margin_equals_dpo_with_shifted_reference(
    tok: Any, make_model: Any, camp_dataset: Any, make_args: Any
) -> None:
    """CAMP margin loss = stock DPO loss with each row's ref_chosen_logps shifted by +m/beta."""
    import torch
    from trl import DPOConfig, DPOTrainer

    from hf_ext import CAMPConfig
    from hf_ext.camp.core import camp_conflict, camp_margin

    kw = dict(max_steps=1, precompute_ref_log_probs=True, beta=0.5)
    rec_camp = GradRecorder()
    camp = _camp(
        make_model(),
        make_args(CAMPConfig, camp_gamma=0.7, camp_conflict_loss="sigmoid", **kw),
        camp_dataset,
        tok,
        ref_model=None,
        callbacks=[rec_camp.callback],
    )
    camp.train()

    rec_dpo = GradRecorder()
    dpo = DPOTrainer(
        model=make_model(),
        args=make_args(DPOConfig, **kw),
        train_dataset=camp_dataset,
        processing_class=tok,
        callbacks=[rec_dpo.callback],
    )
    t, h = (torch.tensor(camp_dataset[k], dtype=torch.float64) for k in ("truth_margin", "help_margin"))
    shift = camp_margin(t, h, camp_conflict(t, h), gamma=0.7) / 0.5
    ds = dpo.train_dataset
    shifted = [r + s for r, s in zip(ds["ref_chosen_logps"], shift.tolist())]
    dpo.train_dataset = ds.remove_columns("ref_chosen_logps").add_column("ref_chosen_logps", shifted)
    dpo.train()
    assert _logged(camp, "loss") == pytest.approx(_logged(dpo, "loss"), abs=1e-6)
    _assert_same(rec_camp.grads[0], rec_dpo.grads[0])


def _softplus(x: float) -> float:
    return math.log1p(math.exp(x))


@pytest.mark.parametrize(
    ("camp_kw", "hand_loss"),
    [
        # At the start the policy is its reference, so z = beta * delta = 0 on every pair. The four pairs have
        # (t, h) = (1, 1), (0.5, 0), (-1, 1), (0.25, 0.75); only the third is in conflict. With gamma = 1 and
        # (w_T, w_H) = (1, 0) the margins are m = (1, 0.25, -1, 0.5), and -log sigmoid(0 - m) = softplus(m).
        (
            {"camp_conflict_loss": "sigmoid"},
            (_softplus(1) + _softplus(0.25) + _softplus(-1) + _softplus(0.5)) / 4,
        ),
        # the conflict pair takes the two-sided loss: -sigmoid(m) log(1/2) - sigmoid(-m) log(1/2) = log 2
        (
            {"camp_conflict_loss": "soft_label"},
            (_softplus(1) + _softplus(0.25) + math.log(2) + _softplus(0.5)) / 4,
        ),
        # weights (1, 1, omega, 1) on -log sigmoid(0) = log 2
        ({"camp_mode": "weight", "camp_conflict_weight": 0.5}, 3.5 * math.log(2) / 4),
    ],
    ids=["one_sided", "soft_label", "weight"],
)
def test_loss_and_gradients_match_core_camp_loss(
    camp_kw: dict[str, Any], hand_loss: float, tok: Any, make_model: Any, camp_dataset: Any, make_args: Any
) -> None:
    """The trl hook path (shifted reference + correction from trl's forward) is ``core.camp_loss``.

    The reference side computes the log-ratios from plain logits, independently of trl, and feeds them to
    ``camp_loss``. Loss, every gradient and the logged rewards agree at the start (z = 0, where the loss is
    the hand value above) and after one gradient step (z != 0). The reference side runs in float64; trl's
    fused LM head returns float32 log-probs, hence the 1e-6 tolerances.
    """
    import torch

    from hf_ext.camp.core import camp_loss

    beta = 0.5
    args = make_args(beta=beta, camp_gamma=1.0, camp_weights=[1.0, 0.0], **camp_kw)
    trainer = _camp(make_model().double(), args, camp_dataset.select(range(4)), tok)
    batch = next(iter(trainer.get_train_dataloader()))  # the 4 pairs, in some order
    model = trainer.model.train()

    def logps(net: Any) -> Any:
        ids, completion = batch["input_ids"], batch["completion_mask"][:, 1:]
        logits = net(input_ids=ids, attention_mask=batch["attention_mask"]).logits[:, :-1]
        per_token = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        return (per_token * completion).sum(dim=1)

    for step in range(2):
        loss = trainer.compute_loss(model, batch)
        loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        model.zero_grad()

        with torch.no_grad():
            ref_logps = logps(trainer.ref_model)
        chosen, rejected = (logps(model) - ref_logps).chunk(2)
        expected, aux = camp_loss(
            chosen,
            rejected,
            batch["truth_margin"],
            batch["help_margin"],
            beta=beta,
            gamma=1.0,
            weights=(1.0, 0.0),
            mode=args.camp_mode,
            conflict_loss=args.camp_conflict_loss,
            conflict_weight=args.camp_conflict_weight,
        )
        expected.backward()
        expected_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        model.zero_grad()

        z = aux["logits"].detach()
        if step == 0:
            assert loss.item() == pytest.approx(hand_loss, abs=1e-6)
            assert z.abs().max().item() < 1e-6
        else:
            assert z.abs().min().item() > 1e-3  # the step moved every pair
        assert loss.item() == pytest.approx(expected.item(), abs=1e-6)
        _assert_same(grads, expected_grads, atol=1e-6)
        metrics = trainer._metrics["train"]
        assert metrics["rewards/margins"][-1] == pytest.approx(z.mean().item(), abs=1e-6)
        assert metrics["rewards/accuracies"][-1] == (z > 0).double().mean().item()
        with torch.no_grad():
            for name, param in model.named_parameters():
                if name in grads:
                    param -= 10.0 * grads[name]


def test_completion_logps_from_log_probs_or_logits() -> None:
    """The policy log-probs read from trl's forward: per-token ``log_probs`` (trl >= 1.15) or ``logits``.

    One row of 3 tokens, completion = the last 2; vocabulary of 2 with logits (0, 0), then (0, log 3): the
    completion tokens 1 and 0 have log-probs log(1/2) and log(1/4). Prompt-learning PEFT's 2 virtual positions
    in front are ignored.
    """
    from types import SimpleNamespace

    import torch

    from hf_ext.camp.trainer import _completion_logps

    ids, completion = torch.tensor([[0, 1, 0]]), torch.tensor([[0, 1, 1]])
    virtual = torch.full((1, 2, 2), 9.0)
    logits = torch.tensor([[[0.0, 0.0], [0.0, math.log(3)], [5.0, 5.0]]])
    expected = math.log(1 / 2) + math.log(1 / 4)
    from_logits = _completion_logps(SimpleNamespace(logits=torch.cat([virtual, logits], 1)), ids, completion)
    assert from_logits.tolist() == pytest.approx([expected])
    log_probs = torch.tensor([[7.0, 7.0, math.log(1 / 2), math.log(1 / 4)]])
    from_log_probs = _completion_logps(SimpleNamespace(log_probs=log_probs), ids, completion)
    assert from_log_probs.tolist() == pytest.approx([expected])


def test_gradient_accumulation_matches_large_batch(
    tok: Any, make_model: Any, camp_dataset: Any, make_args: Any
) -> None:
    """Accumulating 2 micro-batches of 2 gives the update of one batch of 4.

    The weights are float64, so the float32 summation order does not blur the check.
    """
    ref: list[Any] = []
    rec_acc = GradRecorder(ref)
    args = make_args(max_steps=1, per_device_train_batch_size=2, gradient_accumulation_steps=2)
    acc = _camp(make_model().double(), args, camp_dataset, tok, callbacks=[rec_acc.callback])
    ref.append(acc)
    acc.train()
    rec_big = GradRecorder()
    args = make_args(max_steps=1, per_device_train_batch_size=4)
    big = _camp(make_model().double(), args, camp_dataset, tok, callbacks=[rec_big.callback])
    big.train()
    assert rec_acc.metric_counts == [2]  # both micro-batches carried the CAMP columns through the loss
    _assert_same(rec_acc.grads[0], rec_big.grads[0], atol=1e-6)
    _assert_same(_params(acc.model), _params(big.model), atol=1e-6)


@pytest.mark.slow
def test_checkpoint_resume(
    tok: Any, make_model: Any, camp_dataset: Any, make_args: Any, tmp_path: Any
) -> None:
    full = _camp(make_model(), make_args(save_strategy="steps", save_steps=1), camp_dataset, tok)
    full.train()
    resumed = _camp(make_model(), make_args(output_dir=str(tmp_path / "resumed")), camp_dataset, tok)
    resumed.train(resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-1"))
    assert resumed.state.global_step == 2
    _assert_same(_params(full.model), _params(resumed.model))
    # step 1 comes from the checkpoint's trainer state, step 2 was logged after the resume
    assert [h["step"] for h in resumed.state.log_history if "camp/conflict_frac" in h] == [1, 2]


def test_save_model_round_trip(
    tok: Any, make_model: Any, camp_dataset: Any, make_args: Any, tmp_path: Any
) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    trainer = _camp(make_model(), make_args(max_steps=1), camp_dataset, tok)
    trainer.train()
    trainer.save_model(str(tmp_path / "saved"))
    loaded = AutoModelForCausalLM.from_pretrained(str(tmp_path / "saved")).eval()
    ids = torch.tensor([[4, 5, 6, 14]])
    trainer.model.eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, trainer.model(ids).logits)
    trainer.create_model_card(model_name="tiny-camp")
    card = (tmp_path / "out" / "README.md").read_text()
    assert "CAMP" in card and "Conflict-Aware Adaptive Alignment" in card


def test_weight_mode_with_conflict_column(tok: Any, make_model: Any, make_args: Any, rows: list[Any]) -> None:
    from datasets import Dataset

    rows = [
        {k: v for k, v in r.items() if k not in ("truth_margin", "help_margin")} | {"probe": i % 2 * 1.0}
        for i, r in enumerate(rows)
    ]
    args = make_args(camp_mode="weight", conflict_key="probe", per_device_train_batch_size=8)
    trainer = _camp(make_model(), args, Dataset.from_list(rows), tok)
    trainer.train()
    assert sum(_logged(trainer, "camp/conflict_frac")) / 2 == pytest.approx(0.5)
    assert sum(_logged(trainer, "camp/weight_mean")) / 2 == pytest.approx(0.75)


def test_bad_trainer_inputs(tok: Any, make_model: Any, camp_dataset: Any, make_args: Any) -> None:
    from trl import DPOConfig

    from hf_ext import CAMPTrainer

    model = make_model()
    with pytest.raises(
        ValueError, match=r"`ref_model` is None and `model` was built in memory.*precompute_ref_log_probs"
    ):
        CAMPTrainer(model=model, args=make_args(), train_dataset=camp_dataset, processing_class=tok)
    with pytest.raises(TypeError, match="`args` must be a CAMPConfig, got DPOConfig"):
        _camp(model, make_args(DPOConfig), camp_dataset, tok)
    with pytest.raises(
        ValueError,
        match=r"`train_dataset`: .*lacks the CAMP column\(s\) \['help_margin'\].*ultrafeedback_to_camp",
    ):
        _camp(model, make_args(), camp_dataset.remove_columns("help_margin"), tok)
    bad = camp_dataset.remove_columns("truth_margin").add_column("truth_margin", [0.5] * 15 + [2.0])
    with pytest.raises(
        ValueError, match=r"`train_dataset`: column `truth_margin` must lie in \[-1, 1\], but row 15"
    ):
        _camp(model, make_args(), bad, tok)
    with pytest.raises(ValueError, match=r"`eval_dataset`: .*lacks the CAMP column"):
        _camp(model, make_args(), camp_dataset, tok, eval_dataset=camp_dataset.remove_columns("truth_margin"))


def test_completion_only_lm_head_warns_once_without_trl_switch(
    tok: Any, make_model: Any, camp_dataset: Any, make_args: Any, monkeypatch: Any
) -> None:
    import warnings

    import torch
    from trl.trainer import utils as trl_utils

    trainer = _camp(make_model(), make_args(), camp_dataset, tok)
    with trainer._completion_only_lm_head():
        assert trl_utils._use_triton(torch.device("cpu"))
    monkeypatch.delattr(trl_utils, "_use_triton")
    with pytest.warns(UserWarning, match="completion_only_lm_head: this trl has no .*_use_triton"):
        with trainer._completion_only_lm_head():
            pass
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with trainer._completion_only_lm_head():
            pass


def test_custom_collator_without_camp_columns(
    tok: Any, make_model: Any, camp_dataset: Any, make_args: Any
) -> None:
    from trl.trainer.dpo_trainer import DataCollatorForPreference

    trainer = _camp(
        make_model(),
        make_args(),
        camp_dataset,
        tok,
        data_collator=DataCollatorForPreference(pad_token_id=tok.pad_token_id),
    )
    with pytest.raises(
        ValueError, match=r"the batch lacks the CAMP column\(s\) \['truth_margin', 'help_margin'\]"
    ):
        trainer.train()


def _conversational(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def msg(role: str, text: str) -> list[dict[str, str]]:
        return [{"role": role, "content": text}]

    return [
        {
            "prompt": msg("user", r["prompt"]),
            "chosen": msg("assistant", r["chosen"]),
            "rejected": msg("assistant", r["rejected"]),
            "truth_margin": r["truth_margin"],
            "help_margin": r["help_margin"],
        }
        for r in rows
    ]


def test_conversational_data(tok: Any, make_model: Any, rows: list[Any], make_args: Any) -> None:
    """Message-list pairs: the margin columns stay scalar, CAMP sees every conflict, and with the term off it
    matches stock DPO on the same conversational data."""
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    from hf_ext import CAMPConfig, CAMPTrainer

    ds = Dataset.from_list(_conversational(rows))
    trainer = _camp(make_model(), make_args(per_device_train_batch_size=8), ds, tok)
    trainer.train()
    assert sum(_logged(trainer, "camp/conflict_frac")) / 2 == pytest.approx(0.25)
    dpo, dpo_rec = _recorded_run(DPOTrainer, make_model(), make_args(DPOConfig), ds, tok)
    off = make_args(CAMPConfig, camp_gamma=0.0, camp_conflict_loss="sigmoid")
    camp, camp_rec = _recorded_run(CAMPTrainer, make_model(), off, ds, tok)
    for g_dpo, g_camp in zip(dpo_rec.grads, camp_rec.grads, strict=True):
        _assert_same(g_dpo, g_camp)
    assert _logged(camp, "loss") == pytest.approx(_logged(dpo, "loss"), abs=1e-6)


def test_peft_without_ref_model_matches_stock_dpo(
    tok: Any, make_model: Any, camp_dataset: Any, make_args: Any
) -> None:
    """PEFT with ``ref_model=None`` (the reference is the adapter switched off): CAMP with the term off gives
    stock DPO's LoRA gradients, and the default CAMP trains only the adapter."""
    pytest.importorskip("peft")
    import torch
    from peft import LoraConfig
    from trl import DPOConfig, DPOTrainer

    from hf_ext import CAMPConfig, CAMPTrainer

    def lora() -> Any:
        return LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)

    grads = []
    for cls, args in (
        (DPOTrainer, make_args(DPOConfig)),
        (CAMPTrainer, make_args(CAMPConfig, camp_gamma=0.0, camp_conflict_loss="sigmoid")),
    ):
        rec = GradRecorder()
        torch.manual_seed(0)
        trainer = cls(
            model=make_model(),
            ref_model=None,
            args=args,
            train_dataset=camp_dataset,
            processing_class=tok,
            peft_config=lora(),
            callbacks=[rec.callback],
        )
        trainer.train()
        assert rec.grads and all("lora_" in name for name in rec.grads[0])
        grads.append(rec.grads)
    for g_dpo, g_camp in zip(*grads, strict=True):
        _assert_same(g_dpo, g_camp)
    torch.manual_seed(0)
    trainer = _camp(make_model(), make_args(), camp_dataset, tok, ref_model=None, peft_config=lora())
    trainer.train()
    assert _logged(trainer, "camp/margin_mean") and _logged(trainer, "rewards/margins_conflict")
