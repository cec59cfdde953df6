from hf_ext._registry import MethodInfo

_M = "hf_ext.path_gfn"

METHOD = MethodInfo(
    id="path_gfn",
    name="Path GFlowNets",
    title="Path-dependent Discrete Amortized Inference",
    venue="ICML 2026 (oral)",
    arxiv="2608.08644",
    slot="torch modules + losses",
    use='LiftedPolicy(d, n_actions, memory="gru")',
    host=(
        "no host: self-contained torch GFlowNet package (environments, lifted policies, TB/DB/SubTB, trainer)"
    ),
    extras=(),
    public={
        "LiftedPolicy": f"{_M}.policy",
        "MarkovMemory": f"{_M}.memory",
        "GRUMemory": f"{_M}.memory",
        "LSTMMemory": f"{_M}.memory",
        "RSRWM": f"{_M}.memory",
        "LinesMemory": f"{_M}.memory",
        "TrajectoryBalance": f"{_M}.losses",
        "DetailedBalance": f"{_M}.losses",
        "SubTrajectoryBalance": f"{_M}.losses",
        "UniformBackward": f"{_M}.backward",
        "MarkovBackward": f"{_M}.backward",
        "SuffixMemoryBackward": f"{_M}.backward",
        "Trajectories": f"{_M}.sampling",
        "sample_trajectories": f"{_M}.sampling",
        "relogprob": f"{_M}.sampling",
        "BitSequence": f"{_M}.envs",
        "AliasedBitSequence": f"{_M}.envs",
        "HyperGrid": f"{_M}.envs",
        "AliasedHyperGrid": f"{_M}.envs",
        "exact_terminal_distribution": f"{_M}.eval",
        "l1_to_target": f"{_M}.eval",
        "GFNConfig": f"{_M}.config",
        "GFNTrainer": f"{_M}.trainer",
    },
    citation=(
        "@inproceedings{dasilva2026pathdependent,\n"
        "  title     = {Path-dependent Discrete Amortized Inference},\n"
        "  author    = {da Silva, Tiago and Whitammer and Lahlou, Salem},\n"
        "  booktitle = {Proceedings of the 43rd International Conference on Machine Learning (ICML)},\n"
        "  year      = {2026},\n"
        "  eprint    = {2608.08644},\n"
        "  archivePrefix = {arXiv}\n"
        "}"
    ),
    reconstructed=(
        "memory input psi(s_t) + emb(a_t) (the action that produced s_t); memory_input='state' is the "
        "paper's phi(s_t, W) literally",
        "head: 2-hidden-layer ReLU MLP (width 64) on [memory readout; psi(s_t)], shared by every memory",
        "R-SRWM shapes: input projection to d, (q, k, v, beta) from one linear map, M_0 = 0, softmax zeta, "
        "Givens-block rotation with learned angles, write key q; fast-weight form (the projection is not "
        "itself self-modified)",
        "LinesMemory readout W_t psi(s_t)",
        "backward policies valid on non-tree DAGs (uniform, Markov, suffix memory for TB only); a p_B "
        "conditioned on the forward memory is rejected",
        "DB and SubTB on lifted states with a flow head log F(s, W), log F_0 = log Z, log F_T = log R",
        "losses recompute log-probs by re-threading the memory from s_0; exploration mixes probabilities",
        "defaults: Adam 1e-3 (policy) and 1e-1 (log Z), epsilon 0.05, batch 64",
        "benchmark tasks: aliased bit sequences (4 modes with four ones) and a coarsened HyperGrid",
    ),
    note=(
        "The paper's code (ML-FGV/nais) and hyperparameters were not checked; the memories' unstated parts, "
        "DB/SubTB on lifted states and the benchmark tasks are hf-ext's reconstruction."
    ),
)
