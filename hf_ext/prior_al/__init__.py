"""PriorAL: pool-based active learning where a foundation-model prior and a small model decide together
which samples an annotator labels and which get free pseudo-labels; names resolve lazily.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
