from hf_ext._registry import MethodInfo

_M = "hf_ext.seglens"

METHOD = MethodInfo(
    id="seglens",
    name="Med-SegLens",
    title="Med-SegLens: Latent-Level Model Diffing for Interpretable Medical Image Segmentation",
    venue="ICML 2026",
    arxiv="2602.10508",
    slot="forward hooks (SegFormer)",
    use="SparseAutoencoder(d_in=64, k=8).fit(acts)",
    host=(
        "no host: sparse autoencoders on forward-hooked activations of transformers "
        "SegformerForSemanticSegmentation (or any nn.Module, e.g. the bundled TinyUNet)"
    ),
    extras=(),
    public={
        "SAEConfig": f"{_M}.config",
        "InterventionConfig": f"{_M}.config",
        "SparseAutoencoder": f"{_M}.sae",
        "ActivationStore": f"{_M}.activations",
        "Activations": f"{_M}.activations",
        "capture_site": f"{_M}.activations",
        "resolve_site": f"{_M}.activations",
        "LatentIntervention": f"{_M}.intervene",
        "align_saes": f"{_M}.align",
        "LatentAlignment": f"{_M}.align",
        "latent_stats": f"{_M}.diff",
        "diff_report": f"{_M}.diff",
        "DiffReport": f"{_M}.diff",
        "select_intervention": f"{_M}.diff",
        "make_cohorts": f"{_M}.synthetic",
        "Cohort": f"{_M}.synthetic",
        "TinyUNet": f"{_M}.models",
        "lesion_dice": f"{_M}.core",
    },
    public_extras={
        "align_saes": ("sklearn",),
        "LatentAlignment": ("sklearn",),
    },
    citation=(
        "@inproceedings{medseglens2026,\n"
        "  title     = {Med-SegLens: Latent-Level Model Diffing for Interpretable Medical Image "
        "Segmentation},\n"
        "  booktitle = {Proceedings of the 43rd International Conference on Machine Learning (ICML)},\n"
        "  year      = {2026},\n"
        "  eprint    = {2602.10508},\n"
        "  archivePrefix = {arXiv}\n"
        "}"
    ),
    reconstructed=(
        "activation sites: segformer.stages.0 (the benchmark's, with a 32x SAE), stages.2 or "
        "decode_head.linear_fuse for SegFormer, the bottleneck or a decoder block for a U-Net; one SAE "
        "sample per spatial position",
        "activation normalisation (per-channel mean, one global scale so that E|a|^2 = C), stored in the SAE",
        "BatchTopK SAE equations, defaults (8x expansion, k, k_aux = d/2, alpha_aux = 1/32, Adam lr "
        "2e-4/sqrt(n/2^14), threshold EMA 0.999) and dead-latent resampling from the public TopK/BatchTopK "
        "SAE literature; TopK and L1 variants beside it",
        "latent alignment: Hungarian matching on decoder cosine (one model) or on Pearson correlation of "
        "latent maps over shared images (two models), thresholds 0.7 and 0.5",
        "differential reliance: firing-frequency log-ratio between cohorts and ablation Dice effects",
        "error-preserving edit a' = a + W_dec (z' - z) (scale, add, clamp, ablate) and the selection rule: "
        "latents ranked by differential reliance, edit sizes by grid search on a calibration split",
        "the gate: edits act only where one of the latents most specific to the shifted cohort fires",
        "failure = lesion Dice < 0.5, recovered when Dice >= 0.5 after the edit",
        "benchmark cohorts: synthetic phantoms (ellipse brain, edema ring, core blob); the benchmark's shift "
        "is a grating artefact over the brain that mimics the training cohort's lesion texture; no MRI data",
    ),
    note=(
        "No public code of Med-SegLens was found; the SAE, alignment, diffing statistics and edit-selection "
        "rule are hf-ext's reconstruction, and the benchmark uses synthetic phantoms only."
    ),
)
