"""The ``seglens`` benchmark: ``hf-ext bench seglens``."""
