"""The ``ert`` benchmark: ``hf-ext bench ert``."""
