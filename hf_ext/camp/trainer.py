"""``CAMPTrainer``: trl's ``DPOTrainer`` with CAMP's conflict-aware per-pair margin or weight.

trl's DPO loss is a batch mean of one fixed function of ``z = beta * delta``; the only per-pair input a
subclass can set is the reference log-probs. CAMP hooks in there, and repeats none of trl's code:

- The margin is a shift of the reference: ``-log sigmoid(z - m)`` is trl's ``loss_type="sigmoid"`` with
  ``ref_chosen_logps + m / beta``. ``compute_loss`` hands trl these shifted reference log-probs the way it
  takes precomputed ones (from trl's ``compute_ref_log_probs`` unless the dataset carries them), so trl's own
  loss code computes the one-sided margin loss.
- The soft-label loss of conflict pairs (minimal at ``z = m``) and the weight mode (a per-pair weight) cannot
  come from shifting ``z``, and trl has no per-pair label or weight. They are added as the correction
  ``mean(camp_loss_i + log sigmoid(z_i - m_i))``, with ``z`` from the policy log-probs of trl's own forward,
  read by a forward hook on the model (no second forward). It is zero on every pair whose CAMP loss is the
  one-sided margin loss.

On a CPU, trl 1.16's fused LM head projects every position onto the vocabulary (only Triton devices score just
the labelled ones). With ``CAMPConfig.completion_only_lm_head`` (the default) ``CAMPTrainer`` lets the head
score only the completion positions on a CPU too, by answering trl's device test (``_use_triton``) for the CPU
inside its own loss and reference passes; the per-position log-probs are unchanged.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from accelerate.utils import is_peft_model
from datasets import Dataset
from trl import DPOTrainer
from trl.trainer import utils as trl_utils
from trl.trainer.dpo_trainer import DataCollatorForPreference
from trl.trainer.utils import get_config_model_id, selective_log_softmax

from hf_ext._registry import paper
from hf_ext.camp.collator import DataCollatorForCAMP
from hf_ext.camp.config import CAMPConfig
from hf_ext.camp.core import camp_conflict, camp_loss, camp_margin
from hf_ext.camp.data import validate_camp_dataset

logger = logging.getLogger(__name__)


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

    How it hooks trl (no trl code is repeated): ``compute_loss`` passes trl's ``DPOTrainer.compute_loss`` the
    reference log-probs of the batch with ``m / beta`` added to the chosen side, so trl's sigmoid loss is the
    one-sided margin loss ``-log sigmoid(z - m)``. The soft-label conflict loss and the weight mode have no
    such form in trl; they are added as ``mean(camp_loss_i + log sigmoid(z_i - m_i))``, with ``z`` from the
    policy log-probs of trl's forward (a forward hook; the model is not run twice). The total is
    :func:`hf_ext.camp.core.camp_loss` (plus trl's MoE auxiliary loss, if any).

    trl's ``rewards/*`` keep their DPO meaning (the shift is taken back out of them). Besides them it logs
    ``camp/conflict_frac``, ``camp/margin_mean`` (margin mode), ``camp/weight_mean`` (weight mode), and
    ``rewards/margins_conflict`` / ``rewards/margins_consistent`` (mean ``beta * delta`` over pairs with
    ``c >= 0.5`` / ``c < 0.5``; skipped for a batch where a group is empty).

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
        self._warned_no_switch = False
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
            return  # IterableDataset: the keys are checked per batch in `compute_loss`
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
        with self._completion_only_lm_head():
            return super().compute_ref_log_probs(
                model, {k: v for k, v in inputs.items() if k not in self._camp_keys}
            )

    @contextlib.contextmanager
    def _completion_only_lm_head(self) -> Iterator[None]:
        """Inside the block, trl's fused LM head scores only completion positions on a CPU as well.

        trl 1.16 decides ``compact = _use_triton(device)`` in ``add_fused_lm_head``: labelled positions only
        on CUDA/XPU with Triton, every position elsewhere (to keep tile shapes fixed for compiled devices).
        The kernel's own device test (``trl.kernels.chunked_logprob._use_triton``) is a separate name and
        stays as is, so a CPU still runs trl's torch tiles. No-op when the option is off; when trl has no
        such switch it is a no-op too, with a warning (once) that every position is scored.
        """
        original = getattr(trl_utils, "_use_triton", None)
        if not self.args.completion_only_lm_head or original is None:
            if self.args.completion_only_lm_head and not self._warned_no_switch:
                warnings.warn(
                    "completion_only_lm_head: this trl has no trl.trainer.utils._use_triton, so its fused LM "
                    "head scores every position on CPU (same log-probs, slower)",
                    stacklevel=2,
                )
                self._warned_no_switch = True
            yield
            return
        trl_utils._use_triton = lambda device: device.type == "cpu" or original(device)
        try:
            yield
        finally:
            trl_utils._use_triton = original

    def compute_loss(
        self,
        model: Any,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: Any = None,
    ) -> Any:
        """trl's DPO loss against the margin-shifted reference plus CAMP's correction (module docstring).

        Returns the scalar loss, or ``(loss, outputs)`` with trl's outputs when ``return_outputs``.
        """
        with self._completion_only_lm_head():
            return self._camp_loss(model, inputs, return_outputs, num_items_in_batch)

    def _camp_loss(
        self, model: Any, inputs: dict[str, Any], return_outputs: bool, num_items_in_batch: Any
    ) -> Any:
        camp = {k: inputs[k] for k in self._camp_keys if k in inputs}
        inputs = {k: v for k, v in inputs.items() if k not in self._camp_keys}
        if self.args.camp_mode == "off":
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        missing = [k for k in self._required_keys(self.args) if k not in camp]
        if missing:
            raise ValueError(
                f"the batch lacks the CAMP column(s) {missing}. Keep them in the dataset (see "
                "`ultrafeedback_to_camp`) and, with a custom `data_collator`, emit them as float tensors "
                "of shape [B]."
            )
        args = self.args
        truth, helpful = camp.get(args.truth_margin_key), camp.get(args.help_margin_key)
        if args.conflict_key is not None:
            conflict = camp[args.conflict_key]
        else:  # the gaps are required then
            conflict = camp_conflict(
                camp[args.truth_margin_key],
                camp[args.help_margin_key],
                rule=args.conflict_rule,
                kappa=args.camp_kappa,
            )

        if self.precompute_ref_logps:
            ref_chosen, ref_rejected = inputs["ref_chosen_logps"], inputs["ref_rejected_logps"]
        else:  # explicit reference model, or the PEFT adapter switched off (trl's helper handles both)
            ref = self.ref_model if self.ref_model is not None else self.model
            ref_chosen, ref_rejected = self.compute_ref_log_probs(ref, inputs)
        margin = None
        shifted_chosen = ref_chosen
        if args.camp_mode == "margin":
            margin = camp_margin(
                camp[args.truth_margin_key],
                camp[args.help_margin_key],
                conflict,
                gamma=args.camp_gamma,
                weights=args.camp_weights,
            )
            shifted_chosen = ref_chosen + margin.to(ref_chosen.dtype) / self.beta
        inputs = {**inputs, "ref_chosen_logps": shifted_chosen, "ref_rejected_logps": ref_rejected}
        with _first_forward_output(model) as policy_outputs, self._reference_from_batch():
            result = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

        policy_logps = _completion_logps(policy_outputs[0], inputs["input_ids"], inputs["completion_mask"])
        chosen_logps, rejected_logps = policy_logps.chunk(2)  # the batch is [chosen rows, rejected rows]
        _, aux = camp_loss(
            chosen_logps - ref_chosen,
            rejected_logps - ref_rejected,
            truth,
            helpful,
            beta=self.beta,
            mode=args.camp_mode,
            gamma=args.camp_gamma,
            weights=args.camp_weights,
            conflict_loss=args.camp_conflict_loss,
            conflict_weight=args.camp_conflict_weight,
            conflict=conflict,
        )
        # Zero on pairs whose CAMP loss is the one-sided margin loss trl just computed.
        correction = (aux["per_pair_loss"] + F.logsigmoid(aux["logits"] - aux["margin"])).mean()

        mode = "train" if model.training else "eval"
        if margin is not None:
            self._unshift_reward_metrics(mode, margin, aux["logits"])
        self._log_camp_metrics(mode, aux)
        if return_outputs:
            loss, outputs = result
            return loss + correction, outputs
        return result + correction

    @contextlib.contextmanager
    def _reference_from_batch(self) -> Iterator[None]:
        """Make trl read the reference log-probs from the batch, as with ``precompute_ref_log_probs=True``."""
        precompute = self.precompute_ref_logps
        self.precompute_ref_logps = True
        try:
            yield
        finally:
            self.precompute_ref_logps = precompute

    def _unshift_reward_metrics(self, mode: str, margin: torch.Tensor, logits: torch.Tensor) -> None:
        """trl scored ``rewards/*`` against the shifted reference; undo the shift so they keep DPO's meaning.

        ``rewards/chosen`` and ``rewards/margins`` get ``mean(m)`` back; ``rewards/accuracies`` becomes the
        share of pairs with ``beta * delta > 0`` (trl's value was the share past the margin).
        """
        gather, metrics = self.accelerator.gather, self._metrics[mode]
        mean_margin = gather(margin.detach()).mean().item()
        metrics["rewards/chosen"][-1] += mean_margin
        metrics["rewards/margins"][-1] += mean_margin
        metrics["rewards/accuracies"][-1] = gather((logits.detach() > 0).float()).mean().item()

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


@contextlib.contextmanager
def _first_forward_output(model: torch.nn.Module) -> Iterator[list[Any]]:
    """Collect the output of the first forward of ``model`` inside the block: trl's policy forward."""
    outputs: list[Any] = []

    def keep_first(module: torch.nn.Module, args: Any, output: Any) -> None:
        if not outputs:
            outputs.append(output)

    handle = model.register_forward_hook(keep_first)
    try:
        yield outputs
    finally:
        handle.remove()


def _completion_logps(outputs: Any, input_ids: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """Token-summed completion log-probs, shape ``[2B]`` (chosen rows, then rejected), in nats.

    trl >= 1.15 asks for ``outputs.log_probs`` (its fused LM head), each next token's log-prob, shape
    ``[2B, T - 1]``; earlier releases get ``outputs.logits``, shape ``[2B, T, V]``. Prompt-learning PEFT
    prepends virtual positions to either, so the last positions are the text's.
    """
    mask = completion_mask[:, 1:]
    per_token = getattr(outputs, "log_probs", None)
    if per_token is None:
        logits = outputs.logits[:, -input_ids.size(1) : -1]
        per_token = selective_log_softmax(logits, input_ids[:, 1:])
    return (per_token[:, -mask.size(1) :] * mask).sum(dim=1)
