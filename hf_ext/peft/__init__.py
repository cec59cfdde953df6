"""PEFT host components: tuners registered with peft; names resolve lazily from the registry.

``from hf_ext.peft import KeystoneConfig`` imports peft on first use; ``import hf_ext.peft`` imports nothing
heavy.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
