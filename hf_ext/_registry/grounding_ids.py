from hf_ext._registry import MethodInfo

_M = "hf_ext.grounding_ids"

METHOD = MethodInfo(
    id="grounding_ids",
    name="Grounding IDs",
    title="Uncovering Grounding IDs: How External Cues Shape Multimodal Binding",
    venue="ICML 2026",
    arxiv="2509.24072",
    slot="transformers processor",
    use="CuedProcessor(proc, GroundingCueOverlay(cfg))",
    host=(
        "transformers image processors / AutoProcessor of vision-language models (a cue-adding wrapper by "
        "composition) + analysis of LlavaForConditionalGeneration-style models"
    ),
    extras=("transformers",),
    public={
        "CueConfig": f"{_M}.config",
        "PartitionBox": f"{_M}.core",
        "partition_boxes": f"{_M}.core",
        "patch_partitions": f"{_M}.core",
        "alignment_margin": f"{_M}.core",
        "within_partition_alignment": f"{_M}.core",
        "modality_gap": f"{_M}.core",
        "attention_mass": f"{_M}.core",
        "GroundingCueOverlay": f"{_M}.cues",
        "CuedProcessor": f"{_M}.processor",
        "binding_report": f"{_M}.analysis",
        "analysis_forward": f"{_M}.analysis",
        "swap_hidden_states": f"{_M}.analysis",
        "swap_test": f"{_M}.analysis",
        "tiny_grounding_vlm": f"{_M}.model",
        "make_binding_task": f"{_M}.synthetic",
    },
    public_extras={
        "CueConfig": (),
        "PartitionBox": (),
        "partition_boxes": (),
    },
    citation=(
        "@inproceedings{groundingids2026,\n"
        "  title     = {Uncovering Grounding IDs: How External Cues Shape Multimodal Binding},\n"
        "  booktitle = {Proceedings of the 43rd International Conference on Machine Learning (ICML)},\n"
        "  year      = {2026},\n"
        "  eprint    = {2509.24072},\n"
        "  archivePrefix = {arXiv}\n"
        "}"
    ),
    reconstructed=(
        "cue parameters: line width max(1, round(S/128)) and glyph height max(5, 0.6 patch) in processed "
        "pixels, symbol set @ # $ % & * + =, glyph at the left edge (rows) or top-left corner, auto contrast",
        "structured-prompt template",
        "token maps from the processor geometry (LLaVA resize + centre crop + CLS offset; Qwen2-VL grid with "
        "2x2 merge)",
        "measurement formulas: alignment margin, within-partition alignment, modality gap, attention mass "
        "ratio to chance",
        "swap protocol: exchange a layer's hidden states of two equal-size token sets via forward hooks",
        "benchmark: tiny LLaVA from config trained from scratch on a synthetic row-binding task",
    ),
    note=(
        "No code was released with the paper; the cue geometry, prompts, token maps, metric formulas and the "
        "swap protocol are hf-ext's reconstruction. Nothing pretrained is used: the benchmark measures a "
        "tiny model trained from scratch, which cannot reproduce the paper's numbers."
    ),
)
