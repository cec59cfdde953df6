"""``CAMPTrainer``: trl's ``DPOTrainer`` with CAMP's conflict-aware per-pair margin or weight.

trl 1.16 has no per-pair loss hook, so this overrides the private ``DPOTrainer._compute_loss``: the policy
log-prob block and the metric logging are copied from trl 1.16.0 (the reference log-probs reuse trl's own
``compute_ref_log_probs``), and only the loss line differs. A version guard, a source-hash test and a parity
test against stock ``loss_type="sigmoid"`` catch any change in trl.
"""

from __future__ import annotations

import inspect
import logging
import warnings
from typing import Any

import torch
from accelerate.utils import is_peft_model
from datasets import Dataset
from trl import DPOTrainer
from trl.trainer.dpo_trainer import DataCollatorForPreference
from trl.trainer.utils import get_config_model_id

from hf_ext._registry import paper
from hf_ext.camp.collator import DataCollatorForCAMP
from hf_ext.camp.config import CAMPConfig
from hf_ext.camp.core import camp_loss
from hf_ext.camp.data import validate_camp_dataset

logger = logging.getLogger(__name__)

_EXPECTED_SIGNATURE = "(self, model, inputs, return_outputs)"
if (
    str(inspect.signature(DPOTrainer._compute_loss)) != _EXPECTED_SIGNATURE
):  # pragma: no cover - version guard
    import trl

    raise ImportError(f"hf_ext CAMPTrainer supports trl 1.16.x; found {trl.__version__}")


class CAMPTrainer(DPOTrainer):
    """DPO with CAMP's conflict-aware adaptive margin (or weight) per preference pair.

    **Reconstruction:** only the paper's abstract was available. The conflict indicator (sign/soft rule or a
    precomputed column), the margin ``m = gamma * [(1 - c) * g + c * (w_T * t + w_H * h)]`` with the signed
    consistent margin ``g = sign(t + h) * (|t| + |h|) / 2``, the two-sided soft-label loss of conflict pairs
    (they settle at ``beta * delta = m`` rather than follow the overall label), the weight-mode alternative
    and all defaults are ours (see :func:`hf_ext.camp.core.camp_loss`). A per-sample ``beta`` reading is
    possible and not implemented.

    Drop-in for ``trl.DPOTrainer``: same arguments, plus dataset columns ``truth_margin`` and ``help_margin``
    (normalised gaps in [-1, 1], e.g. from :func:`hf_ext.camp.data.ultrafeedback_to_camp`) and optionally
    a conflict column. Works with an explicit ``ref_model``, ``precompute_ref_log_probs=True`` and PEFT
    adapters (reference = adapter disabled), gradient accumulation, ``save_model`` and checkpoint resume.
    Besides trl's usual metrics it logs ``camp/conflict_frac``, ``camp/margin_mean`` (margin mode),
    ``camp/weight_mean`` (weight mode), and ``rewards/margins_conflict`` / ``rewards/margins_consistent``
    (mean ``beta * delta`` over pairs with ``c >= 0.5`` / ``c < 0.5``; skipped for a batch where a group is
    empty).

    Args:
        model: As in ``DPOTrainer``.
        ref_model: As in ``DPOTrainer``. Required for a non-PEFT model built in memory (no
            ``config._name_or_path`` to reload the reference from) unless ``precompute_ref_log_probs=True``.
        args (`CAMPConfig`, *optional*): The configuration; a default ``CAMPConfig`` when ``None``.
        data_collator: As in ``DPOTrainer``; the default becomes :class:`DataCollatorForCAMP`. A custom
            collator must emit the CAMP columns as float tensors of shape ``[B]``.
        train_dataset: Preference dataset with the CAMP columns.
        eval_dataset: Optional; same columns.
        processing_class: As in ``DPOTrainer``.
        **kwargs: Passed to ``DPOTrainer`` (``peft_config``, ``callbacks``, ``optimizers``...).

    Example:
        >>> import copy, datasets, tempfile
        >>> from hf_ext.testing import tiny_llama, word_tokenizer
        >>> tok = word_tokenizer(["q", "?", "a", "b"])
        >>> model = tiny_llama(vocab_size=len(tok))
        >>> ds = datasets.Dataset.from_list([{"prompt": "q ?", "chosen": "a", "rejected": "b",
        ...                                   "truth_margin": -0.5, "help_margin": 0.5}] * 4)
        >>> cfg = CAMPConfig(output_dir=tempfile.mkdtemp(), max_steps=1, per_device_train_batch_size=2,
        ...                  report_to=[], use_cpu=True, bf16=False, disable_tqdm=True, save_strategy="no")
        >>> trainer = CAMPTrainer(model=model, ref_model=copy.deepcopy(model), args=cfg, train_dataset=ds,
        ...                       processing_class=tok)
        >>> trainer.train().global_step  # the printed dict is trl's end-of-training log  # doctest: +ELLIPSIS
        {...'camp/conflict_frac': '1'...}
        1
    """

    _tag_names = ["trl", "dpo", "camp", "hf-ext"]
    _name = "CAMP"
    _paper = paper("camp")  # type: ignore[assignment]  # trl types it dict[str, str]; ours has a list too
    args: CAMPConfig

    def __init__(
        self,
        model: Any,
        ref_model: Any = None,
        args: CAMPConfig | None = None,
        data_collator: Any = None,
        train_dataset: Any = None,
        eval_dataset: Any = None,
        processing_class: Any = None,
        **kwargs: Any,
    ) -> None:
        if args is None:
            name = model if isinstance(model, str) else get_config_model_id(model.config) or "model"
            args = CAMPConfig(output_dir=f"{name.split('/')[-1]}-CAMP")
        elif not isinstance(args, CAMPConfig):
            raise TypeError(f"`args` must be a CAMPConfig, got {type(args).__name__}. Use CAMPConfig(...).")
        in_memory = not isinstance(model, str) and not get_config_model_id(model.config)
        uses_peft = kwargs.get("peft_config") is not None or is_peft_model(model)
        if ref_model is None and in_memory and not uses_peft and not args.precompute_ref_log_probs:
            raise ValueError(
                "`ref_model` is None and `model` was built in memory (no `config._name_or_path` to reload "
                "the reference from). Pass `ref_model=copy.deepcopy(model)`, set "
                "`precompute_ref_log_probs=True`, or train a PEFT adapter (`peft_config=...`)."
            )
        self._camp_keys = tuple(
            k for k in (args.truth_margin_key, args.help_margin_key, args.conflict_key) if k is not None
        )
        for name, dataset in [("train_dataset", train_dataset), *_named(eval_dataset)]:
            self._validate(name, dataset, args)
        super().__init__(
            model,
            ref_model=ref_model,
            args=args,
            data_collator=data_collator,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            processing_class=processing_class,
            **kwargs,
        )
        if data_collator is None and type(self.data_collator) is DataCollatorForPreference:  # trl's default
            fields = {
                k: getattr(self.data_collator, k) for k in DataCollatorForPreference.__dataclass_fields__
            }
            self.data_collator = DataCollatorForCAMP(**fields, camp_keys=self._camp_keys)

    def _required_keys(self, args: CAMPConfig) -> tuple[str, ...]:
        if args.camp_mode == "off":
            return ()
        gaps = (args.truth_margin_key, args.help_margin_key)
        if args.conflict_key is None:
            return gaps
        return (*gaps, args.conflict_key) if args.camp_mode == "margin" else (args.conflict_key,)

    def _validate(self, name: str, dataset: Any, args: CAMPConfig) -> None:
        if not isinstance(dataset, Dataset) or args.camp_mode == "off":
            return  # IterableDataset: the keys are checked per batch in `_compute_loss`
        needs_gaps = args.truth_margin_key in self._required_keys(args)
        try:
            stats = validate_camp_dataset(
                dataset,
                truth_margin_key=args.truth_margin_key,
                help_margin_key=args.help_margin_key,
                conflict_key=args.conflict_key,
                rule=args.conflict_rule,
                kappa=args.camp_kappa,
                require_margins=needs_gaps,
            )
        except ValueError as err:
            raise ValueError(f"`{name}`: {err}") from None
        logger.info("CAMP %s: %s", name, stats)

    def _set_signature_columns_if_needed(self) -> None:
        super()._set_signature_columns_if_needed()
        columns: list[str] = self._signature_columns  # type: ignore[assignment]  # a list once set
        columns += [k for k in self._camp_keys if k not in columns]

    def compute_ref_log_probs(self, model: Any, inputs: dict[str, Any]) -> Any:
        """trl's reference log-probs, with the CAMP columns kept out of the model's keyword arguments."""
        return super().compute_ref_log_probs(
            model, {k: v for k, v in inputs.items() if k not in self._camp_keys}
        )

    def _compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool) -> Any:
        camp = {k: inputs[k] for k in self._camp_keys if k in inputs}
        inputs = {k: v for k, v in inputs.items() if k not in self._camp_keys}
        if self.args.camp_mode == "off":
            return super()._compute_loss(model, inputs, return_outputs)
        missing = [k for k in self._required_keys(self.args) if k not in camp]
        if missing:
            raise ValueError(
                f"the batch lacks the CAMP column(s) {missing}. Keep them in the dataset (see "
                "`ultrafeedback_to_camp`) and, with a custom `data_collator`, emit them as float tensors "
                "of shape [B]."
            )
        mode = "train" if model.training else "eval"

        # --- copied from trl 1.16.0 DPOTrainer._compute_loss: policy log-probs ---
        _non_model_keys = {"completion_mask", "ref_chosen_logps", "ref_rejected_logps"}
        model_kwargs = {k: v for k, v in inputs.items() if k not in _non_model_keys}
        model_kwargs["use_cache"] = False
        if self.aux_loss_enabled:
            model_kwargs["output_router_logits"] = True
        completion_mask = inputs["completion_mask"]
        shift_completion_mask = completion_mask[..., 1:]
        labels = inputs["input_ids"].masked_fill(completion_mask == 0, -100)
        outputs = model(**model_kwargs, labels=labels, fused_lm_head=True)
        seq_len = shift_completion_mask.size(1)
        per_token_logps = outputs.log_probs[:, -seq_len:]
        if self.ld_alpha is None:
            logps = per_token_logps.sum(dim=1)
        else:
            comp_pos = shift_completion_mask.cumsum(dim=1)
            comp_lens = shift_completion_mask.sum(dim=1).long()
            chosen_lens, rejected_lens = comp_lens.chunk(2, dim=0)
            shared_lens = torch.minimum(chosen_lens, rejected_lens)
            shared_lens = torch.cat([shared_lens, shared_lens], dim=0).to(self.accelerator.device)
            shared_mask = (comp_pos > 0) & (comp_pos <= shared_lens.unsqueeze(1))
            tail_mask = comp_pos > shared_lens.unsqueeze(1)
            logps = (per_token_logps * shared_mask).sum(dim=1) + self.ld_alpha * (
                per_token_logps * tail_mask
            ).sum(dim=1)
        chosen_logps, rejected_logps = logps.chunk(2, dim=0)  # batch is [chosen, rejected]

        # Reference log-probs: precomputed columns, or trl's helper (explicit ref model / PEFT adapter off).
        if self.precompute_ref_logps:
            ref_chosen_logps, ref_rejected_logps = inputs["ref_chosen_logps"], inputs["ref_rejected_logps"]
        else:
            ref = self.ref_model if self.ref_model is not None else self.model
            ref_chosen_logps, ref_rejected_logps = self.compute_ref_log_probs(ref, inputs)
        chosen_logratios = chosen_logps - ref_chosen_logps
        rejected_logratios = rejected_logps - ref_rejected_logps

        # --- CAMP: the only line that differs from trl's sigmoid branch ---
        args = self.args
        loss, aux = camp_loss(
            chosen_logratios,
            rejected_logratios,
            camp.get(args.truth_margin_key),
            camp.get(args.help_margin_key),
            beta=self.beta,
            mode=args.camp_mode,
            gamma=args.camp_gamma,
            weights=args.camp_weights,
            rule=args.conflict_rule,
            kappa=args.camp_kappa,
            conflict_loss=args.camp_conflict_loss,
            conflict_weight=args.camp_conflict_weight,
            conflict=camp.get(args.conflict_key) if args.conflict_key else None,
        )

        if self.aux_loss_enabled:
            aux_loss = outputs.aux_loss
            loss = loss + self.router_aux_loss_coef * aux_loss
            self._metrics[mode]["aux_loss"].append(
                self.accelerator.gather_for_metrics(aux_loss).mean().item()
            )
        self._log_dpo_metrics(
            mode, inputs, outputs, shift_completion_mask, chosen_logratios, rejected_logratios, logps
        )
        self._log_camp_metrics(mode, aux)

        if return_outputs:
            warnings.warn(
                "`return_outputs=True` is deprecated in trl 1.16 and recomputes the logits with an extra "
                "forward.",
                FutureWarning,
                stacklevel=2,
            )
            with torch.no_grad():
                outputs = model(**model_kwargs)
        return (loss, outputs) if return_outputs else loss

    def _log_dpo_metrics(
        self,
        mode: str,
        inputs: dict[str, Any],
        outputs: Any,
        shift_completion_mask: torch.Tensor,
        chosen_logratios: torch.Tensor,
        rejected_logratios: torch.Tensor,
        logps: torch.Tensor,
    ) -> None:
        """trl 1.16.0's DPO metrics, copied from ``DPOTrainer._compute_loss`` (same keys, same values)."""
        gather, gather_m, metrics = (
            self.accelerator.gather,
            self.accelerator.gather_for_metrics,
            self._metrics[mode],
        )
        seq_len = shift_completion_mask.size(1)
        mask = shift_completion_mask
        entropy_sum = gather_m((outputs.entropy[:, -seq_len:].detach() * mask).sum()).sum()
        total_tokens = gather_m(mask.sum()).sum()
        metrics["entropy"].append((entropy_sum / total_tokens).item() if total_tokens > 0 else 0.0)
        if mode == "train":
            num_tokens_in_batch = gather_m(inputs["attention_mask"].sum()).sum().item()
            self._total_train_tokens += num_tokens_in_batch // self._tp_size
        metrics["num_tokens"] = [self._total_train_tokens]

        chosen_mean_logits, rejected_mean_logits = outputs.mean_logits[:, -seq_len:].chunk(2, dim=0)
        chosen_mask, rejected_mask = mask.chunk(2, dim=0)
        for name, mean_logits, side_mask in (
            ("chosen", chosen_mean_logits, chosen_mask),
            ("rejected", rejected_mean_logits, rejected_mask),
        ):
            total_logits = gather_m(mean_logits[side_mask.bool()].sum()).sum().item()
            total = gather_m(side_mask.sum()).sum().item()
            metrics[f"logits/{name}"].append(total_logits / total if total > 0 else 0.0)

        chosen_is_top1, _ = outputs.is_top1[:, -seq_len:].chunk(2, dim=0)
        correct_tokens = gather_m((chosen_is_top1 & chosen_mask.bool()).sum())
        total_sum = gather_m(chosen_mask.sum()).sum()
        metrics["mean_token_accuracy"].append(
            (correct_tokens.sum() / total_sum).item() if total_sum > 0 else 0.0
        )

        chosen_rewards = self.beta * chosen_logratios.detach()
        rejected_rewards = self.beta * rejected_logratios.detach()
        metrics["rewards/chosen"].append(gather(chosen_rewards).mean().item())
        metrics["rewards/rejected"].append(gather(rejected_rewards).mean().item())
        metrics["rewards/accuracies"].append(
            gather((chosen_rewards > rejected_rewards).float()).mean().item()
        )
        metrics["rewards/margins"].append(gather(chosen_rewards - rejected_rewards).mean().item())
        chosen_logps, rejected_logps = logps.chunk(2, dim=0)
        metrics["logps/chosen"].append(gather(chosen_logps).mean().item())
        metrics["logps/rejected"].append(gather(rejected_logps).mean().item())

    def _log_camp_metrics(self, mode: str, aux: dict[str, torch.Tensor]) -> None:
        """``camp/*`` and the reward margins of conflict vs consistent pairs (skipped for an absent group)."""
        gather, metrics = self.accelerator.gather, self._metrics[mode]
        conflict = gather(aux["conflict"].detach())
        logits = gather(aux["logits"].detach())
        metrics["camp/conflict_frac"].append(conflict.mean().item())
        key, value = (
            ("margin_mean", aux["margin"])
            if self.args.camp_mode == "margin"
            else ("weight_mean", aux["weight"])
        )
        metrics[f"camp/{key}"].append(gather(value.detach()).mean().item())
        in_conflict = conflict >= 0.5
        for name, group in (("conflict", in_conflict), ("consistent", ~in_conflict)):
            if group.any():
                metrics[f"rewards/margins_{name}"].append(logits[group].mean().item())


def _named(eval_dataset: Any) -> list[tuple[str, Any]]:
    if eval_dataset is None:
        return []
    if isinstance(eval_dataset, dict):
        return [(f"eval_dataset[{k!r}]", v) for k, v in eval_dataset.items()]
    return [("eval_dataset", eval_dataset)]
