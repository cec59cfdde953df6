"""torchmetrics Metrics. Each class has a functional twin in :mod:`hf_ext.metrics.functional`.

Names resolve lazily from the method registry, so importing this package imports no host library.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
