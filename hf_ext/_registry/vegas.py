from hf_ext._registry import MethodInfo

METHOD = MethodInfo(
    id="vegas",
    name="Vegas",
    title="Vegas: Self-Speculative Decoding with Verification-Guided Sparse Attention",
    venue="ICML 2026",
    arxiv="2602.07223",
    slot="transformers generate",
    use="lm.generate(custom_generate=vegas_generate)",
    host="transformers generate(custom_generate=...) + registered attention function",
    extras=("transformers",),
    public={
        "VegasConfig": "hf_ext.vegas.config",
        "vegas_generate": "hf_ext.vegas.generate",
        "VegasStats": "hf_ext.vegas.generate",
        "VegasGenerateOutput": "hf_ext.vegas.generate",
        "InPlaceCache": "hf_ext.vegas.cache",
        "register_chunk_attention": "hf_ext.vegas.attention",
        "gathered_decode_attention": "hf_ext.kernels.gathered_attention",
        "chunk_attention": "hf_ext.kernels.chunked",
        "KeySelection": "hf_ext.kernels.chunked",
        "verify_importance": "hf_ext.kernels.importance",
        "importance_from_logits": "hf_ext.kernels.importance",
        "masked_topk": "hf_ext.kernels.importance",
        "page_minmax": "hf_ext.kernels.quest",
        "quest_page_scores": "hf_ext.kernels.quest",
    },
    citation=(
        "@inproceedings{yue2026vegas,\n"
        "  title = {Vegas: Self-Speculative Decoding with Verification-Guided Sparse Attention},\n"
        "  author = {Yue and Xue and Huang},\n"
        "  booktitle = {International Conference on Machine Learning (ICML)},\n"
        "  year = {2026},\n"
        "  eprint = {2602.07223},\n"
        "  archivePrefix = {arXiv}\n"
        "}"
    ),
    reconstructed=(
        "sliding-window layers drafted densely over their window (the paper's model has none)",
        "draft KV rollback by moving per-row lengths of a preallocated cache (vLLM overwrites its slots; "
        "the DynamicCache path crops)",
        "StreamingLLM window token-aligned instead of vLLM block-aligned",
        "Quest baseline (project baseline from the Quest paper, not in the Vegas code)",
        "drafts read their selection in place through an index list (vLLM reads through its page table)",
        "batch > 1 with per-row lengths on the preallocated cache; ragged rows are masked (vLLM slot "
        "rollback); a finished row stays in the batch tensors but reads only its verify chunk "
        "(vLLM drops it)",
        "on CPU the verify's attention and its score rows come from one C kernel (chunk_attention; the "
        "paper fuses the scores into its GPU attention kernel), and the selection after it (importance, "
        "top-k) runs in C too",
    ),
    note=(
        "Lossless: greedy output equals generate(do_sample=False); sampling uses the speculative "
        "rejection rule."
    ),
)
