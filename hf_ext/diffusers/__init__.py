"""diffusers components: attention processors for video diffusion transformers.

Names resolve lazily from the method registry (``from hf_ext.diffusers import apply_echo_attention``); the
first use of one imports diffusers (``pip install hf-ext[diffusers]``).
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
