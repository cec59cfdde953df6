"""The ``path_gfn`` benchmark: ``hf-ext bench path_gfn``."""
