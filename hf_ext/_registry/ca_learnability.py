from hf_ext._registry import MethodInfo

_M = "hf_ext.ca_learnability"
_NUMPY_ONLY = (
    "fwht",
    "fourier_spectrum",
    "influences",
    "average_sensitivity",
    "degree_weights",
    "junta_profile",
    "spectral_features",
    "mc_spectrum",
    "rule_features",
    "CARule",
    "life_like_rule",
    "random_rule",
    "sample_rules",
    "d4_orbits",
    "ca_step",
    "ca_truth_table",
    "window_function",
    "LearnabilityConfig",
)

METHOD = MethodInfo(
    id="ca_learnability",
    name="CA learnability",
    title=(
        "Cellular-automaton learnability: average sensitivity vs junta and Fourier-degree coefficients "
        "(working title; the published title is not known to hf-ext)"
    ),
    venue="ICML 2026",
    arxiv=None,
    slot="torch Dataset + sklearn",
    use='learnability_study(rules, archs=("cnn",))',
    host="no host: numpy Boolean analysis, torch Dataset and models (timm ViT), scikit-learn estimator",
    extras=("timm", "sklearn"),
    public={
        "learnability_study": f"{_M}.harness",
        "train_and_evaluate": f"{_M}.harness",
        "build_model": f"{_M}.models",
        "fwht": f"{_M}.core",
        "fourier_spectrum": f"{_M}.core",
        "influences": f"{_M}.core",
        "average_sensitivity": f"{_M}.core",
        "degree_weights": f"{_M}.core",
        "junta_profile": f"{_M}.core",
        "spectral_features": f"{_M}.core",
        "mc_spectrum": f"{_M}.features",
        "rule_features": f"{_M}.features",
        "CARule": f"{_M}.automata",
        "life_like_rule": f"{_M}.automata",
        "random_rule": f"{_M}.automata",
        "sample_rules": f"{_M}.automata",
        "d4_orbits": f"{_M}.automata",
        "ca_step": f"{_M}.automata",
        "ca_truth_table": f"{_M}.automata",
        "window_function": f"{_M}.automata",
        "CellularAutomatonDataset": f"{_M}.dataset",
        "LearnabilityConfig": f"{_M}.config",
        "learnability_correlations": f"{_M}.analysis",
        "LearnabilityPredictor": "hf_ext.estimators.ca_learnability",
    },
    public_extras={
        **{name: () for name in _NUMPY_ONLY},
        "CellularAutomatonDataset": (),
        "build_model": ("timm",),
        "train_and_evaluate": ("timm",),
        "learnability_study": ("timm",),
        "learnability_correlations": ("sklearn",),
        "LearnabilityPredictor": ("sklearn",),
    },
    citation=(
        "@inproceedings{calearnability2026,\n"
        "  title     = {Cellular-Automaton Learnability: Average Sensitivity vs Junta and Fourier-Degree "
        "Coefficients},\n"
        "  booktitle = {Proceedings of the 43rd International Conference on Machine Learning (ICML)},\n"
        "  year      = {2026},\n"
        "  note      = {Working title; authors, title and arXiv id not confirmed. Precursor: OpenReview "
        "forum QWHArest6b (toy universes)}\n"
        "}"
    ),
    reconstructed=(
        "CA conventions: 3x3 Moore window, bit 3*dy+dx (centre = bit 4), torus by default, k-step window "
        "bit (2k+1)*dy+dx",
        "rule families: outer-totalistic with p = 0.3 per count, D4-symmetric (102 orbit bits), local "
        "(512 bits); constant rules dropped",
        "junta coefficients, two readings: normalised degree profile and the spatial junta profile J_r",
        "normalisation of the degree profile by the non-constant weight 1 - W^{=0}",
        "Monte-Carlo path: flip counting for AS, U-statistics for W^{=0..2}, agreeing pairs for J_r, "
        "noise stabilities",
        "learnability harness: architectures, sizes, learning rates, 24 training grids, 64 test grids, "
        "200 full-batch Adam steps, error normalised by the majority-class error, learning gate 0.8",
        "the window transformer (timm ViT on each cell's window: local attention), and the benchmark's "
        "budgets for the cell-local networks (2 training grids; 400 steps for the transformer)",
        "LearnabilityPredictor (ridge on standardised features, cross-validated R^2)",
    ),
    note=(
        "The paper's title, numbers and code were not available: the testbed and the harness are hf-ext's "
        "reconstruction, and the benchmark is not a reproduction of the paper's figures."
    ),
)
