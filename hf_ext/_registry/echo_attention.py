"""Registry entry of EchoAttention (reconstructed; not verified against the paper)."""

from hf_ext._registry import MethodInfo

METHOD = MethodInfo(
    id="echo_attention",
    name="EchoAttention",
    title="EchoAttention (title not confirmed; reconstructed from a one-line description)",
    venue="ICML 2026",
    arxiv=None,
    slot="diffusers attn processor",
    use="handle = apply_echo_attention(pipe)",
    host=(
        "diffusers attention processors (WanAttnProcessor / CogVideoXAttnProcessor2_0 subclasses via "
        "set_attn_processor)"
    ),
    extras=("diffusers",),
    public={
        "EchoAttentionConfig": "hf_ext.echo_attention.config",
        "EchoAttentionHandle": "hf_ext.echo_attention.handle",
        "EchoPipelineHandle": "hf_ext.echo_attention.handle",
        "EchoWanAttnProcessor": "hf_ext.echo_attention.processor_wan",
        "EchoCogVideoXAttnProcessor": "hf_ext.echo_attention.processor_cogvideox",
        "apply_echo_attention": "hf_ext.echo_attention.api",
        "calibrate_echo": "hf_ext.echo_attention.api",
        "block_sparse_attention": "hf_ext.kernels.block_sparse",
        "echo_merge": "hf_ext.kernels.echo_tiles",
        "pooled_tile_scores": "hf_ext.kernels.pooling",
    },
    citation=(
        "@inproceedings{echoattention2026,\n  title={EchoAttention},\n  booktitle={ICML},\n  year={2026},\n"
        "  note={title and authors not confirmed; hf-ext ships a reconstruction}\n}"
    ),
    reconstructed=(
        "the whole algorithm: tiles, pooled estimate, budget split, echo synthesis and its calibration",
        "pooled echo (default): the next-ranked skipped tiles synthesised from their pooled keys/values in "
        "the exact tiles' softmax, log-mass correction per frame offset; band echo (representative + linear "
        "map per frame offset) as a variant",
        "stage 1: pooled-echo log-mass gap weighted by estimated mass; band-echo regression over all group "
        "members within max_echo_distance, weighted by attention mass",
        "static (Lagrangian knapsack) and learned (Gumbel-softmax) routers",
        "joint text-video attention (CogVideoX): text rows/columns dense, text-key partial merged exactly "
        "by LSE, stage-2 errors measured on the joint output",
        "every default: block_size 64, budget 0.25, echo_share 0.1, echo_pool 8, max_echo_distance 4, "
        "dense schedule",
    ),
    note=(
        "EchoAttention (reconstructed; not verified against the paper). The 2.42x headline is not reproduced."
    ),
)
