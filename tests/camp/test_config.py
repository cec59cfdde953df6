"""``CAMPConfig`` validation and CLI parsing."""

from __future__ import annotations

from typing import Any

import pytest

from hf_ext.testing import requires

pytestmark = requires("trl")


def _cfg(**kw: Any) -> Any:
    from hf_ext import CAMPConfig

    return CAMPConfig(output_dir="/tmp/camp-cfg", report_to=[], use_cpu=True, **kw)


def test_defaults() -> None:
    cfg = _cfg()
    assert cfg.loss_type == ["sigmoid"] and cfg.camp_mode == "margin" and cfg.camp_weights == [0.5, 0.5]
    assert _cfg(camp_weights=(0.7, 0.3)).camp_weights == [0.7, 0.3]
    assert cfg._paper["id"] is None and "Reconstruction" in cfg._paper["note"]


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"loss_type": "hinge"}, r"`loss_type` must be \['sigmoid'\] for CAMP, got \['hinge'\]"),
        ({"loss_type": ["aot"]}, r"\['aot'\] sort the batch"),
        ({"loss_type": ["sigmoid", "sft"], "loss_weights": [1.0, 1.0]}, r"`loss_type` must be \['sigmoid'\]"),
        ({"loss_weights": [2.0]}, r"`loss_weights` must be unset or \[1.0\] for CAMP, got \[2.0\]"),
        ({"use_weighting": True}, "`use_weighting` must be False"),
        (
            {"f_divergence_type": "js_divergence"},
            "`f_divergence_type` must be one of 'reverse_kl', got 'js_divergence'",
        ),
        ({"label_smoothing": 0.1}, "`label_smoothing` must be 0 for CAMP .* got 0.1"),
        ({"ld_alpha": 0.5}, "`ld_alpha` must be None for CAMP, got 0.5"),
        ({"camp_mode": "beta"}, "`camp_mode` must be one of 'margin', 'weight', 'off', got 'beta'"),
        ({"conflict_rule": "xor"}, "`conflict_rule` must be one of .* got 'xor'"),
        (
            {"camp_weights": [0.5]},
            r"`camp_weights` must be a list of length 2, got \[0.5\]. Give \(w_T, w_H\)",
        ),
        ({"camp_weights": [0.5, -1.0]}, r"`camp_weights\[1\]` must be a finite float >= 0, got -1.0"),
        ({"camp_weights": [0.5, float("nan")]}, r"`camp_weights\[1\]` must be a finite float >= 0, got nan"),
        ({"camp_gamma": -1.0}, "`camp_gamma` must be a finite float >= 0, got -1.0"),
        (
            {"camp_conflict_weight": float("inf")},
            "`camp_conflict_weight` must be a finite float >= 0, got inf",
        ),
        ({"camp_kappa": 0.0}, "`camp_kappa` must be a finite float > 0, got 0.0"),
    ],
)
def test_bad_config(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        _cfg(**kw)


def test_hf_argument_parser() -> None:
    from transformers import HfArgumentParser

    from hf_ext import CAMPConfig

    argv = "--output_dir /tmp/camp-cli --camp_mode weight --camp_weights 0.7 0.3 --conflict_key probe"
    argv += " --camp_gamma 0.25 --report_to none --use_cpu true"
    (cfg,) = HfArgumentParser(CAMPConfig).parse_args_into_dataclasses(argv.split())
    assert isinstance(cfg, CAMPConfig)
    assert (cfg.camp_mode, cfg.camp_weights, cfg.conflict_key, cfg.camp_gamma) == (
        "weight",
        [0.7, 0.3],
        "probe",
        0.25,
    )
