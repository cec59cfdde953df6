"""Training arguments for short, deterministic CPU runs of a ``transformers.Trainer`` (or a TRL subclass)."""

from __future__ import annotations

from typing import Any


def cpu_training_args(output_dir: str, **overrides: Any) -> dict[str, Any]:
    """Keyword arguments for ``TrainingArguments`` (or a TRL config) that train on the CPU in fp32, seeded,
    with no reporting, saving, progress bar or data-loader workers, logging every step.

    ``overrides`` replace or add fields (``max_steps``, ``per_device_train_batch_size``, ...).
    """
    return {
        "output_dir": output_dir,
        "use_cpu": True,
        "bf16": False,
        "report_to": [],
        "save_strategy": "no",
        "disable_tqdm": True,
        "logging_steps": 1,
        "seed": 0,
        "dataloader_num_workers": 0,
        **overrides,
    }
