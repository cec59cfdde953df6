"""transformers decoding strategies (``model.generate(..., custom_generate=...)``), served from the registry.

``from hf_ext.generation import VegasConfig, vegas_generate`` imports transformers on first use only.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
