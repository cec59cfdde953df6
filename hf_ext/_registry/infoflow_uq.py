from hf_ext._registry import MethodInfo

METHOD = MethodInfo(
    id="infoflow_uq",
    name="InfoFlow-UQ",
    title="Information Flow Reveals When to Trust Language Models",
    venue="ICML 2026",
    arxiv=None,
    slot="transformers LM + metrics",
    use="InformationFlowScorer(lm).trace(ids, ctx, at)",
    host="transformers causal LMs (forward hooks on self_attn / v_proj, eager attention) + torchmetrics",
    extras=("transformers",),
    public={
        "InformationFlowConfig": "hf_ext.infoflow_uq.config",
        "InformationFlowScorer": "hf_ext.infoflow_uq.scorer",
        "FlowTrace": "hf_ext.infoflow_uq.scorer",
        "RAGExample": "hf_ext.infoflow_uq.data",
        "make_rag_examples": "hf_ext.infoflow_uq.data",
        "encode_rag_example": "hf_ext.infoflow_uq.data",
        "flow_concentration": "hf_ext.infoflow_uq.core",
        "flow_simulatability": "hf_ext.infoflow_uq.core",
        "rank_average": "hf_ext.infoflow_uq.core",
        "claim_conditioned_probability": "hf_ext.infoflow_uq.core",
        "UncertaintyAUROC": "hf_ext.metrics.infoflow",
        "PredictionRejectionRatio": "hf_ext.metrics.infoflow",
        "uncertainty_auroc": "hf_ext.metrics.functional.infoflow",
        "prediction_rejection_ratio": "hf_ext.metrics.functional.infoflow",
        "stratified_auroc": "hf_ext.metrics.functional.infoflow",
    },
    public_extras={
        "flow_concentration": (),
        "flow_simulatability": (),
        "rank_average": (),
        "claim_conditioned_probability": (),
        "RAGExample": (),
        "make_rag_examples": (),
        "InformationFlowConfig": (),
        "UncertaintyAUROC": ("metrics",),
        "PredictionRejectionRatio": ("metrics",),
        "uncertainty_auroc": ("metrics",),
        "prediction_rejection_ratio": ("metrics",),
        "stratified_auroc": ("metrics",),
    },
    citation=(
        "@inproceedings{infoflow2026,\n"
        "  title     = {Information Flow Reveals When to Trust Language Models},\n"
        "  booktitle = {Proceedings of the 43rd International Conference on Machine Learning (ICML)},\n"
        "  year      = {2026},\n"
        "  note      = {ICML 2026 poster 60884; earlier version OpenReview gJi0Hp7nLI; authors and arXiv id "
        "not known to hf-ext}\n"
        "}"
    ),
    reconstructed=(
        "the contribution rule: attention x ||W_O^h v_j|| summed over heads (default), head-mean attention, "
        "or attention rollout with the residual identity",
        "attention sinks: rows restricted to the context tokens and renormalised onto the simplex",
        "layer aggregation: mean over all layers (a layer with no context mass is skipped); optionally each "
        "layer weighted by its share on the context before renormalising (the context-mass term)",
        "concentration = mean_l 1 - H(c_l)/log n_ctx (or Gini, top-k mass)",
        "simulatability = mean_l Pearson(c_l, r) (or Spearman, relevance mass); relevance from gold labels "
        "or lexical overlap",
        "combination: rank average of the two scores, or a cross-fitted logistic regression",
        "claim-conditioned probability baseline: NLI equivalence of the alternatives replaced by a "
        "word match",
        "the benchmark tasks: synthetic fictional-people RAG facts, and a set with distractor passages about "
        "the asked person, on Gemma-3-270M base",
    ),
    note=(
        "Information-flow style scores; the paper's exact definitions are not public. Only the two score "
        "concepts and AUROC evaluation come from the paper."
    ),
)
