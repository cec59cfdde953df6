"""The ``grounding_ids`` benchmark: ``hf-ext bench grounding_ids``."""
