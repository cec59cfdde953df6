"""OCR-conditioned, rubric-guided AI grading and its evaluation protocol (``hf-ext bench ai_grading``).

``from hf_ext.ai_grading import RubricGrader`` imports no host; the transformers backend imports
transformers on first use only.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
