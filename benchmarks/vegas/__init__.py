"""The ``vegas`` benchmark: ``hf-ext bench vegas``."""
