"""Dem-HEC: entropy-guided robust fine-tuning as a timm training task.

Names resolve lazily from the method registry, so importing this package imports neither torch nor timm.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
