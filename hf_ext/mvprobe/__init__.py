"""MVProbe and ProbeX: weight-space probes that predict properties of trained networks from one weight
matrix, the input coercion from models and state dicts, and a digits model zoo; names resolve lazily.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
