"""Compute kernels: each op has a pure-PyTorch reference and a Triton path in the same module.

Ops choose their path at call time through :func:`hf_ext.kernels._dispatch.resolve_backend`;
importing this package never imports triton.
"""
