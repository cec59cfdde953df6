"""Keystone neurons (ICML 2026): discovery from a few prompts, ablation, keystone-only fine-tuning.

``core`` finds and scores neurons, ``ablate`` zeroes them, ``sets`` serialises them; ``config``, ``layer`` and
``model`` are the PEFT tuner (``peft_type`` ``"KEYSTONE"``); ``callback`` masks gradients in full-model
``Trainer`` runs; ``legacy`` keeps the deprecated SHiRA-era helpers; ``bench`` is ``hf-ext bench keystone``.
Names resolve lazily: ``import hf_ext.peft.keystone`` imports neither torch nor peft.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
