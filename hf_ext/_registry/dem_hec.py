from hf_ext._registry import MethodInfo

METHOD = MethodInfo(
    id="dem_hec",
    name="Dem-HEC",
    title="Dem-HEC: entropy-guided fine-tuning for natural-corruption robustness (title unconfirmed)",
    venue="ICML 2026 (listed; unconfirmed)",
    arxiv=None,
    slot="timm ClassificationTask",
    use="DemHECTask(model, DemHECConfig())",
    host="timm training task (timm.task.ClassificationTask subclass) + torchmetrics mCE",
    extras=("timm", "metrics"),
    public={
        "DemHECConfig": "hf_ext.dem_hec.config",
        "DemHECTask": "hf_ext.dem_hec.task",
        "entropy_pgd": "hf_ext.dem_hec.core",
        "AugMixTask": "hf_ext.dem_hec.finetune",
        "CORRUPTIONS": "hf_ext.dem_hec.corruptions",
        "corrupt": "hf_ext.dem_hec.corruptions",
        "CorruptionTransform": "hf_ext.dem_hec.corruptions",
        "CorruptedDataset": "hf_ext.dem_hec.corruptions",
        "ImageNetC": "hf_ext.dem_hec.corruption_datasets",
        "CIFAR10C": "hf_ext.dem_hec.corruption_datasets",
        "evaluate_corruptions": "hf_ext.dem_hec.robust_eval",
        "robustness_table": "hf_ext.dem_hec.robust_eval",
        "feature_entropy_profile": "hf_ext.dem_hec.observation",
        "MeanCorruptionError": "hf_ext.metrics.corruption",
        "mean_corruption_error": "hf_ext.metrics.functional.corruption",
    },
    commands={"timm-finetune": "hf_ext.dem_hec.finetune:main"},
    citation="""@inproceedings{demhec2026,
  title     = {Entropy-Guided Fine-Tuning for Natural-Corruption Robustness (Dem-HEC)},
  booktitle = {International Conference on Machine Learning (ICML)},
  year      = {2026},
  note      = {OpenReview CVqYCYpq75; title, authors and venue unconfirmed}
}""",
    reconstructed=(
        "high-entropy objective (normalised prediction + token feature entropy, sign ascent in an L-inf "
        "ball)",
        "loss forms and weights (InfoNCE alignment, KD from a deep-copied snapshot)",
        "defaults (eps, steps, weights, temperatures)",
        "the corruption suite (ImageNet-C / CIFAR-10-C formulas and constants, resolution-scaled; some "
        "approximations and a few re-ordered severities)",
        "mCE as ImageNet-C defines it",
    ),
    note="Only the abstract is public; no headline number is confirmed, so none is quoted.",
)
