"""The ``prior_al`` benchmark: ``hf-ext bench prior_al``."""
