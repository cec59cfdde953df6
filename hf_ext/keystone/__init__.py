"""Keystone neurons (ICML 2026): discovery from a few prompts, ablation, keystone-only fine-tuning.

``core`` finds and scores neurons, ``ablate`` zeroes them, ``sets`` serialises them; ``tuner`` (``config``,
``layer``, ``model``) is the PEFT tuner (``peft_type`` ``"KEYSTONE"``); ``callback`` masks gradients in
full-model ``Trainer`` runs. The benchmark is ``benchmarks/keystone`` in the source repository.
Names resolve lazily: ``import hf_ext.keystone`` imports neither torch nor peft.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
