"""Settings of ``hf-ext bench ert`` (see ``docs/methods/ert.md``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from benchmarks.ert.shapes import SHAPES


@dataclass(frozen=True)
class BenchConfig:
    """Sizes and statistic settings of the ERT benchmark.

    Attributes:
        validity_ns: Sample sizes of the false-positive-rate study of the tests that need no simulation.
        r_validity: Null data sets (p == tau, d = ``validity_dim``) per n of that study.
        r_validity_power: Alternative data sets (``validity_shape``) per n of that study.
        validity_dim: Feature dimension of its nulls (the dimension of ``validity_shape``).
        validity_shape: Alternative of that study.
        conformal_ns: Test-set sizes of the well-specified split-conformal study (rejection rate of the
            held-out tests when coverage is constant in x but its level is set by a finite calibration set).
        r_conformal: Split-conformal runs (fresh fit, calibration and test data) per n.
        conformal_dim: Feature dimension of the split-conformal study.
        zscore_max_n: Largest n at which the plug-in z-test on cross-fitted differences also runs (it costs
            a cross-fit per data set).
        ns: Sample sizes of the power comparison at equal size.
        shapes: Alternative miscoverage shapes (keys of :data:`benchmarks.ert.shapes.SHAPES`).
        r_null: Null data sets per feature dimension and n; they set each statistic's Monte-Carlo threshold.
        r_alt: Alternative data sets per shape and n.
        r_estimate: Data sets per shape for the estimation check (default calibrated vs bench classifier).
        estimate_shapes: Shapes of the estimation check (none: no estimation check).
        n_estimate: Sample size of the estimation check.
        tau: Target coverage.
        level: Test level.
        hgb_max_iter, hgb_leaves, n_splits: The uncalibrated bench classifier of ERT-L1 and its folds.
        test_size: Held-out fraction of the exact ERT-L1 test.
        covgap_groups: k-means cells for CovGap.
        wsc_delta, wsc_directions: WSC slab mass and number of directions.
        truth_draws: Monte-Carlo draws for the true E|p - tau|, E(p - tau)^2 and E KL(p || tau).
        digits: Run the real-data demo on scikit-learn's ``load_digits``.
        n_jobs: Worker processes over data sets (each runs one thread).
    """

    validity_ns: tuple[int, ...] = (500, 2000, 10000)
    r_validity: int = 600
    r_validity_power: int = 100
    validity_dim: int = 10
    validity_shape: str = "localized"
    conformal_ns: tuple[int, ...] = (1000, 2000)
    r_conformal: int = 200
    conformal_dim: int = 4
    zscore_max_n: int = 2000
    ns: tuple[int, ...] = (1000, 2000)
    shapes: tuple[str, ...] = ("localized", "oblique", "step", "xor", "sparse")
    r_null: int = 60
    r_alt: int = 60
    r_estimate: int = 3
    estimate_shapes: tuple[str, ...] = ("localized", "oblique", "step", "xor", "sparse")
    n_estimate: int = 2000
    tau: float = 0.9
    level: float = 0.05
    hgb_max_iter: int = 60
    hgb_leaves: int = 8
    n_splits: int = 3
    test_size: float = 0.5
    covgap_groups: int = 16
    wsc_delta: float = 0.1
    wsc_directions: int = 100
    truth_draws: int = 400_000
    digits: bool = True
    n_jobs: int = 2

    @classmethod
    def quick(cls) -> BenchConfig:
        """The quick slice of the full run: its smallest n of each part, the headline (localized) shape only,
        fewer data sets, no estimation check and no real-data demo; figures are indicative only.

        19 nulls per cell is the fewest at which the Monte-Carlo threshold has size <= 5% (1/20)."""
        return cls(
            validity_ns=(500,),
            r_validity=40,
            r_validity_power=10,
            conformal_ns=(1000,),
            r_conformal=40,
            ns=(1000,),
            shapes=("localized",),
            r_null=19,
            r_alt=20,
            estimate_shapes=(),
            truth_draws=100_000,
            digits=False,
        )

    def settings(self) -> list[dict[str, Any]]:
        """The settings this configuration measures (part, shape, d, n), in run order."""
        validity = f"none / {self.validity_shape}"
        dim = self.validity_dim
        out = [{"part": "validity", "shape": validity, "d": dim, "n": n} for n in self.validity_ns]
        out += [
            {"part": "conformal", "shape": "split conformal", "d": self.conformal_dim, "n": n}
            for n in self.conformal_ns
        ]
        out += [
            {"part": "power", "shape": name, "d": SHAPES[name].dim, "n": n}
            for n in self.ns
            for name in self.shapes
        ]
        out += [
            {"part": "estimate", "shape": name, "d": SHAPES[name].dim, "n": self.n_estimate}
            for name in self.estimate_shapes
        ]
        return out + ([{"part": "digits", "shape": "digits (real)"}] if self.digits else [])

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable settings."""
        return asdict(self)
