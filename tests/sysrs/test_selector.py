"""BestModelIdentifier (a selector): parity with the simulator and the schedulers, parameters, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("sklearn")

from sklearn.base import clone  # noqa: E402

from hf_ext.sysrs.core import ALGORITHMS, make_scheduler  # noqa: E402
from hf_ext.sysrs.selector import BestModelIdentifier  # noqa: E402
from hf_ext.sysrs.simulation import run_scheduler, simulate  # noqa: E402


def _matrix(k: int = 7, n: int = 300, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.random((k, n)) < np.linspace(0.5, 0.8, k)[:, None]).astype(float)


@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
@pytest.mark.parametrize("seed", [0, 7])
def test_parity_with_simulate_and_hand_driven_scheduler(algorithm: str, seed: int) -> None:
    S = _matrix()
    est = BestModelIdentifier(algorithm=algorithm, random_state=seed)
    assert est.select(S, budget=500) == est.best_model_
    sim = simulate(S, 500, algorithm, reps=1, seed=seed)
    sched = make_scheduler(algorithm, *S.shape, 500, seed=seed)
    hand = run_scheduler(S, sched)
    assert est.best_model_ == hand == int(sim["picks"][0])
    assert est.budget_used_ == sched.spent == int(sim["spent"][0]) <= 500
    assert est.history_ == sched.history and est.n_models_ == 7 and est.n_queries_ == 300


def test_clone_and_params_round_trip() -> None:
    est = BestModelIdentifier(algorithm="sh_synced", budget=123, nan_policy="drop_query", score_range=(0, 5))
    params = est.get_params()
    assert params["budget"] == 123 and params["algorithm"] == "sh_synced"
    twin = clone(est)
    assert twin.get_params() == params and twin is not est
    twin.set_params(budget=50, random_state=3)
    assert twin.budget == 50 and est.budget == 123


def test_random_state_instances_are_reproducible() -> None:
    S = _matrix()
    a, b = (BestModelIdentifier(budget=200, random_state=np.random.RandomState(4)) for _ in range(2))
    assert a.select(S) == b.select(S) and a.history_ == b.history_


def test_default_budget_is_exact_full_evaluation() -> None:
    S = _matrix()
    est = BestModelIdentifier()
    est.select(S)
    assert est.budget_used_ == S.size and est.best_model_ == int(np.argmax(S.mean(1)))


def test_nan_and_real_valued_scores() -> None:
    base = np.random.default_rng(1).random(80) * 10
    S = base[None, :] + np.array([[0.3], [0.1], [0.2], [0.4]])  # real-valued, model 3 best everywhere
    S[0, :5] = np.nan
    est = BestModelIdentifier(score_range=(0, 10.5), nan_policy="drop_query")
    assert est.select(S, budget=S.size) == 3


@pytest.mark.parametrize(
    ("params", "S", "error", "match"),
    [
        (
            {"budget": 3},
            _matrix(5, 20),
            ValueError,
            "`budget` must be an int >= 6, got 3. SuccessiveRejects with n_models=5",
        ),
        ({"budget": 4, "algorithm": "uniform"}, _matrix(5, 20), ValueError, "`budget` must be an int >= 5"),
        ({"budget": 10.5}, _matrix(5, 20), TypeError, "`budget` must be an int >= 0, got 10.5"),
        ({"algorithm": "ucb"}, _matrix(5, 20), ValueError, "`algorithm` must be one of .* got 'ucb'"),
        ({"nan_policy": "skip"}, _matrix(5, 20), ValueError, "`nan_policy` must be one of .* got 'skip'"),
        ({"score_range": (2, 1)}, _matrix(5, 20), ValueError, "`score_range` must be a pair"),
        ({}, np.full((3, 4), 7.0), ValueError, "`S` must lie in \\[0, 1\\]"),
        ({}, np.zeros(4), ValueError, "`S` must be a 2-D score matrix"),
        ({}, np.zeros((2, 2, 2)), ValueError, "`S` must be a 2-D score matrix"),
        ({"random_state": "seed"}, _matrix(5, 20), TypeError, "`random_state` must be None, an int or a"),
        ({"random_state": -1}, _matrix(5, 20), ValueError, "`random_state` must be an int >= 0, got -1"),
    ],
)
def test_select_bad_inputs(params: dict, S: np.ndarray, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        BestModelIdentifier(**params).select(S)


def test_public_names_resolve_lazily() -> None:
    import hf_ext
    from hf_ext.sysrs import BestModelIdentifier as Est

    assert Est is BestModelIdentifier is hf_ext.BestModelIdentifier
    assert hf_ext.SySRs is hf_ext.SynchronizedSuccessiveRejects
    assert hf_ext.SySRs._paper["id"] == "2606.07726" and BestModelIdentifier._paper["venue"] == "ICML 2026"


def test_end_to_end_breast_cancer_zoo() -> None:
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import GaussianNB
    from sklearn.neighbors import KNeighborsClassifier, NearestCentroid
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.tree import DecisionTreeClassifier

    from benchmarks.sysrs.matrices import sklearn_correctness_matrix

    zoo = [
        ("logistic", make_pipeline(StandardScaler(), LogisticRegression(max_iter=500))),
        ("knn5", make_pipeline(StandardScaler(), KNeighborsClassifier(5))),
        ("nb", GaussianNB()),
        ("tree3", DecisionTreeClassifier(max_depth=3, random_state=0)),
        ("centroid", NearestCentroid()),
        ("tree1", DecisionTreeClassifier(max_depth=1, random_state=0)),
    ]
    S, names = sklearn_correctness_matrix("breast_cancer", zoo)
    assert S.shape == (6, 569) and names[0] == "logistic" and set(np.unique(S)) <= {0.0, 1.0}
    for algorithm in ALGORITHMS:
        out = simulate(S, 1000, algorithm, reps=50, seed=0)
        assert out["spent"].max() <= 1000
        assert 0.0 <= out["error_rate"] <= 1.0 and out["simple_regret"] >= 0.0
    assert simulate(S, 3000, "sysrs", reps=50)["error_rate"] <= 0.5
