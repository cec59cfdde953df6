from hf_ext._registry import MethodInfo

METHOD = MethodInfo(
    id="online_covering",
    name="Online covering",
    title="Learning-Augmented Online Covering Problems",
    venue="ICML 2026",
    arxiv="2507.06032",
    slot="sklearn BaseEstimator",
    use="WithPredictions(online_alg, preds).serve(r)",
    host="scikit-learn-style parameter API (BaseEstimator) for online algorithms",
    extras=("sklearn",),
    public={
        "OnlineSetCover": "hf_ext.online_covering.set_cover",
        "MeyersonFacilityLocation": "hf_ext.online_covering.facility_location",
        "ParkingPermit": "hf_ext.online_covering.parking_permit",
        "GreedySteinerTree": "hf_ext.online_covering.steiner",
        "WithPredictions": "hf_ext.online_covering.predictions",
        "Robustify": "hf_ext.online_covering.robust",
        "prediction_error": "hf_ext.online_covering.predictions",
        "OnlineCoveringAlgorithm": "hf_ext.online_covering.core",
        "OfflineResult": "hf_ext.online_covering.offline",
    },
    citation=(
        "@inproceedings{jabalameli2026learning,\n"
        "  title={Learning-Augmented Online Covering Problems},\n"
        "  author={Jabal Ameli, Afrouz and Sanit{\\`a}, Laura and Venzin, Moritz},\n"
        "  booktitle={International Conference on Machine Learning (ICML)},\n"
        "  year={2026},\n"
        "  eprint={2507.06032},\n"
        "  archivePrefix={arXiv}\n"
        "}"
    ),
    reconstructed=(
        "count-based prediction error eta = |R minus R_hat| + |R_hat minus R| (multisets)",
        "the up-front / lazy reduction and its residual hand-off to the online algorithm",
        "the lazy Steiner rule (predicted-tree path to the current tree)",
        "the lazy facility-location rule (a predicted site no nearer than an open facility is not bought)",
        "Robustify: follow-the-cheaper with hysteresis (switch above ratio x the other + B_0), "
        "the B_0 rules, catch-up on switch, and its bound",
        "the cap x_S <= 1 in the online set-cover update",
        "the adversarial set-cover family",
    ),
    note=(
        "Theory paper without experiments or code; the reduction is reconstructed from the abstract and "
        "introduction, so its bounds must not be cited as the paper's."
    ),
)
