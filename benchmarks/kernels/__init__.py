"""Kernel benchmarks: ``hf-ext bench kernels``."""
