from hf_ext._registry import MethodInfo

_M = "hf_ext.scm_grpo"
_PURE_PYTHON = (
    "SCMGraph",
    "parse_scm_graph",
    "normalize_label",
    "SCMGraphFormatReward",
    "SCMLabelReward",
    "SCMDepthReward",
    "SCMCombinedReward",
    "SCMPromptBuilder",
    "check_scm_dataset",
    "make_synthetic_mhfv",
    "load_hover",
    "load_exfever",
    "depth_binned_accuracy",
    "verdict_token_weights",
)

METHOD = MethodInfo(
    id="scm_grpo",
    name="SCM-GRPO",
    title=(
        "Grounding Multi-Hop Reasoning in Structural Causal Models via Group Relative Policy Optimization"
    ),
    venue="ICML 2026",
    arxiv="2605.01482",
    slot="TRL GRPOTrainer rewards",
    use="SCMGRPOTrainer(model, train_dataset=dataset)",
    host="TRL GRPOTrainer reward functions (rule rewards, parser, prompt builder) + thin SCMGRPOTrainer",
    extras=("trl",),
    public={
        "SCMGraph": f"{_M}.core",
        "parse_scm_graph": f"{_M}.core",
        "normalize_label": f"{_M}.core",
        "SCMGraphFormatReward": f"{_M}.rewards",
        "SCMLabelReward": f"{_M}.rewards",
        "SCMDepthReward": f"{_M}.rewards",
        "SCMCombinedReward": f"{_M}.rewards",
        "SCMPromptBuilder": f"{_M}.prompt",
        "check_scm_dataset": f"{_M}.data",
        "make_synthetic_mhfv": f"{_M}.data",
        "load_hover": f"{_M}.data",
        "load_exfever": f"{_M}.data",
        "depth_binned_accuracy": f"{_M}.analysis",
        "verdict_token_weights": f"{_M}.warm_start",
        "verdict_weighted_loss": f"{_M}.warm_start",
        "SCMGRPOConfig": f"{_M}.config",
        "SCMGRPOTrainer": f"{_M}.trainer",
    },
    public_extras={name: () for name in (*_PURE_PYTHON, "verdict_weighted_loss")},  # torch only
    citation=(
        "@inproceedings{scmgrpo2026,\n"
        "  title     = {Grounding Multi-Hop Reasoning in Structural Causal Models via Group Relative "
        "Policy Optimization},\n"
        "  booktitle = {Proceedings of the 43rd International Conference on Machine Learning (ICML)},\n"
        "  year      = {2026},\n"
        "  eprint    = {2605.01482},\n"
        "  archivePrefix = {arXiv},\n"
        "  note      = {v3; authors not known to hf-ext}\n"
        "}"
    ),
    reconstructed=(
        "output contract: <graph> with 'E<i>: fact' / 'C: claim' node lines and 'X -> Y' edge lines, then "
        "<answer>LABEL</answer>",
        "format reward r_fmt: tags unique and ordered, >= 1 E and exactly one C, declared endpoints, no "
        "self-loops, acyclic (Kahn), C reachable from an E, answer in the label set",
        "depth d: longest path into C (or the number of E nodes reaching C); target d* = num_hops, else 3",
        "structure reward f(d) = exp(-(d - d*)^2 / (2 sigma^2)), sigma = 1, gated by label correctness",
        "total r = r_acc + 0.5 r_fmt + 0.5 r_acc f(d) as three trl reward functions with weights "
        "[1, 0.5, 0.5]",
        "the 'dynamic' depth/conciseness trade-off: an optional schedule(global_step) multiplier",
        "GRPO settings: num_generations=8, beta=0, loss_type='dapo', scale_rewards='group'",
        "label aliases of HoVer and EX-FEVER",
        "synthetic multi-hop world and its benchmark",
        "the warm start: SFT with the loss on the verdict tokens weighted up (verdict_weighted_loss)",
    ),
    note=(
        "Only the abstract and introduction were available: the output format, reward terms, weights and "
        "GRPO settings are hf-ext's reconstruction, and the CPU benchmark on a synthetic world shows the "
        "reward mechanism, not the paper's HoVer / EX-FEVER figures."
    ),
)
