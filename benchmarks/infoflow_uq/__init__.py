"""The ``infoflow_uq`` benchmark: ``hf-ext bench infoflow_uq``."""
