"""The ``ai_grading`` benchmark: ``hf-ext bench ai_grading``."""
