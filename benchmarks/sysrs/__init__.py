"""The ``sysrs`` benchmark: ``hf-ext bench sysrs``."""
