"""ViewMask-1-to-3: multi-view generation by masked discrete diffusion over LFQ visual tokens (diffusers).

Names resolve lazily from the method registry; the first use of a host class imports diffusers.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
