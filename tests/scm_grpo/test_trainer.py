"""End to end on a tiny Llama: the rewards in stock trl.GRPOTrainer, SCMGRPOTrainer and its config."""

from __future__ import annotations

from typing import Any

import pytest

from hf_ext.testing import requires

pytestmark = requires("trl")


def _model(tok: Any) -> Any:
    from hf_ext.testing import tiny_llama

    return tiny_llama(0, vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_attention_heads=2)


def _history(trainer: Any) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for entry in trainer.state.log_history:
        merged.update(entry)
    return merged


def test_stock_grpo_trainer_logs_each_reward(tok: Any, rows: list, make_args: Any) -> None:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from hf_ext import SCMDepthReward, SCMGraphFormatReward, SCMLabelReward

    rewards = [SCMLabelReward(), SCMGraphFormatReward(), SCMDepthReward()]
    args = make_args(GRPOConfig, reward_weights=[1.0, 0.5, 0.5])
    trainer = GRPOTrainer(
        _model(tok),
        reward_funcs=rewards,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tok,
    )
    trainer.train()
    logs = _history(trainer)
    for name in ("scm_label", "scm_format", "scm_depth"):
        assert f"rewards/{name}/mean" in logs
    assert logs["rewards/scm_format/mean"] == 0.0  # a random model never writes the contract
    assert logs["scm/format_valid_frac"] == 0.0 and logs["scm/parse_error/missing_graph"] > 0
    assert trainer.state.global_step == 2


def test_scm_trainer_wires_the_default_rewards(tok: Any, rows: list, make_args: Any) -> None:
    from datasets import Dataset

    from hf_ext import SCMGRPOConfig, SCMGRPOTrainer

    args = make_args(scm_format_weight=0.25, max_steps=1)
    trainer = SCMGRPOTrainer(
        _model(tok), args=args, train_dataset=Dataset.from_list(rows), processing_class=tok
    )
    assert trainer.reward_func_names == ["scm_label", "scm_format", "scm_depth"]
    assert trainer.reward_weights.tolist() == [1.0, 0.25, 0.5]
    trainer.train()
    assert "rewards/scm_depth/mean" in _history(trainer)
    assert isinstance(trainer.args, SCMGRPOConfig) and "scm-grpo" in trainer._tag_names


def test_scm_trainer_checks_the_dataset_up_front(tok: Any, rows: list, make_args: Any) -> None:
    from datasets import Dataset

    from hf_ext import SCMGRPOTrainer

    no_label = Dataset.from_list([{k: v for k, v in r.items() if k != "label"} for r in rows])
    with pytest.raises(KeyError, match=r"`train_dataset`.*`label`.*columns seen"):
        SCMGRPOTrainer(_model(tok), args=make_args(), train_dataset=no_label, processing_class=tok)
    bad = Dataset.from_list([{**r, "label": "REFUTED"} for r in rows])
    with pytest.raises(ValueError, match=r"`train_dataset`.*SUPPORTED"):
        SCMGRPOTrainer(_model(tok), args=make_args(), train_dataset=bad, processing_class=tok)
    with pytest.raises(TypeError, match="`args` must be an SCMGRPOConfig"):
        from trl import GRPOConfig

        SCMGRPOTrainer(_model(tok), args=make_args(GRPOConfig), processing_class=tok)


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("scm_sigma", 0.0, ValueError),
        ("scm_sigma", -1.0, ValueError),
        ("scm_format_weight", -0.1, ValueError),
        ("scm_depth_weight", -1.0, ValueError),
        ("scm_default_target", 0, ValueError),
        ("scm_label_set", "fever", ValueError),
        ("scm_depth", "widest", ValueError),
        ("scm_gate_on_correct", "yes", TypeError),
    ],
)
def test_config_rejects_bad_values_naming_the_field(
    field: str, value: Any, error: type, make_args: Any
) -> None:
    with pytest.raises(error, match=f"`{field}`"):
        make_args(**{field: value})


def test_config_defaults_match_the_reconstructed_recipe(make_args: Any) -> None:
    args = make_args(num_generations=8, per_device_train_batch_size=8)
    assert (args.num_generations, args.beta, args.loss_type, args.scale_rewards) == (8, 0.0, "dapo", "group")
    assert args.multi_objective_aggregation == "sum_then_normalize"
    assert (args.scm_format_weight, args.scm_depth_weight, args.scm_sigma) == (0.5, 0.5, 1.0)
