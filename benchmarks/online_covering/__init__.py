"""The ``online_covering`` benchmark: ``hf-ext bench online_covering``."""
