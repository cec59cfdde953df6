"""Compute kernels: each op has a pure-PyTorch reference and a Triton path in the same module.

Ops choose their path at call time through :func:`hf_ext.kernels._dispatch.resolve_backend`. Names resolve
lazily from the method registry (``from hf_ext.kernels import block_sparse_attention``), so importing this
package imports neither torch nor triton.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
