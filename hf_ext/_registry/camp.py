from hf_ext._registry import MethodInfo

METHOD = MethodInfo(
    id="camp",
    name="CAMP",
    title="Conflict-Aware Adaptive Alignment for LLM Hallucination Mitigation",
    venue="ICML 2026",
    arxiv=None,
    slot="TRL DPOTrainer",
    use="CAMPTrainer(model, args=CAMPConfig(...))",
    host="TRL DPOTrainer subclass (CAMPConfig + CAMPTrainer)",
    extras=("trl",),
    public={
        "CAMPConfig": "hf_ext.camp.config",
        "CAMPTrainer": "hf_ext.camp.trainer",
        "DataCollatorForCAMP": "hf_ext.camp.collator",
        "camp_loss": "hf_ext.camp.core",
        "ultrafeedback_to_camp": "hf_ext.camp.data",
        "validate_camp_dataset": "hf_ext.camp.data",
    },
    citation=(
        "@inproceedings{camp2026,\n"
        "  title     = {Conflict-Aware Adaptive Alignment for {LLM} Hallucination Mitigation},\n"
        "  booktitle = {Proceedings of the 43rd International Conference on Machine Learning (ICML)},\n"
        "  year      = {2026},\n"
        "  note      = {ICML 2026 poster 60877; authors and arXiv id not known to hf-ext}\n"
        "}"
    ),
    reconstructed=(
        "the whole loss form (only the abstract was available)",
        "normalised truth/help gaps t, h = rating difference / scale width",
        "conflict indicator: sign rule 1[t*h<0], soft rule sigmoid(-kappa*t*h), or a precomputed column",
        "adaptive margin m = gamma*[(1-c)*g + c*(w_T*t + w_H*h)], signed consistent margin "
        "g = sign(t+h)*(|t|+|h|)/2",
        "conflict pairs: two-sided soft-label loss settling at beta*delta = m (default), or the one-sided "
        "-log sigmoid(beta*delta - m)",
        "weight mode: conflict pairs weighted by omega",
        "defaults gamma=1, w_T=w_H=0.5, kappa=10, omega=0.5, soft-label conflict loss",
        "synthetic knowledge-boundary benchmark",
    ),
    note=(
        "Reconstruction from the abstract only: no public code, and the full paper's conflict model, margin "
        "formula, beta and gamma were not checked. Do not read the benchmark as a reproduction."
    ),
)
