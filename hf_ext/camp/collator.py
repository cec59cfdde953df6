"""``DataCollatorForCAMP``: trl's preference collator that also emits the per-pair CAMP columns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from trl.trainer.dpo_trainer import DataCollatorForPreference

from hf_ext._registry import paper


@dataclass
class DataCollatorForCAMP(DataCollatorForPreference):
    """``DataCollatorForPreference`` plus the CAMP columns as float32 tensors of shape ``[B]``.

    trl's collator silently drops unknown keys, which would turn CAMP into plain DPO. This one copies every
    column named in ``camp_keys`` that the examples carry (``truth_margin``, ``help_margin``, a conflict
    column).

    Args:
        camp_keys (`tuple[str, ...]`, *optional*, defaults to `()`):
            Example keys to emit, one float per pair.

    Example:
        >>> collator = DataCollatorForCAMP(pad_token_id=0, camp_keys=("truth_margin",))
        >>> example = {"prompt_ids": [1], "chosen_ids": [2], "rejected_ids": [3], "truth_margin": 0.5}
        >>> batch = collator([example])
        >>> batch["truth_margin"]
        tensor([0.5000])
    """

    _paper = paper("camp")

    camp_keys: tuple[str, ...] = ()

    def torch_call(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        output = super().torch_call(examples)
        for key in self.camp_keys:
            if key in examples[0]:
                output[key] = torch.tensor([float(example[key]) for example in examples], dtype=torch.float32)
        return output
