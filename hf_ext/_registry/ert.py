from hf_ext._registry import MethodInfo

_F = "hf_ext.metrics.functional"

METHOD = MethodInfo(
    id="ert",
    name="ERT",
    title="Conditional Coverage Diagnostics for Conformal Prediction",
    venue="ICML 2026",
    arxiv="2512.11779",
    slot="torchmetrics + sklearn",
    use="ExcessRiskTargetCoverage().update(x, covered)",
    host="torchmetrics Metric + scikit-learn estimator",
    extras=("metrics", "sklearn"),
    public={
        "ExcessRiskTargetCoverage": "hf_ext.metrics.ert",
        "CoverageGap": "hf_ext.metrics.conditional_coverage",
        "FeatureStratifiedCoverage": "hf_ext.metrics.conditional_coverage",
        "SizeStratifiedCoverage": "hf_ext.metrics.conditional_coverage",
        "EqualOpportunityCoverage": "hf_ext.metrics.conditional_coverage",
        "WorstSlabCoverage": "hf_ext.metrics.conditional_coverage",
        "SizeCoverageCorrelation": "hf_ext.metrics.conditional_coverage",
        "excess_risk_target_coverage": f"{_F}.ert",
        "ert_from_predictions": f"{_F}.ert",
        "ert_test": f"{_F}.ert",
        "coverage_gap": f"{_F}.conditional_coverage",
        "feature_stratified_coverage": f"{_F}.conditional_coverage",
        "size_stratified_coverage": f"{_F}.conditional_coverage",
        "equal_opportunity_coverage": f"{_F}.conditional_coverage",
        "worst_slab_coverage": f"{_F}.conditional_coverage",
        "size_coverage_correlation": f"{_F}.conditional_coverage",
        "coverage_indicator": "hf_ext.ert.inputs",
        "CoverageAuditor": "hf_ext.estimators.ert",
        "CovGapAuditor": "hf_ext.estimators.conditional_coverage",
        "WorstSlabAuditor": "hf_ext.estimators.conditional_coverage",
        "SizeStratifiedAuditor": "hf_ext.estimators.conditional_coverage",
        "EqualOpportunityAuditor": "hf_ext.estimators.conditional_coverage",
    },
    citation=(
        "@inproceedings{braun2026conditional,\n"
        "  title={Conditional Coverage Diagnostics for Conformal Prediction},\n"
        '  author={Braun, Sacha and Holzm{\\"u}ller, David and Jordan, Michael I. and Bach, Francis},\n'
        "  booktitle={International Conference on Machine Learning (ICML)},\n"
        "  year={2026},\n"
        "  eprint={2512.11779},\n"
        "  archivePrefix={arXiv}\n"
        "}"
    ),
    reconstructed=(
        "default coverage classifier: calibrated HistGradientBoosting (the paper uses 8 averaged "
        "LightGBM models + a probmetrics calibrator, available as classifier='covmetrics')",
        "fold values averaged unweighted (as covmetrics; the paper may weight by fold size)",
        "p-value: exact held-out test of ERT-L1 on a train/test split (the cross-fitted value has no valid "
        "closed-form p-value: its folds share training data)",
        "folds drawn over the rows in a canonical order (the value does not depend on row order)",
        "exact fast worst-slab search by bisection on prefix sums",
        "holdout WSC and default delta=0.1",
        "seeded k-means for SSC/EOC/CovGap groupings (covmetrics is unseeded)",
    ),
    note="ERT is a lower bound: a weak classifier means low power, not good coverage. "
    "It is not uniformly more powerful than CovGap (oblique and checkerboard shifts).",
)
