"""The ``mafe`` benchmark: ``hf-ext bench mafe``."""
