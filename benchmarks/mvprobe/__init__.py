"""The ``mvprobe`` benchmark: ``hf-ext bench mvprobe``."""
