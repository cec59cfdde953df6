"""Settings of the ``hf-ext bench ert`` power study (see ``docs/methods/ert.md``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class BenchConfig:
    """Sizes and statistic settings of the ERT power benchmark.

    Attributes:
        ns: Sample sizes compared at equal n.
        shapes: Alternative miscoverage shapes (keys of :data:`hf_ext.ert._bench_shapes.SHAPES`).
        r_null: Null data sets (p == tau) per feature dimension and n; they set each statistic's 5% threshold.
        r_alt: Alternative data sets per shape and n.
        r_fresh: Fresh null data sets per dimension and n (other seeds) on which the false-positive rate is
            measured.
        r_estimate: Data sets per shape for the estimation check (default calibrated vs bench classifier).
        estimate_shapes: Shapes of the estimation check.
        n_estimate: Sample size of the estimation check.
        tau: Target coverage.
        level: Test level.
        hgb_max_iter, hgb_leaves, n_splits: The uncalibrated bench classifier of ERT-L1 and its folds.
        covgap_groups: k-means cells for CovGap.
        wsc_delta, wsc_directions: WSC slab mass and number of directions.
        truth_draws: Monte-Carlo draws for the true E|p - tau|, E(p - tau)^2 and E KL(p || tau).
    """

    ns: tuple[int, ...] = (1000, 2000)
    shapes: tuple[str, ...] = ("localized", "oblique", "step", "xor", "sparse")
    r_null: int = 60
    r_alt: int = 60
    r_fresh: int = 25
    r_estimate: int = 3
    estimate_shapes: tuple[str, ...] = ("localized", "oblique", "step", "xor", "sparse")
    n_estimate: int = 2000
    tau: float = 0.9
    level: float = 0.05
    hgb_max_iter: int = 60
    hgb_leaves: int = 8
    n_splits: int = 3
    covgap_groups: int = 16
    wsc_delta: float = 0.1
    wsc_directions: int = 100
    truth_draws: int = 400_000

    @classmethod
    def quick(cls) -> BenchConfig:
        """A < 60 s version: n = 1000 only, 8 null / 8 alternative / 6 fresh data sets, 1 estimation set."""
        return cls(
            ns=(1000,),
            r_null=8,
            r_alt=8,
            r_fresh=6,
            r_estimate=1,
            estimate_shapes=("step",),
            n_estimate=1000,
            truth_draws=100_000,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable settings."""
        return asdict(self)
