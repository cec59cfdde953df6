"""The ``camp`` benchmark: ``hf-ext bench camp``."""
