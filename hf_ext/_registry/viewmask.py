"""Registry entry of ViewMask-1-to-3 (masked discrete diffusion for multi-view generation)."""

from hf_ext._registry import MethodInfo

_HOST = (
    "ViewMaskPipeline",
    "ViewMaskPipelineOutput",
    "ViewMaskTransformer",
    "LFQAutoencoder",
    "train_lfq_autoencoder",
    "train_viewmask",
    "tokenize_views",
)
_TORCH = (
    "LFQTrainingConfig",
    "ViewMaskTrainingConfig",
    "lfq_quantize",
    "lfq_aux_loss",
    "viewmask_masking",
    "viewmask_loss",
    "VoxelObject",
    "random_voxel_object",
    "render_views",
    "procedural_dataset",
    "silhouettes",
    "mirror_iou",
    "visual_hull",
)

METHOD = MethodInfo(
    id="viewmask",
    name="ViewMask-1-to-3",
    title=(
        "ViewMask-1-to-3: Multi-View Consistent Image Generation via Multimodal Discrete Diffusion Models"
    ),
    venue="ICML 2026",
    arxiv="2512.14099",
    slot="diffusers pipeline",
    use="ViewMaskPipeline(...)(image, prompt).images",
    host=(
        "diffusers DiffusionPipeline (ViewMaskPipeline on AmusedScheduler) + ModelMixin models "
        "(LFQAutoencoder, ViewMaskTransformer)"
    ),
    extras=("diffusers", "metrics"),
    public={
        "ViewMaskPipeline": "hf_ext.viewmask.pipeline",
        "ViewMaskPipelineOutput": "hf_ext.viewmask.pipeline",
        "ViewMaskTransformer": "hf_ext.viewmask.transformer_viewmask",
        "LFQAutoencoder": "hf_ext.viewmask.autoencoder_lfq",
        "LFQTrainingConfig": "hf_ext.viewmask.config",
        "ViewMaskTrainingConfig": "hf_ext.viewmask.config",
        "lfq_quantize": "hf_ext.viewmask.core",
        "lfq_aux_loss": "hf_ext.viewmask.core",
        "viewmask_masking": "hf_ext.viewmask.core",
        "viewmask_loss": "hf_ext.viewmask.core",
        "train_lfq_autoencoder": "hf_ext.viewmask.training",
        "train_viewmask": "hf_ext.viewmask.training",
        "tokenize_views": "hf_ext.viewmask.training",
        "VoxelObject": "hf_ext.viewmask.data",
        "random_voxel_object": "hf_ext.viewmask.data",
        "render_views": "hf_ext.viewmask.data",
        "procedural_dataset": "hf_ext.viewmask.data",
        "viewmask_prompt_tokenizer": "hf_ext.viewmask.data",
        "silhouettes": "hf_ext.viewmask.eval",
        "mirror_iou": "hf_ext.viewmask.eval",
        "visual_hull": "hf_ext.viewmask.eval",
    },
    public_extras={
        **{name: ("diffusers",) for name in _HOST},
        **{name: () for name in _TORCH},
        "viewmask_prompt_tokenizer": ("transformers",),
    },
    citation=(
        "@inproceedings{zhu2026viewmask,\n"
        "  title     = {{ViewMask-1-to-3}: Multi-View Consistent Image Generation via Multimodal Discrete "
        "Diffusion Models},\n"
        "  author    = {Zhu and Huang and Sun and Luo and Zhang and Li},\n"
        "  booktitle = {Proceedings of the 43rd International Conference on Machine Learning (ICML)},\n"
        "  year      = {2026},\n"
        "  eprint    = {2512.14099},\n"
        "  archivePrefix = {arXiv}\n"
        "}"
    ),
    reconstructed=(
        "LFQ tokenizer details (MAGVIT-v2 / vector-quantize-pytorch LFQ defaults: entropy weight 0.1, "
        "commitment 0.25, inverse temperature 100, diversity gamma 1); GAN and perceptual losses left out",
        "sequence layout `[text][view 0][view 1..V-1]` with token + view + 2-D position + segment "
        "embeddings, "
        "one table of size T_text + K + 1, an output head of exactly K logits",
        "training schedule: r ~ U(0, 1), ratio cos(pi/2 r), max(1, ceil(ratio N_tgt)) masked positions drawn "
        "jointly over the target views (MaskGIT-style)",
        "sampling through diffusers' AmusedScheduler with starting_mask_ratio (V-1)/V, temperature (2, 0)",
        "every default: 4 views at azimuths 0/90/180/270, 8-bit codes, 4x downsampling, 4 layers x 128",
        "procedural voxel-box benchmark (GSO / 3D-FUTURE and MAGVIT-v2 weights are not available offline)",
    ),
    note=(
        "No code is public; the backbone, tokenizer size, camera poses and sampler settings are "
        "reconstructed. The benchmark uses synthetic voxel objects; the paper's GSO / 3D-FUTURE numbers are "
        "not reproduced."
    ),
)
