from hf_ext._registry import MethodInfo

_K = "hf_ext.keystone"

METHOD = MethodInfo(
    id="keystone",
    name="Keystone neurons",
    title="Tiny Brains, Giant Impact: Uncovering the Keystone Neurons of LLM with Just a Few Prompts",
    venue="ICML 2026",
    arxiv="2605.24846",
    slot="PEFT tuner",
    use="get_peft_model(model, KeystoneConfig(...))",
    host=(
        "PEFT tuner (KeystoneConfig / KeystoneModel / KeystoneLayer, peft_type KEYSTONE) + forward-hook "
        "ablation on transformers causal LMs"
    ),
    extras=("peft", "transformers"),
    public={
        "KeystoneConfig": f"{_K}.tuner.config",
        "KeystoneModel": f"{_K}.tuner.model",
        "KeystoneLayer": f"{_K}.tuner.layer",
        "KeystoneSet": f"{_K}.sets",
        "KeystoneGradMaskCallback": f"{_K}.callback",
        "find_keystone_neurons": f"{_K}.core",
        "select_k_by_ablation": f"{_K}.core",
        "keystone_iou": f"{_K}.core",
        "pairwise_iou": f"{_K}.core",
        "text_nll": f"{_K}.core",
        "ablate_neurons": f"{_K}.ablate",
        "random_neuron_set": f"{_K}.ablate",
    },
    citation=(
        "@inproceedings{ji2026keystone,\n"
        "  title={Tiny Brains, Giant Impact: Uncovering the Keystone Neurons of {LLM} with Just a Few "
        "Prompts},\n"
        "  author={Ji and Chen and Cai and Wang and Zhang and Chua},\n"
        "  booktitle={International Conference on Machine Learning (ICML)},\n"
        "  year={2026},\n"
        "  note={arXiv:2605.24846}\n"
        "}"
    ),
    reconstructed=(
        "neuron = one output channel (weight row) of q/k/v/o/gate/up projections (down_proj excluded)",
        "score = min over tasks of per-module mean-normalised mean |activation|, BOS dropped",
        "global top-k selection and select_k_by_ablation rule",
        "keystone-only SFT parameterisation: a delta on the selected weight rows only (no bias, no column)",
    ),
    note=(
        "Method section unavailable; the statistic is a reconstruction that reproduces the collapse on "
        "Gemma-3-270M."
    ),
)
