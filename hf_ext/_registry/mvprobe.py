from hf_ext._registry import MethodInfo

_M = "hf_ext.mvprobe"
_E = "hf_ext.estimators.mvprobe"

METHOD = MethodInfo(
    id="mvprobe",
    name="MVProbe",
    title="What Linear Probes Miss: Multi-View Probing for Weight-Space Learning",
    venue="ICML 2026",
    arxiv=None,
    slot="sklearn estimator",
    use="MVProbeClassifier().fit(weights, y)",
    host="scikit-learn estimators over weight matrices of torch nn.Modules (timm, transformers, state dicts)",
    extras=("sklearn",),
    public={
        "MVProbeClassifier": _E,
        "ProbeXClassifier": _E,
        "WeightMatrixExtractor": _E,
        "WeightStatsTransformer": _E,
        "MultiViewProbe": f"{_M}.core",
        "branch_outputs": f"{_M}.core",
        "standardize_per_sample": f"{_M}.core",
        "per_label_accuracy": f"{_M}.core",
        "weight_matrix": f"{_M}.inputs",
        "make_model_zoo": f"{_M}.zoo",
        "ModelZooConfig": f"{_M}.config",
    },
    public_extras={
        "MultiViewProbe": (),
        "branch_outputs": (),
        "standardize_per_sample": (),
        "per_label_accuracy": (),
        "weight_matrix": (),
        "ModelZooConfig": (),
    },
    citation=(
        "@inproceedings{mvprobe2026,\n"
        "  title     = {What Linear Probes Miss: Multi-View Probing for Weight-Space Learning},\n"
        "  booktitle = {Proceedings of the 43rd International Conference on Machine Learning (ICML)},\n"
        "  year      = {2026},\n"
        "  url       = {https://openreview.net/forum?id=vfqrmuVULL},\n"
        "  note      = {Code: https://github.com/AI-hew-math/MVProbe}\n"
        "}"
    ),
    reconstructed=(
        "1-D class labels: softmax cross-entropy and argmax (the paper trains multi-label BCE only)",
        "ProbeX x4 (budget matched to MVProbe) = n_probes x 4",
        "inactive branches are not built (the official code zero-masks them; same forward output)",
        "2-D input: each row is one (n_features, 1) matrix unless weight_shape is given",
        "model zoo: MLP 64-64-64-10 / small CNN on sklearn digits, one ancestor, fine-tuned on random "
        "5-of-10 class subsets with random lr and step count",
        "scale invariance with standardize=True, and the absence of hidden-neuron permutation invariance, "
        "are an analysis of the paper's equations",
    ),
    note=(
        "Model-J (the paper's zoo) is not available offline: the benchmark ranks the probes on a locally "
        "trained digits zoo and does not reproduce the paper's figures. Both probes assume a zoo sharing one "
        "ancestor (aligned neuron order)."
    ),
)
