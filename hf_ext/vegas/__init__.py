"""Vegas (arXiv 2602.07223): self-speculative decoding whose draft reads a KV subset chosen by the verify
pass.

Modules: ``config`` (``VegasConfig``), ``core`` (budget, scores, selectors), ``attention`` (the registered
``"hf_ext_vegas"`` attention and its state), ``generate`` (``vegas_generate``).
Public names are served lazily: ``from hf_ext.vegas import VegasConfig`` imports no host.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
