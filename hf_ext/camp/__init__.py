"""CAMP (conflict-aware adaptive-margin preference alignment) on trl; names resolve lazily.

``core`` (pure torch loss), ``config``, ``collator``, ``trainer``, ``data`` (UltraFeedback helper). The
benchmark and its synthetic task are ``benchmarks/camp`` in the source repository.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
