"""The ``viewmask`` benchmark: ``hf-ext bench viewmask``."""
