"""Settings of the digits model zoo that :func:`hf_ext.mvprobe.zoo.make_model_zoo` trains."""

from __future__ import annotations

from dataclasses import dataclass, field

from hf_ext._registry import paper
from hf_ext._validation import check_choice, check_float, check_int, check_sequence

ARCHS = ("mlp", "cnn")
TASKS = ("subset", "accuracy", "lr")


@dataclass
class ModelZooConfig:
    """One ancestor trained on all ten digits, then ``n_models`` fine-tuned copies [reconstructed zoo].

    Each member copies the ancestor, re-initialises the classification head and fine-tunes with Adam on a
    random subset of ``classes_per_model`` digits, with its own learning rate (log-uniform in ``lr_range``)
    and step count (uniform in ``finetune_steps``).
    """

    _paper = paper("mvprobe")

    n_models: int = field(default=300, metadata={"help": "Number of fine-tuned members."})
    arch: str = field(
        default="mlp",
        metadata={
            "help": "'mlp' (64-64-64-10, probed layer '2.weight', 64x64) or 'cnn' (conv 8-16 + linear, "
            "probed layer '3.weight', 16x8x3x3 flattened to 16x72)."
        },
    )
    dataset: str = field(default="digits", metadata={"help": "Training data: sklearn's 8x8 'digits'."})
    task: str = field(
        default="subset",
        metadata={
            "help": "Target: 'subset' (multi-hot fine-tuning classes), 'accuracy' (member test "
            "accuracy on its subset) or 'lr' (log10 learning rate)."
        },
    )
    classes_per_model: int = field(
        default=5, metadata={"help": "Digits in each member's fine-tuning subset."}
    )
    finetune_steps: tuple[int, int] = field(
        default=(100, 300), metadata={"help": "Inclusive range of fine-tuning Adam steps per member."}
    )
    lr_range: tuple[float, float] = field(
        default=(3e-4, 3e-3), metadata={"help": "Log-uniform range of the members' learning rates."}
    )
    ancestor_steps: int = field(default=400, metadata={"help": "Adam steps of the ancestor on all digits."})
    batch_size: int = field(default=64, metadata={"help": "Mini-batch size of every training step."})
    random_state: int = field(default=0, metadata={"help": "Seed of the whole zoo."})
    block_size: int | None = field(
        default=None,
        metadata={
            "help": "Members per training block. Each block draws its mini-batches from its own seeded "
            "stream, so `make_model_zoo(n_jobs=...)` trains blocks in parallel with the same result; "
            "None trains every member in one block (one stream)."
        },
    )

    def __post_init__(self) -> None:
        check_int("n_models", self.n_models, low=1)
        check_choice("arch", self.arch, ARCHS)
        check_choice("dataset", self.dataset, ("digits",))
        check_choice("task", self.task, TASKS)
        check_int("classes_per_model", self.classes_per_model, low=1, high=9)
        lo, hi = check_sequence(
            "finetune_steps", self.finetune_steps, lambda n, v: check_int(n, v, low=0), length=2
        )
        if lo > hi:
            raise ValueError(
                f"`finetune_steps` must be (low, high) with low <= high, got {self.finetune_steps!r}."
            )
        a, b = check_sequence(
            "lr_range", self.lr_range, lambda n, v: check_float(n, v, low=0, low_open=True), length=2
        )
        if a > b:
            raise ValueError(f"`lr_range` must be (low, high) with low <= high, got {self.lr_range!r}.")
        self.finetune_steps, self.lr_range = (lo, hi), (a, b)
        check_int("ancestor_steps", self.ancestor_steps, low=0)
        check_int("batch_size", self.batch_size, low=1)
        check_int("random_state", self.random_state, low=0)
        if self.block_size is not None:
            check_int("block_size", self.block_size, low=1)
