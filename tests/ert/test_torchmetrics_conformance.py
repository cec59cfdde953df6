"""torchmetrics contract for ExcessRiskTargetCoverage and the legacy coverage Metrics."""

from __future__ import annotations

import contextlib
import io
import pickle

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("metrics", "sklearn")


def _lr():
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression()


def _data(n: int = 600, d: int = 3, seed: int = 0):
    import torch

    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, d, generator=g, dtype=torch.float64) * 2 - 1
    z = (torch.rand(n, generator=g, dtype=torch.float64) < torch.where(x[:, 0] > 0.3, 0.75, 0.97)).double()
    sizes = torch.randint(1, 5, (n,), generator=g).double()
    groups = torch.randint(0, 6, (n,), generator=g)
    return x, z, sizes, groups


def _metrics():
    """(name, factory, update-args builder) for every Metric."""
    from hf_ext.metrics import (
        CoverageGap,
        EqualOpportunityCoverage,
        ExcessRiskTargetCoverage,
        FeatureStratifiedCoverage,
        SizeCoverageCorrelation,
        SizeStratifiedCoverage,
        WorstSlabCoverage,
    )

    return [
        ("ert", lambda: ExcessRiskTargetCoverage(classifier=_lr()), lambda x, z, s, g: (x, z)),
        ("covgap", lambda: CoverageGap(alpha=0.1), lambda x, z, s, g: (g, z)),
        (
            "covgap_sums",
            lambda: CoverageGap(alpha=0.1, num_groups=6, weighted=True),
            lambda x, z, s, g: (g, z),
        ),
        ("fsc", lambda: FeatureStratifiedCoverage(), lambda x, z, s, g: (g, z)),
        ("ssc", lambda: SizeStratifiedCoverage(alpha=0.1), lambda x, z, s, g: (s, z)),
        ("eoc", lambda: EqualOpportunityCoverage(alpha=0.1), lambda x, z, s, g: (g, z)),
        ("wsc", lambda: WorstSlabCoverage(num_directions=20, holdout=0.5), lambda x, z, s, g: (x, z)),
        ("hsic", lambda: SizeCoverageCorrelation(method="hsic"), lambda x, z, s, g: (s, z)),
    ]


def _value(out):
    return (
        {k: float(v) for k, v in out.items() if k != "fold_values"} if isinstance(out, dict) else float(out)
    )


@pytest.mark.parametrize("name, factory, args", _metrics(), ids=[m[0] for m in _metrics()])
def test_batched_equals_single_reset_pickle_state_dict_merge(name, factory, args):
    x, z, s, g = _data()
    single = factory()
    single.update(*args(x, z, s, g))
    ref = _value(single.compute())

    batched = factory()
    for sl in (slice(0, 150), slice(150, 420), slice(420, 600)):
        batched.update(*args(x[sl], z[sl], s[sl], g[sl]))
    assert _value(batched.compute()) == pytest.approx(ref, abs=1e-12)

    clone = pickle.loads(pickle.dumps(batched))
    assert _value(clone.compute()) == pytest.approx(ref, abs=1e-12)

    a, b = factory(), factory()
    a.update(*args(x[:250], z[:250], s[:250], g[:250]))
    b.update(*args(x[250:], z[250:], s[250:], g[250:]))
    a.merge_state(b)  # b's samples first: the canonical order makes the value order-invariant
    assert _value(a.compute()) == pytest.approx(ref, abs=1e-12)

    batched.reset()
    batched.update(*args(x[:300], z[:300], s[:300], g[:300]))
    fresh = factory()
    fresh.update(*args(x[:300], z[:300], s[:300], g[:300]))
    assert _value(batched.compute()) == pytest.approx(_value(fresh.compute()), abs=1e-12)


@pytest.mark.filterwarnings("ignore:The ``compute`` method")
def test_persistent_state_dict_round_trip():
    from hf_ext.metrics import CoverageGap

    x, z, s, g = _data()
    m = CoverageGap(alpha=0.1, num_groups=6)
    m.persistent(True)
    m.update(g, z)
    m2 = CoverageGap(alpha=0.1, num_groups=6)
    m2.persistent(True)
    m2.load_state_dict(m.state_dict())
    assert float(m2.compute()) == float(m.compute())


def test_ert_output_keys_and_fold_values():
    from hf_ext.metrics import ExcessRiskTargetCoverage

    x, z, _, _ = _data()
    out = ExcessRiskTargetCoverage(classifier=_lr(), n_splits=4)
    out.update(x, z)
    res = out.compute()
    assert set(res) == {
        "l1",
        "l2",
        "kl",
        "l1_over",
        "l1_under",
        "l2_over",
        "l2_under",
        "kl_over",
        "kl_under",
        "fold_values",
    }
    assert res["fold_values"].shape == (4, 9)
    for loss in ("l1", "l2", "kl"):
        assert float(res[f"{loss}_over"] + res[f"{loss}_under"]) == pytest.approx(float(res[loss]), abs=1e-12)


def test_float32_and_float64_inputs_agree():
    import torch

    from hf_ext.metrics import ExcessRiskTargetCoverage

    x, z, _, _ = _data()
    values = []
    for dtype in (torch.float32, torch.float64):
        m = ExcessRiskTargetCoverage(classifier=_lr())
        m.update(x.to(dtype), z.to(dtype))
        values.append(float(m.compute()["l2"]))
    assert values[0] == pytest.approx(values[1], abs=1e-5)


def test_per_sample_target_coverage_in_metric_matches_functional():
    from hf_ext.metrics import ExcessRiskTargetCoverage
    from hf_ext.metrics.functional import excess_risk_target_coverage

    x, z, _, _ = _data()
    tau = np.linspace(0.85, 0.95, x.shape[0])
    m = ExcessRiskTargetCoverage(classifier=_lr())
    m.update(x[:300], z[:300], target_coverage=tau[:300])
    m.update(x[300:], z[300:], target_coverage=tau[300:])
    ref = excess_risk_target_coverage(x, z, target_coverage=tau, classifier=_lr())
    assert float(m.compute()["l1"]) == float(ref)


def _functional_pairs():
    """(name, Metric factory, its functional twin on the same rows, update-args builder)."""
    from hf_ext.metrics import (
        EqualOpportunityCoverage,
        ExcessRiskTargetCoverage,
        SizeCoverageCorrelation,
        SizeStratifiedCoverage,
        WorstSlabCoverage,
    )
    from hf_ext.metrics.functional import (
        equal_opportunity_coverage,
        excess_risk_target_coverage,
        size_coverage_correlation,
        size_stratified_coverage,
        worst_slab_coverage,
    )

    return [
        (
            "ert",
            lambda: ExcessRiskTargetCoverage(classifier=_lr(), n_splits=4),
            lambda x, z: excess_risk_target_coverage(
                x, z, classifier=_lr(), n_splits=4, loss="kl", side="under"
            ),
            "kl_under",
        ),
        (
            "ert_hgb",
            lambda: ExcessRiskTargetCoverage(n_splits=3),
            lambda x, z: excess_risk_target_coverage(x, z, n_splits=3),
            "l1",
        ),
        (
            "ssc_kmeans",
            lambda: SizeStratifiedCoverage(num_groups=3),
            lambda s, z: size_stratified_coverage(s, z, num_groups=3),
            None,
        ),
        (
            "eoc_kmeans",
            lambda: EqualOpportunityCoverage(num_groups=3),
            lambda s, z: equal_opportunity_coverage(s, z, num_groups=3),
            None,
        ),
        (
            "wsc_holdout",
            lambda: WorstSlabCoverage(num_directions=20, holdout=0.5),
            lambda x, z: worst_slab_coverage(x, z, num_directions=20, holdout=0.5),
            None,
        ),
        (
            "hsic_subsample",
            lambda: SizeCoverageCorrelation(method="hsic", max_samples=100),
            lambda s, z: size_coverage_correlation(s, z, method="hsic", max_samples=100),
            None,
        ),
    ]


@pytest.mark.parametrize(
    "name, metric, functional, key", _functional_pairs(), ids=[p[0] for p in _functional_pairs()]
)
def test_metric_and_functional_give_the_same_value(name, metric, functional, key):
    """One definition: the Metric fed shuffled batches equals the functional form on the same rows, for the
    statistics whose computation draws folds, a holdout split, a subsample or k-means centroids by row."""
    import torch

    x, z, s, _ = _data(n=400)
    s = s + torch.rand(400, generator=torch.Generator().manual_seed(1))  # many distinct values: k-means runs
    first = x if name.startswith(("ert", "wsc")) else s
    perm = torch.randperm(400, generator=torch.Generator().manual_seed(2))
    m = metric()
    for chunk in perm.split(128):
        m.update(first[chunk], z[chunk])
    got = m.compute()
    got = got[key] if key else got
    assert float(got) == float(functional(first, z))


def test_full_state_update_false_is_justified():
    from torchmetrics.utilities.checks import check_forward_full_state_property

    from hf_ext.metrics import CoverageGap

    x, z, s, g = _data(n=64)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        check_forward_full_state_property(
            CoverageGap,
            init_args={"alpha": 0.1},
            input_args={"groups": g, "covered": z},
            num_update_to_compare=[5],
            reps=1,
        )
    text = buf.getvalue()
    assert "Full state for" in text  # both modes produced identical results (the timing advice is advisory)


def test_higher_is_better_flags():
    from hf_ext.metrics import (
        CoverageGap,
        EqualOpportunityCoverage,
        ExcessRiskTargetCoverage,
        FeatureStratifiedCoverage,
        SizeCoverageCorrelation,
        SizeStratifiedCoverage,
        WorstSlabCoverage,
    )

    assert ExcessRiskTargetCoverage.higher_is_better is False
    assert CoverageGap.higher_is_better is False
    assert FeatureStratifiedCoverage.higher_is_better is True
    assert WorstSlabCoverage.higher_is_better is True
    assert SizeStratifiedCoverage.higher_is_better is None  # depends on `reduction`
    assert EqualOpportunityCoverage.higher_is_better is None
    assert SizeCoverageCorrelation.higher_is_better is None  # ideal value is 0
    assert ExcessRiskTargetCoverage.full_state_update is False
    assert ExcessRiskTargetCoverage._paper["id"] == "2512.11779"


def test_metric_accepts_prediction_sets_and_labels():
    import torch

    from hf_ext.metrics import SizeStratifiedCoverage, WorstSlabCoverage

    sets = torch.tensor([[True, False], [True, True], [False, True], [True, False]])
    y = torch.tensor([1, 0, 1, 0])
    m = SizeStratifiedCoverage(alpha=0.1, reduction="min")
    m.update(y=y, prediction_sets=sets)
    assert float(m.compute()) == pytest.approx(2 / 3)
    w = WorstSlabCoverage(delta=0.5, num_directions=3)
    w.update(torch.arange(4.0).reshape(-1, 1), y=y, prediction_sets=sets)
    assert 0.0 <= float(w.compute()) <= 1.0
