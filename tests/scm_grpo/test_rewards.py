"""The reward callables: hand-computed values, trl's calling convention, logging and bad inputs."""

from __future__ import annotations

import functools
import math
import operator
import pickle
from typing import Any

import pytest

from hf_ext.scm_grpo.rewards import (
    SCMCombinedReward,
    SCMDepthReward,
    SCMGraphFormatReward,
    SCMLabelReward,
)

from .test_core import chain, completion

E05 = math.exp(-0.5)


def trl_kwargs(n: int, **columns: Any) -> tuple[dict[str, Any], dict[str, list[float]], dict]:
    """The keyword arguments trl's GRPOTrainer passes, with recorders for log_metric / log_extra."""
    metrics: dict[str, list[float]] = {}
    extra: dict[str, list[Any]] = {}

    class State:
        global_step = 10

    kwargs = {
        "prompts": [f"prompt {i}" for i in range(n)],
        "completion_ids": [[1, 2]] * n,
        "trainer_state": State(),
        "log_extra": lambda column, values: extra.setdefault(column, []).extend(values),
        "log_metric": lambda name, value: metrics.setdefault(name, []).append(value),
        **columns,
    }
    return kwargs, metrics, extra


def test_rewards_hand_computed() -> None:
    completions = [chain(3), chain(2), chain(5), chain(3).replace("SUPPORTED", "NOT_SUPPORTED"), "garbage"]
    gold = ["SUPPORTED", "supported", "SUPPORTED", "SUPPORTED", "NOT_SUPPORTED"]
    kwargs, metrics, extra = trl_kwargs(5, label=gold, num_hops=[3, 3, 3, 3, 3], other=[0] * 5)
    assert SCMLabelReward()(completions=completions, **kwargs) == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert SCMGraphFormatReward()(completions=completions, **kwargs) == [1.0, 1.0, 1.0, 1.0, 0.0]
    depth = SCMDepthReward()(completions=completions, **kwargs)
    assert depth == pytest.approx([1.0, E05, math.exp(-2), 0.0, 0.0])
    ungated = SCMDepthReward(gate_on_correct=False)(completions=completions, **kwargs)
    assert ungated == pytest.approx([1.0, E05, math.exp(-2), 1.0, 0.0])
    combined = SCMCombinedReward()(completions=completions, **kwargs)
    assert combined == pytest.approx([2.0, 1.5 + 0.5 * E05, 1.5 + 0.5 * math.exp(-2), 0.5, 0.0])
    assert metrics["scm/label_acc"][0] == pytest.approx(3 / 5)
    assert metrics["scm/format_valid_frac"][0] == pytest.approx(4 / 5)
    assert metrics["scm/parse_error/missing_graph"][0] == 1.0 and metrics["scm/parse_error/cycle"][0] == 0
    assert metrics["scm/depth_mean"][0] == pytest.approx((3 + 2 + 5 + 3) / 4)
    assert metrics["scm/depth_abs_err"][0] == pytest.approx((0 + 1 + 2 + 0) / 4)
    assert extra["scm_depth"][:5] == [3, 2, 5, 3, None]


def test_gate_zeroes_structure_for_wrong_labels_at_any_depth() -> None:
    wrong = [chain(n).replace("SUPPORTED", "NOT_SUPPORTED") for n in range(1, 6)]
    reward = SCMDepthReward(target_key=None, default_target=3)
    assert reward(completions=wrong, label=["SUPPORTED"] * 5) == [0.0] * 5


def test_depth_targets_per_row_and_default() -> None:
    reward = SCMDepthReward(default_target=2)
    out = reward(completions=[chain(2), chain(2)], label=["SUPPORTED"] * 2, num_hops=[None, 4])
    assert out == pytest.approx([1.0, math.exp(-2)])
    no_column = reward(completions=[chain(2)], label=["SUPPORTED"])  # default_target used
    assert no_column == [1.0]
    num_evidence = SCMDepthReward(depth="num_evidence", default_target=3)
    star = completion("E1: a\nE2: b\nE3: c\nC: d\nE1 -> C\nE2 -> C\nE3 -> C")
    assert num_evidence(completions=[star], label=["SUPPORTED"], num_hops=[3]) == [1.0]


def test_schedule_multiplies_by_the_step() -> None:
    reward = SCMDepthReward(schedule=functools.partial(operator.mul, 0.05))  # a linear warm-up, picklable
    kwargs, _, _ = trl_kwargs(1, label=["SUPPORTED"], num_hops=[3])
    assert reward(completions=[chain(3)], **kwargs) == [pytest.approx(0.5)]  # global_step 10
    assert reward(completions=[chain(3)], label=["SUPPORTED"], num_hops=[3]) == [0.0]  # no state: step 0
    clone = pickle.loads(pickle.dumps(reward))
    assert clone(completions=[chain(3)], **kwargs) == [pytest.approx(0.5)]


def test_conversational_and_string_completions_agree() -> None:
    texts = [chain(3), chain(2), "nope"]
    conv = [[{"role": "assistant", "content": t}] for t in texts]
    columns = {"label": ["SUPPORTED"] * 3, "num_hops": [3, 3, 3]}
    for reward in (SCMLabelReward(), SCMGraphFormatReward(), SCMDepthReward(), SCMCombinedReward()):
        assert reward(completions=conv, **columns) == reward(completions=texts, **columns)


@pytest.mark.parametrize(
    ("reward", "name"),
    [
        (SCMLabelReward(), "scm_label"),
        (SCMGraphFormatReward(), "scm_format"),
        (SCMDepthReward(), "scm_depth"),
        (SCMCombinedReward(), "scm_combined"),
        (SCMDepthReward(name="scm_depth_b"), "scm_depth_b"),
    ],
)
def test_names_and_pickling(reward: Any, name: str) -> None:
    from trl.trainer.utils import get_callable_name

    assert reward.__name__ == name == get_callable_name(reward)
    clone = pickle.loads(pickle.dumps(reward))
    out = clone(completions=[chain(3)], label=["SUPPORTED"], num_hops=[3])
    assert out == reward(completions=[chain(3)], label=["SUPPORTED"], num_hops=[3])
    assert all(isinstance(v, float) for v in out) and len(out) == 1


def test_missing_columns_raise_key_errors_naming_them() -> None:
    with pytest.raises(KeyError, match=r"`label`.*columns seen: \['num_hops'\]"):
        SCMLabelReward()(completions=[chain(1)], num_hops=[1], log_metric=None)
    with pytest.raises(KeyError, match="`num_hops`"):
        SCMDepthReward(default_target=None)(completions=[chain(1)], label=["SUPPORTED"])
    with pytest.raises(KeyError, match="`verdict`"):
        SCMDepthReward(label_key="verdict")(completions=[chain(1)], label=["SUPPORTED"], num_hops=[1])


@pytest.mark.parametrize(
    ("columns", "error", "match"),
    [
        ({"label": ["REFUTED"], "num_hops": [1]}, ValueError, r"`label`.*\['SUPPORTED', 'NOT_SUPPORTED'\]"),
        ({"label": [None], "num_hops": [1]}, ValueError, "`label`"),
        ({"label": ["SUPPORTED"], "num_hops": [0]}, ValueError, "`num_hops`"),
        ({"label": ["SUPPORTED"], "num_hops": [2.5]}, TypeError, "`num_hops`"),
        ({"label": ["SUPPORTED"], "num_hops": ["2"]}, TypeError, "`num_hops`"),
        ({"label": ["SUPPORTED", "SUPPORTED"], "num_hops": [1]}, ValueError, "`label`"),
    ],
)
def test_bad_gold_values_raise(columns: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        SCMDepthReward(default_target=None)(completions=[chain(1)], **columns)


def test_bad_constructor_arguments_raise_naming_them() -> None:
    with pytest.raises(ValueError, match="`sigma`"):
        SCMDepthReward(sigma=0)
    with pytest.raises(ValueError, match="`sigma`"):
        SCMDepthReward(sigma=-1.0)
    with pytest.raises(ValueError, match="`default_target`"):
        SCMDepthReward(default_target=0)
    with pytest.raises(ValueError, match="`default_target`"):
        SCMDepthReward(target_key=None, default_target=None)
    with pytest.raises(ValueError, match="`depth`"):
        SCMDepthReward(depth="deepest")
    with pytest.raises(ValueError, match="`format_weight`"):
        SCMCombinedReward(format_weight=-0.5)
    with pytest.raises(ValueError, match="`depth_weight`"):
        SCMCombinedReward(depth_weight=-1)
    with pytest.raises(ValueError, match="`label_set`"):
        SCMLabelReward(label_set="fever")
    with pytest.raises(ValueError, match="`label_set`"):
        SCMGraphFormatReward(label_set=[])
    with pytest.raises(ValueError, match="`require_acyclic`"):
        SCMGraphFormatReward(require_acyclic=False)
    with pytest.raises(TypeError, match="`schedule`"):
        SCMDepthReward(schedule=3)  # type: ignore[arg-type]


def test_length_mismatch_and_bad_completion_types_raise() -> None:
    with pytest.raises(ValueError, match="`prompts` and `completions`"):
        SCMGraphFormatReward()(prompts=["a", "b"], completions=[chain(1)])
    with pytest.raises(TypeError, match="`completions`"):
        SCMGraphFormatReward()(completions=chain(1))
    with pytest.raises(TypeError, match="`completions`"):
        SCMGraphFormatReward()(completions=[3])


def test_malformed_completions_never_raise() -> None:
    junk = ["", "<graph>", "</graph><graph>", "<answer></answer>" * 3, "E1 -> C", "<graph>\n\n</graph>" * 2]
    kwargs, metrics, _ = trl_kwargs(len(junk), label=["SUPPORTED"] * len(junk), num_hops=[2] * len(junk))
    assert SCMCombinedReward()(completions=junk, **kwargs) == [0.0] * len(junk)
    assert metrics["scm/format_valid_frac"] == [0.0]
    assert sum(v[0] for k, v in metrics.items() if k.startswith("scm/parse_error/")) >= len(junk)


def test_exfever_label_set() -> None:
    reward = SCMLabelReward(label_set="exfever")
    texts = [chain(1).replace("SUPPORTED", lab) for lab in ("refutes", "NEI", "SUPPORTED", "not supported")]
    gold = ["REFUTE", "NOT ENOUGH INFO", "SUPPORT", "REFUTED"]
    assert reward(completions=texts, label=gold) == [1.0, 1.0, 1.0, 0.0]
