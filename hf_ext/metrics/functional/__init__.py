"""Functional forms of the Metrics in :mod:`hf_ext.metrics`.

Names resolve lazily from the method registry, so importing this package imports no host library.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
