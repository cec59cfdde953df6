"""CAMP training script for any launcher: ``python``, ``torchrun`` or ``accelerate launch``.

    torchrun --nproc-per-node 2 examples/train_camp.py --max-steps 2          # two CPU processes (gloo)
    accelerate launch --config_file examples/accelerate/ddp_gpu.yaml examples/train_camp.py --model <hub id>
    accelerate launch --config_file examples/accelerate/fsdp.yaml examples/train_camp.py --model <id>

Without ``--model`` it trains a tiny seeded Llama on built-in pairs (CPU, seconds); ``--data`` is a
JSON-lines file of ``prompt/chosen/rejected/truth_margin/help_margin`` rows (``hf_ext.ultrafeedback_to_camp``
writes them).
The script is the same on one process and on many: the Trainer reads the launcher's environment.
"""

from __future__ import annotations

import argparse
import copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="hub id or local path of a causal LM (default: a tiny seeded Llama)")
    parser.add_argument("--data", help="JSON-lines pairs with CAMP gap columns (default: built-in pairs)")
    parser.add_argument("--output-dir", default="camp-out")
    parser.add_argument("--max-steps", type=int, default=10)
    parser.add_argument("--per-device-batch-size", type=int, default=2)
    args = parser.parse_args()

    import torch
    from datasets import Dataset, load_dataset

    from hf_ext import CAMPConfig, CAMPTrainer

    if args.model:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(args.model)
        model = AutoModelForCausalLM.from_pretrained(args.model)
    else:
        from hf_ext.testing import tiny_llama, word_tokenizer

        tok = word_tokenizer()
        model = tiny_llama(vocab_size=len(tok))
    if args.data:
        pairs = load_dataset("json", data_files=args.data, split="train")
    else:
        pairs = Dataset.from_list(
            [
                {"prompt": "the capital city of rome", "chosen": "rome", "rejected": "paris",
                 "truth_margin": 1.0, "help_margin": -0.5},
                {"prompt": "the city of the river", "chosen": "paris", "rejected": "unknown",
                 "truth_margin": 0.5, "help_margin": 0.25},
            ]
            * 8
        )  # fmt: skip
    config = CAMPConfig(
        output_dir=args.output_dir,
        max_steps=args.max_steps,
        per_device_train_batch_size=args.per_device_batch_size,
        bf16=torch.cuda.is_available(),
        use_cpu=not torch.cuda.is_available(),
        report_to=[],
        save_strategy="no",
    )
    trainer = CAMPTrainer(
        model=model, ref_model=copy.deepcopy(model), args=config, train_dataset=pairs, processing_class=tok
    )
    trainer.train()
    if trainer.accelerator.is_main_process:
        print(f"world size {trainer.accelerator.num_processes}: final loss {trainer.state.log_history[-1]}")
    # Leaving the gloo group to interpreter exit can abort a rank ("terminate called without an active
    # exception") when its threads are torn down out of order; accelerate's end_training destroys it first.
    trainer.accelerator.end_training()


if __name__ == "__main__":
    main()
