"""Keystone neurons (ICML 2026): discovery from a few prompts, ablation, and keystone-only fine-tuning via PEFT.

``core`` finds and scores neurons, ``ablate`` zeroes them, ``sets`` serialises them, ``config`` is the PEFT config,
``adapter`` freezes SHiRA pads and saves/loads, ``callback`` masks gradients in full-model ``Trainer`` runs.
"""

from __future__ import annotations

from hf_ext.peft.keystone.ablate import ablate_neurons, random_neuron_set
from hf_ext.peft.keystone.adapter import (
    attach_keystone_grad_mask,
    keystone_trainable_parameters,
    load_keystone_adapter,
    save_keystone_adapter,
)
from hf_ext.peft.keystone.callback import KeystoneGradMaskCallback
from hf_ext.peft.keystone.config import KeystoneConfig
from hf_ext.peft.keystone.core import (
    find_keystone_neurons,
    keystone_iou,
    pairwise_iou,
    select_k_by_ablation,
    text_nll,
)
from hf_ext.peft.keystone.sets import KeystoneSet

__all__ = [
    "KeystoneConfig",
    "KeystoneGradMaskCallback",
    "KeystoneSet",
    "ablate_neurons",
    "attach_keystone_grad_mask",
    "find_keystone_neurons",
    "keystone_iou",
    "keystone_trainable_parameters",
    "load_keystone_adapter",
    "pairwise_iou",
    "random_neuron_set",
    "save_keystone_adapter",
    "select_k_by_ablation",
    "text_nll",
]
