"""EchoAttention (reconstructed; not verified against the paper): sparse + echo attention for video DiTs.

Names resolve lazily from the method registry; the first use of one imports diffusers.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
