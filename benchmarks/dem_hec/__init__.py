"""The ``dem_hec`` benchmark: ``hf-ext bench dem_hec``."""
