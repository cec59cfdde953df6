"""EchoAttention (reconstructed; not verified against the paper): sparse + echo attention for video DiTs."""

from hf_ext.diffusers.echo_attention.api import EchoAttentionHandle, apply_echo_attention, calibrate_echo
from hf_ext.diffusers.echo_attention.cogvideox import EchoCogVideoXAttnProcessor
from hf_ext.diffusers.echo_attention.config import EchoAttentionConfig
from hf_ext.diffusers.echo_attention.processors import EchoWanAttnProcessor

__all__ = [
    "EchoAttentionConfig",
    "EchoAttentionHandle",
    "EchoCogVideoXAttnProcessor",
    "EchoWanAttnProcessor",
    "apply_echo_attention",
    "calibrate_echo",
]
