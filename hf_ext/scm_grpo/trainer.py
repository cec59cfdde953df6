"""``SCMGRPOTrainer``: trl's ``GRPOTrainer``, unmodified, with SCM-GRPO's reward set wired in by default."""

from __future__ import annotations

from typing import Any

from datasets import Dataset
from trl import GRPOTrainer
from trl.trainer.utils import get_config_model_id

from hf_ext._registry import paper
from hf_ext.scm_grpo.config import SCMGRPOConfig
from hf_ext.scm_grpo.data import check_scm_dataset
from hf_ext.scm_grpo.rewards import SCMDepthReward, SCMGraphFormatReward, SCMLabelReward


def default_rewards(args: SCMGRPOConfig) -> list[Any]:
    """``[SCMLabelReward, SCMGraphFormatReward, SCMDepthReward]`` built from ``args`` [reconstructed]."""
    return [
        SCMLabelReward(args.scm_label_key, args.scm_label_set),
        SCMGraphFormatReward(args.scm_label_set, require_all_connected=args.scm_require_all_connected),
        SCMDepthReward(
            args.scm_target_key,
            args.scm_default_target,
            args.scm_sigma,
            gate_on_correct=args.scm_gate_on_correct,
            label_key=args.scm_label_key,
            label_set=args.scm_label_set,
            depth=args.scm_depth,
        ),
    ]


class SCMGRPOTrainer(GRPOTrainer):
    """GRPO with SCM-GRPO's rule rewards: label, graph format and gated depth (all [reconstructed]).

    A convenience over the stock ``trl.GRPOTrainer``, which it does not change: with ``reward_funcs=None`` it
    passes :func:`default_rewards` and, when ``args.reward_weights`` is unset, the weights
    ``[1, scm_format_weight, scm_depth_weight]``; a ``datasets.Dataset`` is checked up front with
    :func:`hf_ext.scm_grpo.data.check_scm_dataset`, so a missing column or an unknown label fails before
    any generation. trl logs ``rewards/scm_label/mean``, ``rewards/scm_format/mean``,
    ``rewards/scm_depth/mean`` and the ``scm/*`` metrics of the rewards.

    Args:
        model: As in ``GRPOTrainer``.
        reward_funcs: As in ``GRPOTrainer``; ``None`` uses the SCM reward set.
        args (`SCMGRPOConfig`, *optional*): The configuration; a default ``SCMGRPOConfig`` when ``None``.
        train_dataset: Rows with a ``prompt`` (e.g. from :class:`SCMPromptBuilder`), the gold label and the
            target depth columns.
        eval_dataset: Optional; same columns.
        processing_class: As in ``GRPOTrainer``.
        **kwargs: Passed to ``GRPOTrainer`` (``peft_config``, ``callbacks``...).

    Example:
        >>> import datasets, tempfile
        >>> from hf_ext.testing import tiny_llama, word_tokenizer
        >>> tok = word_tokenizer(["claim", "a", "b", "<graph>", "</graph>"])
        >>> ds = datasets.Dataset.from_list([{"prompt": "claim a", "label": "SUPPORTED", "num_hops": 2}] * 4)
        >>> cfg = SCMGRPOConfig(output_dir=tempfile.mkdtemp(), max_steps=1, per_device_train_batch_size=4,
        ...                     num_generations=4, max_completion_length=4, report_to=[], use_cpu=True,
        ...                     bf16=False, disable_tqdm=True, save_strategy="no")
        >>> trainer = SCMGRPOTrainer(tiny_llama(vocab_size=len(tok)), args=cfg, train_dataset=ds,
        ...                          processing_class=tok)
        >>> trainer.reward_func_names
        ['scm_label', 'scm_format', 'scm_depth']
    """

    _tag_names = ["trl", "grpo", "scm-grpo", "hf-ext"]
    _name = "SCM-GRPO"
    _paper = paper("scm_grpo")  # type: ignore[assignment]  # trl types it dict[str, str]; ours has a list too
    args: SCMGRPOConfig

    def __init__(
        self,
        model: Any,
        reward_funcs: Any = None,
        args: SCMGRPOConfig | None = None,
        train_dataset: Any = None,
        eval_dataset: Any = None,
        processing_class: Any = None,
        **kwargs: Any,
    ) -> None:
        if args is None:
            name = model if isinstance(model, str) else get_config_model_id(model.config) or "model"
            args = SCMGRPOConfig(output_dir=f"{name.split('/')[-1]}-SCM-GRPO")
        elif not isinstance(args, SCMGRPOConfig):
            raise TypeError(
                f"`args` must be an SCMGRPOConfig, got {type(args).__name__}. Use SCMGRPOConfig(...), or the "
                "stock GRPOTrainer with the SCM reward functions."
            )
        if reward_funcs is None:
            reward_funcs = default_rewards(args)
            if args.reward_weights is None:
                args.reward_weights = [1.0, args.scm_format_weight, args.scm_depth_weight]
        named = [("train_dataset", train_dataset)]
        if isinstance(eval_dataset, dict):
            named += [(f"eval_dataset[{k!r}]", v) for k, v in eval_dataset.items()]
        else:
            named.append(("eval_dataset", eval_dataset))
        for name, dataset in named:
            if isinstance(dataset, Dataset):
                try:
                    check_scm_dataset(
                        dataset,
                        label_key=args.scm_label_key,
                        target_key=args.scm_target_key,
                        label_set=args.scm_label_set,
                        default_target=args.scm_default_target,
                    )
                except (KeyError, ValueError) as err:
                    raise type(err)(f"`{name}`: {err.args[0]}") from None
        super().__init__(
            model,
            reward_funcs=reward_funcs,
            args=args,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            processing_class=processing_class,
            **kwargs,
        )
