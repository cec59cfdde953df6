# mypy: disable-error-code="attr-defined"
# (diffusers exposes registered modules and config fields as dynamic attributes)
"""``ViewMaskPipeline``: one input view (and optionally text) to the other views by iterative unmasking.

[paper: masked discrete diffusion, all target views generated in parallel in one sequence; sampler details
reconstructed, MaskGIT-style] The input view is tokenized by the LFQ tokenizer, every target view starts
fully masked, and diffusers' ``AmusedScheduler`` unmasks the most confident sampled tokens step by step.
The scheduler's re-mask count ``floor(n P ratio(i) (n-1)/n)`` counts the whole image sequence, so the
pipeline passes ``starting_mask_ratio = (n - 1) / n`` (``n`` views in the run). Conditioning tokens are
never re-masked: the scheduler gives every token that was not masked on input the largest confidence,
which no Gumbel draw at ``temperature <= 4`` can overcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import PIL.Image
import torch
from diffusers import AmusedScheduler, DiffusionPipeline
from diffusers.image_processor import VaeImageProcessor
from diffusers.utils import BaseOutput

from hf_ext._registry import paper
from hf_ext._validation import check_choice, check_float, check_int
from hf_ext.viewmask.autoencoder_lfq import LFQAutoencoder
from hf_ext.viewmask.transformer_viewmask import ViewMaskTransformer

OUTPUT_TYPES = ("pil", "np", "pt")
MAX_TEMPERATURE = 4.0


@dataclass
class ViewMaskPipelineOutput(BaseOutput):
    """Output of :class:`ViewMaskPipeline`.

    Args:
        images: per sample, the re-decoded input view followed by the generated views: a list (batch) of
            lists of PIL images, a ``[B, n, H, W, 3]`` numpy array or a ``[B, n, 3, H, W]`` tensor in
            ``[0, 1]``.
        tokens (`torch.Tensor`): the final code indices ``[B, n, P]`` (view 0 = the input's codes).
    """

    _paper = paper("viewmask")

    images: list[list[PIL.Image.Image]] | np.ndarray | torch.Tensor
    tokens: torch.Tensor


class ViewMaskPipeline(DiffusionPipeline):
    """Multi-view generation by masked discrete diffusion (ViewMask-1-to-3).

    Args:
        vqvae ([`LFQAutoencoder`]): image tokenizer; its codebook size must equal the transformer's.
        transformer ([`ViewMaskTransformer`]): the multi-view masked-token model.
        scheduler ([`~diffusers.AmusedScheduler`]): masked-token scheduler with
            ``mask_token_id == transformer.config.codebook_size``.
        tokenizer (`PreTrainedTokenizerFast`, *optional*): text tokenizer for prompts (ids must lie below
            ``transformer.config.text_vocab_size``).
    """

    _paper = paper("viewmask")
    model_cpu_offload_seq = "transformer->vqvae"
    _optional_components = ["tokenizer"]

    def __init__(
        self,
        vqvae: LFQAutoencoder,
        transformer: ViewMaskTransformer,
        scheduler: AmusedScheduler,
        tokenizer: Any = None,
    ) -> None:
        super().__init__()
        k = transformer.config.codebook_size
        if scheduler.config.mask_token_id != k:
            raise ValueError(
                f"`scheduler.config.mask_token_id` must equal transformer.config.codebook_size={k} (the mask "
                f"id lies one past the codebook), got {scheduler.config.mask_token_id}."
            )
        if vqvae.codebook_size != k:
            raise ValueError(
                f"`vqvae` codebook size must equal transformer.config.codebook_size={k}, got "
                f"{vqvae.codebook_size}."
            )
        self.register_modules(vqvae=vqvae, transformer=transformer, scheduler=scheduler, tokenizer=tokenizer)
        self.image_processor = VaeImageProcessor(
            vae_scale_factor=vqvae.config.downsample, do_resize=False, do_normalize=True
        )

    def _text_inputs(self, prompt: str | list[str] | None, batch: int) -> dict[str, torch.Tensor]:
        if prompt is None:
            return {}
        if self.tokenizer is None or self.transformer.config.text_vocab_size == 0:
            raise ValueError(
                f"`prompt` must be None when the pipeline has no tokenizer or the transformer has "
                f"text_vocab_size=0, got {prompt!r}."
            )
        prompts = [prompt] * batch if isinstance(prompt, str) else list(prompt)
        if len(prompts) != batch:
            raise ValueError(f"`prompt` must be one string or {batch} strings, got {len(prompts)}.")
        enc = self.tokenizer(
            prompts,
            padding="max_length",
            truncation=True,
            max_length=self.transformer.config.max_text_length,
            return_tensors="pt",
        )
        dev = self._execution_device
        return {"text_ids": enc.input_ids.to(dev), "text_attention_mask": enc.attention_mask.to(dev)}

    def _step(
        self,
        logits: torch.Tensor,
        t: torch.Tensor,
        sample: torch.Tensor,
        ratio: float,
        generator: torch.Generator | list[torch.Generator] | None,
    ) -> torch.Tensor:
        if not isinstance(generator, list):
            return self.scheduler.step(
                logits, t, sample, starting_mask_ratio=ratio, generator=generator
            ).prev_sample
        rows = [
            self.scheduler.step(
                logits[i : i + 1], t, sample[i : i + 1], starting_mask_ratio=ratio, generator=g
            ).prev_sample
            for i, g in enumerate(generator)
        ]
        return torch.cat(rows)

    @torch.no_grad()
    def __call__(
        self,
        image: PIL.Image.Image | list[PIL.Image.Image] | np.ndarray | torch.Tensor,
        prompt: str | list[str] | None = None,
        num_views: int | None = None,
        target_views: Sequence[int] | None = None,
        num_inference_steps: int = 16,
        temperature: float | tuple[float, float] = (2.0, 0.0),
        generator: torch.Generator | list[torch.Generator] | None = None,
        output_type: str = "pil",
        return_dict: bool = True,
    ) -> ViewMaskPipelineOutput | tuple:
        """Generate the target views of each input view.

        Args:
            image: the input views (view 0): PIL image(s), numpy ``[B, H, W, 3]`` or a tensor
                ``[B, 3, H, W]``, both in ``[0, 1]`` (diffusers' image convention); square, with ``H, W``
                divisible by the tokenizer's ``downsample`` ``f`` and ``(H/f)(W/f) = tokens_per_view``.
            prompt: optional text per input (one string for all, or one per input).
            num_views: views of the model (``transformer.config.num_views``; given only as a check).
            target_views: view ids generated in this run (default ``1..V-1``, all jointly). One id generates
                that view on its own, as ``[view 0][view k]``.
            num_inference_steps: unmasking steps ``T`` (>= 1).
            temperature: Gumbel temperature of the re-masking confidence, a ``(start, end)`` pair spaced
                linearly over the steps, or one start value (ending at 0.01); at most 4.
            generator: a ``torch.Generator`` (CPU for reproducible sampling) or one per input.
            output_type: ``"pil"``, ``"np"`` or ``"pt"``.
            return_dict: return a :class:`ViewMaskPipelineOutput` rather than ``(images, tokens)``.
        """
        cfg = self.transformer.config
        if num_views is not None and check_int("num_views", num_views, low=2) != cfg.num_views:
            raise ValueError(
                f"`num_views` must equal transformer.config.num_views={cfg.num_views}, got {num_views}."
            )
        targets = list(range(1, cfg.num_views)) if target_views is None else list(target_views)
        if not targets or sorted(set(targets)) != targets or not all(0 < v < cfg.num_views for v in targets):
            raise ValueError(
                f"`target_views` must be increasing distinct ids in [1, {cfg.num_views}), got "
                f"{target_views!r}."
            )
        steps = check_int("num_inference_steps", num_inference_steps, low=1)
        temps = temperature if isinstance(temperature, tuple | list) else (temperature,)
        for i, value in enumerate(temps):
            check_float(f"temperature[{i}]" if len(temps) > 1 else "temperature", value, low=0, high=4)
        output_type = check_choice("output_type", output_type, OUTPUT_TYPES)

        dev = self._execution_device
        pixels = self.image_processor.preprocess(image).to(dev, self.vqvae.dtype)
        self.vqvae.check_images(pixels, "image")
        batch = pixels.shape[0]
        if isinstance(generator, list) and len(generator) != batch:
            raise ValueError(
                f"`generator` must be one generator or {batch} (one per input), got {len(generator)}."
            )
        cond = self.vqvae.tokenize(pixels).flatten(1)  # [B, P]
        per_view = cond.shape[1]
        if per_view != cfg.tokens_per_view or pixels.shape[-1] != pixels.shape[-2]:
            raise ValueError(
                f"`image` must be square and give tokens_per_view={cfg.tokens_per_view} tokens, got "
                f"{per_view} from size "
                f"{tuple(pixels.shape[-2:])}."
            )
        text = self._text_inputs(prompt, batch)

        n = 1 + len(targets)
        view_ids = torch.tensor([0, *targets], device=dev)
        sample = torch.full(
            (batch, n * per_view), self.transformer.mask_token_id, device=dev, dtype=torch.long
        )
        sample[:, :per_view] = cond
        start = (n - 1) / n
        self.scheduler.set_timesteps(steps, temperature=temperature, device=dev)
        for t in self.progress_bar(self.scheduler.timesteps):
            logits = self.transformer(sample, view_ids=view_ids, **text).logits
            sample = self._step(logits, t, sample, start, generator)

        tokens = sample.view(batch, n, per_view)
        side = self.transformer.side
        decoded = self.vqvae.decode_indices(tokens.reshape(batch * n, side, side)).clamp(-1, 1)
        flat = self.image_processor.postprocess(decoded, output_type=output_type)
        images: Any
        if output_type == "pil":
            images = [flat[i * n : (i + 1) * n] for i in range(batch)]
        else:
            images = flat.reshape(batch, n, *flat.shape[1:])
        self.maybe_free_model_hooks()
        if not return_dict:
            return (images, tokens)
        return ViewMaskPipelineOutput(images=images, tokens=tokens)
