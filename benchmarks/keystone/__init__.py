"""The ``keystone`` benchmark: ``hf-ext bench keystone``."""
