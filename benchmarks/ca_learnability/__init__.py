"""The ``ca_learnability`` benchmark: ``hf-ext bench ca_learnability``."""
