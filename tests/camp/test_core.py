"""The CAMP loss math on hand-computed and reference cases, no trainer."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from hf_ext.camp.core import camp_conflict, camp_loss, camp_margin  # noqa: E402


def _one(x: float) -> torch.Tensor:
    return torch.tensor([x], dtype=torch.float64)


def test_hand_computed_consistent_pair() -> None:
    # beta=0.1, delta=2, t=h=0.5, gamma=1 -> c=0, m=0.5, loss=-log sigmoid(0.2-0.5)
    loss, aux = camp_loss(_one(2.0), _one(0.0), _one(0.5), _one(0.5), beta=0.1, gamma=1.0)
    assert aux["conflict"].item() == 0.0 and aux["margin"].item() == pytest.approx(0.5)
    assert loss.item() == pytest.approx(0.85436, abs=1e-5)
    assert loss.item() == pytest.approx(-math.log(1 / (1 + math.exp(0.3))), rel=1e-12)


def test_hand_computed_conflict_pair() -> None:
    # t=-0.5, h=0.5 -> c=1, m=0; one-sided: -log sigmoid(0.2); two-sided: the mean of -log sigmoid(+-0.2)
    args = (_one(2.0), _one(0.0), _one(-0.5), _one(0.5))
    loss, aux = camp_loss(*args, beta=0.1, gamma=1.0, conflict_loss="sigmoid")
    assert aux["conflict"].item() == 1.0 and aux["margin"].item() == 0.0
    assert loss.item() == pytest.approx(0.59814, abs=1e-5)
    loss, _ = camp_loss(*args, beta=0.1, gamma=1.0)
    assert loss.item() == pytest.approx(0.5 * 0.59814 + 0.5 * 0.79814, abs=1e-5)


def test_soft_label_conflict_pair_settles_at_the_tradeoff_margin() -> None:
    # truth-prioritised weights: m = 0.7 * (-1) + 0.3 * 1 = -0.4; the two-sided loss is minimal at z = m
    t, h = _one(-1.0), _one(1.0)
    z = torch.linspace(-2, 2, 401, dtype=torch.float64)
    losses = torch.stack(
        [camp_loss(_one(v / 0.1), _one(0.0), t, h, beta=0.1, weights=(0.7, 0.3))[0] for v in z.tolist()]
    )
    assert z[losses.argmin()].item() == pytest.approx(-0.4, abs=0.01)
    one_sided = [camp_loss(_one(v / 0.1), _one(0.0), t, h, conflict_loss="sigmoid")[0] for v in (1.0, 2.0)]
    assert one_sided[1] < one_sided[0]  # the one-sided loss keeps rewarding a larger z


def test_signed_consistent_margin() -> None:
    # worse on both: negative margin; better on both: (t + h) / 2; a tie on one counts as consistent
    t, h = torch.tensor([-0.5, 0.5, 0.0, -1.0]), torch.tensor([-0.25, 0.25, -0.5, -1.0])
    m = camp_margin(t, h, camp_conflict(t, h), gamma=2.0)
    torch.testing.assert_close(m, torch.tensor([-0.75, 0.75, -0.5, -2.0]))


def test_soft_label_default_differs_from_an_ungated_margin() -> None:
    """The default CAMP and a MODPO-style margin on every pair agree on consistent pairs only."""
    g = torch.Generator().manual_seed(3)
    c, r = torch.randn(8, generator=g), torch.randn(8, generator=g)
    t = torch.tensor([1.0, 0.5, 0.25, 0.0, -1.0, -0.5, 1.0, -0.25])
    h = torch.tensor([1.0, 0.5, 0.75, 1.0, 1.0, 0.5, -0.5, 0.75])
    _, camp = camp_loss(c, r, t, h)
    _, ungated = camp_loss(c, r, t, h, conflict=torch.ones(8), conflict_loss="sigmoid")
    conflict = camp["conflict"].bool()
    assert conflict.tolist() == [False] * 4 + [True] * 4
    torch.testing.assert_close(camp["per_pair_loss"][~conflict], ungated["per_pair_loss"][~conflict])
    assert (camp["per_pair_loss"][conflict] != ungated["per_pair_loss"][conflict]).all()


def test_constant_soft_label_is_conservative_dpo() -> None:
    g = torch.Generator().manual_seed(4)
    c, r = (
        torch.randn(16, generator=g, dtype=torch.float64),
        torch.randn(16, generator=g, dtype=torch.float64),
    )
    eps, ones = 0.2, torch.ones(16, dtype=torch.float64)
    gamma = math.log((1 - eps) / eps)  # sigmoid(gamma * w_T * t) = 1 - eps with t = 1, w = (1, 0)
    loss, _ = camp_loss(c, r, ones, ones, beta=0.1, gamma=gamma, weights=(1.0, 0.0), conflict=ones)
    z = 0.1 * (c - r)
    cdpo = -(1 - eps) * F.logsigmoid(z) - eps * F.logsigmoid(-z)
    torch.testing.assert_close(loss, cdpo.mean())


def test_truth_prioritised_conflict_margin_is_negative() -> None:
    t, h = _one(-1.0), _one(1.0)
    m = camp_margin(t, h, camp_conflict(t, h), gamma=1.0, weights=(0.7, 0.3))
    assert m.item() == pytest.approx(-0.4)


def test_margin_mode_gamma_zero_is_dpo_bit_for_bit() -> None:
    g = torch.Generator().manual_seed(0)
    c, r = torch.randn(64, generator=g) * 5, torch.randn(64, generator=g) * 5
    t, h = torch.rand(64, generator=g) * 2 - 1, torch.rand(64, generator=g) * 2 - 1
    loss, aux = camp_loss(c, r, t, h, beta=0.1, mode="margin", gamma=0.0, conflict_loss="sigmoid")
    ref = -F.logsigmoid(0.1 * (c - r))
    assert torch.equal(aux["per_pair_loss"], ref)
    assert torch.equal(loss, ref.mean())


@pytest.mark.parametrize("rule", ["sign", "soft"])
def test_weight_mode_omega_one_is_dpo(rule: str) -> None:
    g = torch.Generator().manual_seed(1)
    c, r = torch.randn(64, generator=g), torch.randn(64, generator=g)
    t, h = torch.rand(64, generator=g) * 2 - 1, torch.rand(64, generator=g) * 2 - 1
    loss, _ = camp_loss(c, r, t, h, beta=0.3, mode="weight", conflict_weight=1.0, rule=rule)
    torch.testing.assert_close(loss, (-F.logsigmoid(0.3 * (c - r))).mean(), rtol=1e-7, atol=0)


def test_weight_mode_downweights_conflict_pairs() -> None:
    c, r = torch.tensor([1.0, 1.0]), torch.tensor([0.0, 0.0])
    _, aux = camp_loss(
        c, r, torch.tensor([1.0, -1.0]), torch.tensor([1.0, 1.0]), mode="weight", conflict_weight=0.25
    )
    assert aux["weight"].tolist() == [1.0, 0.25]
    assert aux["per_pair_loss"][1].item() == pytest.approx(0.25 * aux["per_pair_loss"][0].item())


def test_gradient_wrt_delta() -> None:
    beta, m = 0.1, 0.5
    delta = torch.tensor([2.0, -3.0, 0.7], dtype=torch.float64, requires_grad=True)
    t = torch.full((3,), 0.5, dtype=torch.float64)
    loss, aux = camp_loss(delta, torch.zeros(3, dtype=torch.float64), t, t, beta=beta, gamma=1.0)
    (loss * 3).backward()  # undo the mean
    expected = -beta * torch.sigmoid(m - beta * delta.detach())
    torch.testing.assert_close(delta.grad, expected)


def test_gradient_of_the_two_sided_conflict_loss() -> None:
    beta, m = 0.1, -0.4  # t=-1, h=1, weights (0.7, 0.3)
    delta = torch.tensor([2.0, -3.0, -4.0], dtype=torch.float64, requires_grad=True)
    t, h = torch.full((3,), -1.0, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    loss, _ = camp_loss(delta, torch.zeros(3, dtype=torch.float64), t, h, beta=beta, weights=(0.7, 0.3))
    (loss * 3).backward()
    expected = beta * (torch.sigmoid(beta * delta.detach()) - torch.sigmoid(torch.tensor(m)))
    torch.testing.assert_close(delta.grad, expected.to(torch.float64))


@pytest.mark.parametrize(
    ("mode", "conflict_loss"), [("margin", "soft_label"), ("margin", "sigmoid"), ("weight", "soft_label")]
)
def test_gradcheck(mode: str, conflict_loss: str) -> None:
    g = torch.Generator().manual_seed(2)
    c = torch.randn(6, dtype=torch.float64, generator=g, requires_grad=True)
    r = torch.randn(6, dtype=torch.float64, generator=g, requires_grad=True)
    t = torch.rand(6, dtype=torch.float64, generator=g) * 2 - 1
    h = torch.rand(6, dtype=torch.float64, generator=g) * 2 - 1
    kw = dict(mode=mode, rule="soft", conflict_loss=conflict_loss)
    assert torch.autograd.gradcheck(lambda a, b: camp_loss(a, b, t, h, **kw)[0], (c, r))


def test_soft_rule_limits_and_ties() -> None:
    t = torch.tensor([0.5, -0.5, 0.25, 0.0])
    h = torch.tensor([0.5, 0.5, -1.0, 0.7])
    sign = camp_conflict(t, h, rule="sign")
    assert sign.tolist() == [0.0, 1.0, 1.0, 0.0]
    soft = camp_conflict(t, h, rule="soft", kappa=1e4)
    torch.testing.assert_close(soft[:3], sign[:3], atol=1e-6, rtol=0)
    assert soft[3].item() == 0.5


def test_precomputed_conflict_replaces_rule() -> None:
    _, aux = camp_loss(_one(1.0), _one(0.0), _one(0.5), _one(0.5), conflict=_one(1.0), weights=(1.0, 0.0))
    assert aux["conflict"].item() == 1.0 and aux["margin"].item() == pytest.approx(0.5)
    loss, _ = camp_loss(_one(1.0), _one(0.0), mode="weight", conflict=_one(1.0), conflict_weight=0.5)
    assert loss.item() == pytest.approx(0.5 * -F.logsigmoid(torch.tensor(0.1)).item())


def test_bad_inputs() -> None:
    x = torch.zeros(3)
    with pytest.raises(ValueError, match="`mode` must be one of"):
        camp_loss(x, x, x, x, mode="beta")
    with pytest.raises(ValueError, match="`conflict_loss` must be one of 'soft_label', 'sigmoid', got 'ipo'"):
        camp_loss(x, x, x, x, conflict_loss="ipo")
    with pytest.raises(ValueError, match="`truth_margin` and `help_margin` are required"):
        camp_loss(x, x)
    with pytest.raises(ValueError, match=r"`rejected_logratios` has shape \(2,\)"):
        camp_loss(x, torch.zeros(2), x, x)
    with pytest.raises(ValueError, match=r"`chosen_logratios` must have shape \[B\]"):
        camp_loss(torch.zeros(3, 1), x, x, x)
    with pytest.raises(TypeError, match="`truth_margin` must be a torch.Tensor"):
        camp_conflict([0.1], x)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`rule` must be one of"):
        camp_conflict(x, x, rule="xor")
    with pytest.raises(ValueError, match="`kappa` must be a finite float > 0, got 0"):
        camp_conflict(x, x, rule="soft", kappa=0)
