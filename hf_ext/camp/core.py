"""CAMP loss in pure torch: per-pair conflict indicator, adaptive margin, and the DPO-style loss.

Every function here is a **reconstruction** from the paper's abstract (no public code, no full text checked):
the gap normalisation, the three conflict rules, the margin formula, the two-sided conflict loss and the
weighting alternative are ours. Shapes: every per-pair tensor is ``[B]`` (one entry per preference pair).
Log-ratios are token-summed ``log pi(y|x) - log pi_ref(y|x)`` in nats; margins are in logit units, i.e. the
units of ``beta * delta``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from hf_ext._validation import check_choice, check_float

CONFLICT_RULES = ("sign", "soft")
CAMP_MODES = ("margin", "weight")
CONFLICT_LOSSES = ("soft_label", "sigmoid")


def _check_pairs(name: str, value: torch.Tensor, like: torch.Tensor | None = None) -> None:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"`{name}` must be a torch.Tensor of shape [B], got {type(value).__name__}.")
    if value.dim() != 1:
        raise ValueError(
            f"`{name}` must have shape [B] (one value per pair), got shape {tuple(value.shape)}."
        )
    if like is not None and value.shape != like.shape:
        raise ValueError(
            f"`{name}` has shape {tuple(value.shape)} but the log-ratios have shape {tuple(like.shape)}."
        )


def camp_conflict(
    truth_margin: torch.Tensor,
    help_margin: torch.Tensor,
    rule: str = "sign",
    kappa: float = 10.0,
) -> torch.Tensor:
    """Per-pair conflict indicator ``c`` in [0, 1] from the normalised truth and help gaps [reconstructed].

    Args:
        truth_margin: ``t = (s_T(y_w) - s_T(y_l)) / S`` in [-1, 1], shape ``[B]``.
        help_margin: ``h = (s_H(y_w) - s_H(y_l)) / S`` in [-1, 1], shape ``[B]``.
        rule: ``"sign"``: ``c = 1[t * h < 0]`` (a tie on either objective is no conflict);
            ``"soft"``: ``c = sigmoid(-kappa * t * h)`` (a tie gives 0.5).
        kappa: Sharpness of the soft rule; ``kappa -> inf`` recovers the sign rule away from ties.

    Returns:
        ``c``, shape ``[B]``, same dtype as ``truth_margin``.

    Example:
        >>> camp_conflict(torch.tensor([0.5, -0.5, 0.0]), torch.tensor([0.5, 0.5, 1.0]))
        tensor([0., 1., 0.])
    """
    _check_pairs("truth_margin", truth_margin)
    _check_pairs("help_margin", help_margin, truth_margin)
    product = truth_margin * help_margin
    if check_choice("rule", rule, CONFLICT_RULES) == "sign":
        return (product < 0).to(truth_margin.dtype)
    return torch.sigmoid(-check_float("kappa", kappa, low=0, low_open=True) * product)


def camp_margin(
    truth_margin: torch.Tensor,
    help_margin: torch.Tensor,
    conflict: torch.Tensor,
    gamma: float = 1.0,
    weights: Sequence[float] = (0.5, 0.5),
) -> torch.Tensor:
    """Adaptive target margin ``m = gamma * [(1 - c) * g + c * (w_T * t + w_H * h)]`` [reconstructed].

    ``g = sign(t + h) * (|t| + |h|) / 2`` is the signed consistent-pair margin: positive when the chosen
    answer is better on both objectives, negative when it is worse on both (such a pair is likely mislabelled,
    and is not pushed past a positive target). On pairs with ``t * h >= 0`` it equals ``(t + h) / 2``. The
    conflict term is the truth/help trade-off, which can be small, zero or negative.

    Args:
        truth_margin: ``t``, shape ``[B]``.
        help_margin: ``h``, shape ``[B]``.
        conflict: ``c`` in [0, 1], shape ``[B]``.
        gamma: Margin scale in logit units (``m = 1`` at ``beta = 0.1`` asks for a 10-nat log-ratio gap).
        weights: ``(w_T, w_H)`` of the trade-off margin.

    Returns:
        ``m``, shape ``[B]``, in logit units.

    Example:
        >>> t, h = torch.tensor([0.5, -0.5, -0.5]), torch.tensor([0.5, 0.5, -0.25])
        >>> camp_margin(t, h, camp_conflict(t, h), gamma=1.0)
        tensor([ 0.5000,  0.0000, -0.3750])
    """
    _check_pairs("conflict", conflict, truth_margin)
    w_t, w_h = weights
    consistent = torch.sign(truth_margin + help_margin) * (truth_margin.abs() + help_margin.abs()) / 2
    tradeoff = w_t * truth_margin + w_h * help_margin
    return gamma * ((1 - conflict) * consistent + conflict * tradeoff)


def camp_loss(
    chosen_logratios: torch.Tensor,
    rejected_logratios: torch.Tensor,
    truth_margin: torch.Tensor | None = None,
    help_margin: torch.Tensor | None = None,
    *,
    beta: float = 0.1,
    mode: str = "margin",
    gamma: float = 1.0,
    weights: Sequence[float] = (0.5, 0.5),
    rule: str = "sign",
    kappa: float = 10.0,
    conflict_loss: str = "soft_label",
    conflict_weight: float = 0.5,
    conflict: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """CAMP preference loss, mean over the batch [reconstructed loss form].

    With ``z = beta * (chosen_logratios - rejected_logratios)`` and ``m`` from :func:`camp_margin`:

    - ``mode="margin"``, ``conflict_loss="soft_label"`` (default): consistent pairs get the one-sided margin
      loss ``-log sigmoid(z - m)`` (pushed past ``m``); conflict pairs get the two-sided soft-label loss
      ``-sigmoid(m) * log sigmoid(z) - sigmoid(-m) * log sigmoid(-z)``, whose minimum is at ``z = m``, so they
      settle at the truth/help trade-off instead of being pushed toward the overall label. A soft conflict
      ``c`` mixes the two: ``l = (1 - c) * one_sided + c * two_sided``. The gradient in ``z`` of the
      two-sided part is ``sigmoid(z) - sigmoid(m)``. With a constant label it is conservative DPO (cDPO).
    - ``mode="margin"``, ``conflict_loss="sigmoid"``: ``-log sigmoid(z - m)`` on every pair (conflict pairs
      only get a smaller or negative margin). ``gamma=0`` is trl's ``loss_type="sigmoid"`` bit for bit.
    - ``mode="weight"``: ``l = [(1 - c) + c * omega] * (-log sigmoid(z))`` with ``omega = conflict_weight``.
      ``omega=1`` is DPO up to float rounding.

    Args:
        chosen_logratios: ``log pi(y_w|x) - log pi_ref(y_w|x)``, token-summed, shape ``[B]``.
        rejected_logratios: ``log pi(y_l|x) - log pi_ref(y_l|x)``, shape ``[B]``.
        truth_margin: Normalised truth gap ``t`` in [-1, 1], shape ``[B]``. Needed unless ``mode="weight"``
            and ``conflict`` is given.
        help_margin: Normalised help gap ``h`` in [-1, 1], shape ``[B]``. Same requirement as
            ``truth_margin``.
        beta: DPO temperature.
        mode: ``"margin"`` or ``"weight"``.
        gamma: Margin scale (margin mode).
        weights: ``(w_T, w_H)`` of the trade-off margin (margin mode).
        rule: Conflict rule, ``"sign"`` or ``"soft"`` (ignored when ``conflict`` is given).
        kappa: Sharpness of the soft rule.
        conflict_loss: ``"soft_label"`` (two-sided on conflict pairs) or ``"sigmoid"`` (margin mode).
        conflict_weight: ``omega``, the loss weight of conflict pairs (weight mode).
        conflict: Optional precomputed ``c`` in [0, 1], shape ``[B]`` (e.g. a knowledge-boundary probe).

    Returns:
        ``(loss, aux)``: the scalar mean loss and a dict of ``[B]`` tensors ``per_pair_loss``, ``logits``
        (``z``), ``conflict``, ``margin`` (zeros in weight mode) and ``weight`` (ones in margin mode).

    Example:
        >>> loss, aux = camp_loss(torch.tensor([1.0]), torch.tensor([-1.0]), torch.tensor([0.5]),
        ...                       torch.tensor([0.5]), beta=0.1)
        >>> round(loss.item(), 5), aux["margin"].tolist()
        (0.85436, [0.5])
    """
    _check_pairs("chosen_logratios", chosen_logratios)
    _check_pairs("rejected_logratios", rejected_logratios, chosen_logratios)
    check_choice("mode", mode, CAMP_MODES)
    check_choice("conflict_loss", conflict_loss, CONFLICT_LOSSES)
    for name, gap in (("truth_margin", truth_margin), ("help_margin", help_margin)):
        if gap is not None:
            _check_pairs(name, gap, chosen_logratios)
    gaps = None if truth_margin is None or help_margin is None else (truth_margin, help_margin)
    if gaps is None and (mode == "margin" or conflict is None):
        raise ValueError(
            f"`truth_margin` and `help_margin` are required for mode={mode!r}"
            + ("" if mode == "margin" else " unless `conflict` is given")
            + "; build them with `hf_ext.camp.ultrafeedback_to_camp`."
        )
    if conflict is None:
        assert gaps is not None
        conflict = camp_conflict(*gaps, rule=rule, kappa=kappa)
    else:
        _check_pairs("conflict", conflict, chosen_logratios)
    conflict = conflict.to(chosen_logratios.dtype)
    logits = beta * (chosen_logratios - rejected_logratios)
    weight = torch.ones_like(logits)
    if mode == "margin":
        assert gaps is not None
        margin = camp_margin(*gaps, conflict, gamma=gamma, weights=weights).to(logits.dtype)
        per_pair = -F.logsigmoid(logits - margin)
        if conflict_loss == "soft_label":
            label = torch.sigmoid(margin)
            two_sided = -label * F.logsigmoid(logits) - (1 - label) * F.logsigmoid(-logits)
            per_pair = (1 - conflict) * per_pair + conflict * two_sided
    else:
        margin = torch.zeros_like(logits)
        weight = (1 - conflict) + conflict * conflict_weight
        per_pair = weight * -F.logsigmoid(logits)
    aux = {
        "per_pair_loss": per_pair,
        "logits": logits,
        "conflict": conflict,
        "margin": margin,
        "weight": weight,
    }
    return per_pair.mean(), aux
