"""diffusers components: attention processors for video diffusion transformers.

Importing this package imports diffusers (``pip install hf-ext[diffusers]``).
"""

from hf_ext.diffusers.echo_attention import (
    EchoAttentionConfig,
    EchoAttentionHandle,
    EchoCogVideoXAttnProcessor,
    EchoWanAttnProcessor,
    apply_echo_attention,
    calibrate_echo,
)

__all__ = [
    "EchoAttentionConfig",
    "EchoAttentionHandle",
    "EchoCogVideoXAttnProcessor",
    "EchoWanAttnProcessor",
    "apply_echo_attention",
    "calibrate_echo",
]
