"""TRL host components (``DPOTrainer``/``DPOConfig`` subclasses); names resolve lazily from the registry.

``from hf_ext.trl import CAMPTrainer`` imports trl on first use; ``import hf_ext.trl`` imports nothing heavy.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
