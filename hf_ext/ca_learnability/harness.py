"""The learnability harness: train each architecture on each rule's k-step task, one budget [reconstructed].

Learnability is measured as the test cell error normalised by the majority-class error (a predictor that
always outputs the training majority): 0 = perfect, 1 = no better than the trivial baseline.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch
import torch.nn.functional as F

from hf_ext._timing import Timer
from hf_ext._validation import check_bool, check_choice, check_sequence
from hf_ext.ca_learnability.automata import CARule, as_rule
from hf_ext.ca_learnability.config import ARCHITECTURES, LearnabilityConfig
from hf_ext.ca_learnability.dataset import CellularAutomatonDataset
from hf_ext.ca_learnability.features import rule_features
from hf_ext.ca_learnability.models import build_model

logger = logging.getLogger(__name__)


def _config(config: LearnabilityConfig | None, overrides: dict[str, Any]) -> LearnabilityConfig:
    if config is not None and not isinstance(config, LearnabilityConfig):
        raise TypeError(f"`config` must be a LearnabilityConfig or None, got {type(config).__name__}.")
    return (
        replace(config or LearnabilityConfig(), **overrides) if overrides else config or LearnabilityConfig()
    )


def _data(rule: CARule, cfg: LearnabilityConfig, n: int, seed: int) -> CellularAutomatonDataset:
    return CellularAutomatonDataset(
        rule, cfg.steps, cfg.grid, n, density=cfg.density, boundary=cfg.boundary, seed=seed
    )


def train_and_evaluate(
    rule: CARule | Any, arch: str, config: LearnabilityConfig | None = None, **overrides: Any
) -> dict[str, Any]:
    """Train one architecture on one rule's k-step task with the config's budget and score it on fresh grids.

    Args:
        rule: A :class:`CARule` or a 512-entry table.
        arch: ``"cnn"``, ``"mlp_patch"``, ``"mlp_global"``, ``"vit"`` or ``"vit_window"`` (see
            :func:`build_model`).
        config: The budget; ``None`` uses :class:`LearnabilityConfig` defaults.
        **overrides: Fields of :class:`LearnabilityConfig` replaced for this call (e.g. ``train_steps=20``).

    Returns:
        ``rule`` (name), ``arch``, ``error`` (test cell error), ``majority_error`` (test error of the training
        majority class), ``normalized_error`` (their ratio; NaN when the majority error is 0), ``train_loss``
        (final BCE) and ``train_seconds``.

    Example:
        >>> from hf_ext.ca_learnability import life_like_rule
        >>> out = train_and_evaluate(life_like_rule([3], [2, 3]), "cnn", n_train=4, n_test=4, train_steps=5)
        >>> out["arch"], 0 <= out["error"] <= 1
        ('cnn', True)
    """
    rule = as_rule(rule)
    arch = check_choice("arch", arch, ARCHITECTURES)
    cfg = _config(config, overrides)
    train = _data(rule, cfg, cfg.n_train, 2 * cfg.seed)
    test = _data(rule, cfg, cfg.n_test, 2 * cfg.seed + 1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = build_model(arch, steps=cfg.steps, grid=cfg.grid, boundary=cfg.boundary)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr(arch))
    model.train()
    with Timer() as timer:
        for _ in range(cfg.train_steps):
            loss = F.binary_cross_entropy_with_logits(model(train.inputs), train.targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    model.eval()
    with torch.no_grad():
        error = float(((model(test.inputs) > 0).float() != test.targets).float().mean())
    majority = float(train.targets.mean() >= 0.5)
    majority_error = float((test.targets != majority).float().mean())
    return {
        "rule": rule.name,
        "arch": arch,
        "error": error,
        "majority_error": majority_error,
        "normalized_error": error / majority_error if majority_error > 0 else math.nan,
        "train_loss": loss.item(),
        "train_seconds": timer.seconds,
    }


def learnability_study(
    rules: Sequence[CARule | Any],
    archs: Sequence[str] = ("cnn", "mlp_patch", "vit"),
    config: LearnabilityConfig | None = None,
    *,
    features: bool = True,
    **overrides: Any,
) -> list[dict[str, Any]]:
    """Train every architecture on every rule (one fixed budget) and attach each rule's predictors.

    Args:
        rules: Rules (constant ones should be dropped first: their error is trivially 0).
        archs: Architecture names.
        config: The shared budget; ``overrides`` replace its fields (e.g. ``steps=1, n_train=24, seed=0``).
        features: Add :func:`rule_features` of each rule's k-step map (``feature_seconds`` is its cost).

    Returns:
        One record per (rule, arch): the fields of :func:`train_and_evaluate` plus the features; load it
        with ``pandas.DataFrame(records)`` if you like.

    Example:
        >>> from hf_ext.ca_learnability import sample_rules
        >>> rows = learnability_study(sample_rules(2), ["cnn"], n_train=2, n_test=2, train_steps=2)
        >>> first = rows[0]
        >>> len(rows), first["rule"], round(first["as"], 4)
        (2, 'B3/S23', 3.1719)
    """
    items: list[Any] = check_sequence("rules", list(rules), min_length=1)
    rule_list = [as_rule(r) for r in items]
    arch_list = check_sequence(
        "archs", list(archs), lambda n, v: check_choice(n, v, ARCHITECTURES), min_length=1
    )
    cfg = _config(config, overrides)
    check_bool("features", features)
    records = []
    for rule in rule_list:
        extra: dict[str, Any] = {}
        if features:
            with Timer() as timer:
                extra = rule_features(rule, cfg.steps)
            extra["feature_seconds"] = timer.seconds
        for arch in arch_list:
            records.append({**train_and_evaluate(rule, arch, cfg), **extra})
        logger.info("learnability_study: %s done", rule.name)
    return records
