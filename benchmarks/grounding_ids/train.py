"""Training and measurement of one benchmark arm (benchmark-only): data, cue, tiny LLaVA, loop, analysis."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from transformers import get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup

from benchmarks.harness import Timer, pinned_threads
from hf_ext.grounding_ids.analysis import (
    analysis_forward,
    binding_report,
    decoder_layers,
    swap_inputs,
    swap_test,
)
from hf_ext.grounding_ids.config import CueConfig
from hf_ext.grounding_ids.core import attention_mass
from hf_ext.grounding_ids.cues import GroundingCueOverlay
from hf_ext.grounding_ids.model import tiny_grounding_vlm
from hf_ext.grounding_ids.processor import CuedProcessor
from hf_ext.grounding_ids.synthetic import BindingTask, make_binding_task, vocabulary

ARMS = {"no cue": None, "partition cue (rows)": "rows", "control cue (columns)": "columns"}


@dataclass(frozen=True)
class TaskSize:
    """A task setting: image side, strip counts, squares' side, symbol order, questions per image."""

    image_size: int = 32
    rows: tuple[int, ...] = (4,)
    object_size: int = 5
    shuffle_symbols: bool = False
    questions: int = 4
    distinct_colours: bool = False
    object_width: int | None = None
    left_margin: int = 8

    def task_kwargs(self, **override: Any) -> dict[str, Any]:
        """Keyword arguments of :func:`make_binding_task` for this setting."""
        kw: dict[str, Any] = dict(
            image_size=self.image_size,
            rows=self.rows,
            object_size=self.object_size,
            shuffle_symbols=self.shuffle_symbols,
            distinct_colours=self.distinct_colours,
            object_width=self.object_width,
            left_margin=self.left_margin,
            questions=self.questions,
        )
        return {**kw, **override}


@dataclass(frozen=True)
class RunSpec:
    """One training run: an arm of ``ARMS`` on a task, with its budget and seed. ``lr`` is the peak learning
    rate, reached linearly over ``warmup`` steps; ``cosine`` decays it to 0 at ``steps`` (else constant);
    ``init_std`` is the Llama's and projector's initial weight scale."""

    arm: str
    size: TaskSize
    steps: int
    seed: int
    evals: tuple[int, ...]
    n_train: int = 4096
    n_test: int = 512
    n_analysis: int = 64
    batch_size: int = 32
    lr: float = 2e-3
    hidden: int = 64
    init_std: float = 0.02
    warmup: int = 0
    cosine: bool = False


def _processor(base: Any, arm: str, symbols: tuple[str, ...], image_size: int) -> CuedProcessor:
    layout = ARMS[arm]
    config = CueConfig(
        n_partitions=len(symbols),
        layout=layout or "rows",
        symbols=symbols,
        processed_size=image_size,
        patch_size=8,
        glyphs="bitmap",
    )
    overlay = GroundingCueOverlay(config) if layout else None
    return CuedProcessor(base, overlay, adapter="llava", require_all_symbols=False, config=config)


def encode(base: Any, arm: str, task: BindingTask, image_size: int) -> dict[str, Any]:
    """Overlay and preprocess every item; token maps use the question's strips (the rows partition)."""
    n = len(task.prompts)
    pixels = torch.empty(n, 3, image_size, image_size)
    rows: list[Any] = [None] * n
    maps: list[Any] = [None] * n
    for key in sorted(set(task.row_symbols)):
        idx = [i for i, s in enumerate(task.row_symbols) if s == key]
        proc = _processor(base, arm, key, image_size)
        enc = proc(
            images=[task.images[i] for i in idx], text=[task.prompts[i] for i in idx], return_tensors="pt"
        )
        strips = enc["partition_token_index"]  # the strips: the rows partition
        if ARMS[arm] not in (None, "rows"):
            strips = _processor(base, "no cue", key, image_size)(
                images=[task.images[i] for i in idx], text=[task.prompts[i] for i in idx], return_tensors="pt"
            )["partition_token_index"]
        pixels[idx] = enc["pixel_values"]
        for j, i in enumerate(idx):
            rows[i] = enc["input_ids"][j]
            maps[i] = (strips[j], enc["symbol_token_index"][j])
    width = max(len(t) for t in rows)
    input_ids = torch.zeros(n, width, dtype=torch.long)
    mask = torch.zeros(n, width, dtype=torch.long)
    for i, t in enumerate(rows):  # left padding: every answer is read at a fixed offset from the end
        input_ids[i, width - len(t) :] = t
        mask[i, width - len(t) :] = 1
    shift = [width - len(t) for t in rows]
    return {
        "input_ids": input_ids,
        "attention_mask": mask,
        "pixel_values": pixels,
        "partition_token_index": [{s: v + shift[i] for s, v in m[0].items()} for i, m in enumerate(maps)],
        "symbol_token_index": [{s: v + shift[i] for s, v in m[1].items()} for i, m in enumerate(maps)],
    }


def _questions(task: BindingTask, ids: Any, row_id: int) -> tuple[Any, Any]:
    """``([N, Q] positions of every question's strip symbol, [N, Q] answer classes)``: every question trains
    (teacher forcing); the answer is read at the symbol token (``colour of row <symbol>``), the text token
    that names the strip. Scenes with fewer strips than ``Q`` pad with the ignored label -100."""
    words = task.answer_words
    width = max(len(pairs) for pairs in task.qa)
    pos = torch.zeros(len(task.qa), width, dtype=torch.long)
    lab = torch.full((len(task.qa), width), -100)
    for i, (row, pairs) in enumerate(zip(ids, task.qa)):
        pos[i, : len(pairs)] = (row == row_id).nonzero().flatten() + 1
        lab[i, : len(pairs)] = torch.tensor([words.index(a) for _, a in pairs])
    return pos, lab


def run(spec: RunSpec) -> dict[str, Any]:
    """Train one arm from scratch on one thread; held-out accuracy at ``spec.evals``, then the analysis."""
    with pinned_threads(1):
        return _run(spec)


def _run(spec: RunSpec) -> dict[str, Any]:
    size = spec.size
    kw = size.task_kwargs()
    train = make_binding_task(spec.n_train, seed=1000 + spec.seed, **kw)
    # Held-out prompts stop at their first question's symbol: later questions could be answered by
    # elimination (the scene's colours minus the answers already in the prompt) without binding any strip.
    # The prefix has the same form as in training, so no distribution shift.
    test = _held_out(size, spec.n_test)
    model, base = tiny_grounding_vlm(
        vocabulary(max(size.rows)),
        image_size=size.image_size,
        hidden_size=spec.hidden,
        initializer_range=spec.init_std,
        seed=spec.seed,
    )
    answer_ids = torch.tensor(base.tokenizer.convert_tokens_to_ids(train.answer_words))
    qid = base.tokenizer.convert_tokens_to_ids("row")
    tr, te = encode(base, spec.arm, train, size.image_size), encode(base, spec.arm, test, size.image_size)
    pos, lab = _questions(train, tr["input_ids"], qid)
    y_te = torch.tensor([test.answer_words.index(a) for a in test.answers])
    opt = torch.optim.AdamW(model.parameters(), lr=spec.lr)
    sched = _schedule(opt, spec)
    gen = torch.Generator().manual_seed(spec.seed)
    curve: dict[int, float] = {}
    seconds = 0.0
    inputs = ("input_ids", "attention_mask", "pixel_values")
    for step in range(1, spec.steps + 1):
        model.train()
        with Timer() as t:
            idx = torch.randint(0, spec.n_train, (spec.batch_size,), generator=gen)
            logits = model(**{k: tr[k][idx] for k in inputs}).logits[:, :, answer_ids]
            at = pos[idx]
            picked = logits.gather(1, at[..., None].expand(-1, -1, logits.shape[-1]))
            loss = torch.nn.functional.cross_entropy(picked.flatten(0, 1), lab[idx].flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # no spikes that undo a learned binding
            opt.step()
            sched.step()
        seconds += t.seconds
        if step in spec.evals:
            curve[step] = _accuracy(model, te, y_te, answer_ids)
    out = {"arm": spec.arm, "seed": spec.seed, "curve": curve, "accuracy": curve[spec.steps]}
    out["seconds"], out["ms_per_step"] = seconds, 1000 * seconds / spec.steps
    out.update(_analyse(model, te, test, spec.n_analysis, qid, answer_ids))
    return out


def _schedule(opt: Any, spec: RunSpec) -> Any:
    """Linear warmup to the peak learning rate over ``spec.warmup`` steps, then constant or cosine to 0."""
    if spec.cosine:
        return get_cosine_schedule_with_warmup(opt, spec.warmup, spec.steps)
    return get_constant_schedule_with_warmup(opt, spec.warmup)


@torch.no_grad()
def _accuracy(model: Any, data: dict[str, Any], labels: Any, answer_ids: Any, batch: int = 256) -> float:
    """Held-out accuracy of the last question of each item (its earlier answers are in the prompt)."""
    model.eval()
    right = 0
    for s in range(0, len(labels), batch):
        inputs = {k: data[k][s : s + batch] for k in ("input_ids", "attention_mask", "pixel_values")}
        pred = model(**inputs).logits[:, -1, answer_ids].argmax(-1)
        right += int((pred == labels[s : s + batch]).sum())
    return right / len(labels)


def _analyse(model: Any, data: dict[str, Any], task: BindingTask, n: int, qid: int, answer_ids: Any) -> dict:
    """Binding report, question -> asked-strip attention per layer, and the image-token swap test."""
    model.eval()
    inputs = {k: data[k][:n] for k in ("input_ids", "attention_mask", "pixel_values")}
    out = analysis_forward(model, inputs)
    enc = {**inputs, **{k: data[k][:n] for k in ("partition_token_index", "symbol_token_index")}}
    report = binding_report(out, enc)
    res: dict[str, Any] = {
        "alignment_margin": report[-1]["alignment_margin"],
        "within_partition": report[-1]["within_partition"],
        "modality_gap": report[-1]["modality_gap"],
    }
    for layer, attn in enumerate(out.attentions, 1):
        ratios = []
        for b in range(n):
            symbols, strips = task.row_symbols[b], data["partition_token_index"][b]
            marks = (inputs["input_ids"][b] == qid).nonzero().flatten()
            keys = [strips[s] for s in symbols]  # every strip, in order
            queries = [marks[j : j + 1] + 1 for j in range(len(task.qa[b]))]  # the question's symbol token
            _, ratio = attention_mass(attn[b], queries, keys)  # [questions, strips]: symbol -> strip
            asked = torch.tensor([row for row, _ in task.qa[b]])
            ratios.append(ratio[torch.arange(len(asked)), asked].mean())
        res[f"attn_matched_L{layer}"] = float(torch.stack(ratios).mean())
    res.update(_best_heads(out.attentions, inputs["input_ids"], data, task, n, qid))
    res["swap_accuracy"] = _swap(model, inputs, data, task, n, answer_ids)
    res.update(_bar_swaps(model, inputs, data, task, n, answer_ids))
    return res


def _best_heads(
    attentions: Any, input_ids: Any, data: dict[str, Any], task: BindingTask, n: int, qid: int
) -> dict[str, Any]:
    """Matched-strip attention of single heads: the (layer, head) with the highest ratio on the first half
    of the analysis items, read on the second half (so the max over 8 heads is not picked on the items it
    is scored on). Two query sets: the question's symbol token (-> the asked strip) and the symbols of the
    prompt's list (each -> its own strip; the route symbol -> list entry -> strip takes two layers)."""
    question = torch.zeros(len(attentions), attentions[0].shape[1], n)  # [layers, heads, items]
    listed = torch.zeros_like(question)
    for b in range(n):
        symbols, strips = task.row_symbols[b], data["partition_token_index"][b]
        keys = [strips[s] for s in symbols]
        asked = task.qa[b][0][0]
        ask_at = (input_ids[b] == qid).nonzero().flatten()[:1] + 1
        first = [data["symbol_token_index"][b][s][:1] for s in symbols]  # the list entry of each symbol
        for layer, attn in enumerate(attentions):
            for h in range(attn.shape[1]):
                _, ratio = attention_mass(attn[b, h : h + 1], [ask_at], keys)
                question[layer, h, b] = ratio[0, asked]
                _, ratio = attention_mass(attn[b, h : h + 1], first, keys)
                listed[layer, h, b] = ratio.diagonal().mean()
    res: dict[str, Any] = {}
    half = n // 2
    both = torch.stack([question, listed])  # [route, layers, heads, items]
    for name, r in (("question", both[:1]), ("list", both[1:]), ("best", both)):
        at = [int(i) for i in np.unravel_index(int(r[..., :half].mean(-1).argmax()), r.shape[:3])]
        res[f"attn_head_{name}"] = float(r[at[0], at[1], at[2], half:].mean())
        where = ("question ", "list ")[at[0]] if name == "best" else ""
        res[f"attn_head_{name}_at"] = f"{where}L{at[1] + 1}H{at[2]}"
    return res


def _bar_swaps(
    model: Any, inputs: dict[str, Any], data: dict[str, Any], task: BindingTask, n: int, answer_ids: Any
) -> dict[str, float]:
    """Where the strip's colour reaches its glyph token: the asked strip's tokens *without its glyph patch*
    (the bar's other three patches) exchanged with the next strip's at the input of vision layers 1 and 2
    and at the input of decoder layer 1, on the items answered right without a swap. Answers that follow
    the swap at a site read the colour from those patches after it; answers that stay read it from the
    glyph's own patch (where the bar runs under the glyph) or from what the vision layers moved there."""
    with torch.no_grad():
        clean = model(**inputs).logits[:, -1, answer_ids].argmax(-1)
    first, second, follow, b_kept = [], [], [], []
    start = (inputs["input_ids"] == model.config.image_token_index).int().argmax(-1)
    for b in range(n):
        k, row = len(task.row_symbols[b]), int(task.target[b])
        other = (row + 1) % k
        colours = task.row_colours[b]
        if task.answer_words[int(clean[b])] != colours[row]:
            continue
        strips = data["partition_token_index"][b]
        first.append(strips[task.row_symbols[b][row]][1:])  # row-major: [0] is the glyph's patch
        second.append(strips[task.row_symbols[b][other]][1:])
        follow.append(task.answer_words.index(colours[other]))
        b_kept.append(b)
    if not b_kept:
        return {f"bar_swap_{site}": float("nan") for site in ("V1", "V2", "D1")}
    sub = {k: v[b_kept] for k, v in inputs.items()}
    vision = [(a - start[b], c - start[b]) for b, a, c in zip(b_kept, first, second)]
    expected = torch.tensor(follow)
    tower = model.model.vision_tower
    encoder = getattr(tower, "vision_model", tower).encoder
    sites = {
        "V1": (encoder.layers[0], vision),
        "V2": (encoder.layers[1], vision),
        "D1": (decoder_layers(model)[0], list(zip(first, second))),
    }
    res = {}
    for site, (module, pairs) in sites.items():
        with swap_inputs(module, [a for a, _ in pairs], [c for _, c in pairs]), torch.no_grad():
            pred = model(**sub).logits[:, -1, answer_ids].argmax(-1)
        res[f"bar_swap_{site}"] = float((pred == expected).float().mean())
    return res


def _swap(
    model: Any, inputs: dict[str, Any], data: dict[str, Any], task: BindingTask, n: int, answer_ids: Any
) -> float:
    """Swap the asked strip's image tokens with the next strip's as they enter decoder layer 1; the answer
    should become the next strip's colour (items whose two colours differ)."""
    keep, first, second, expected = [], [], [], []
    for b in range(n):
        k, row = len(task.row_symbols[b]), int(task.target[b])
        other = (row + 1) % k
        colours = task.row_colours[b]
        if colours[row] == colours[other]:
            continue
        strips = data["partition_token_index"][b]
        keep.append(b)
        first.append(strips[task.row_symbols[b][row]])
        second.append(strips[task.row_symbols[b][other]])
        expected.append(int(answer_ids[task.answer_words.index(colours[other])]))
    if not keep:
        return float("nan")
    sub = {k: v[keep] for k, v in inputs.items()}
    return swap_test(model, sub, first, second, layer=0, expected=expected, candidates=answer_ids)


def _held_out(size: TaskSize, n_test: int) -> BindingTask:
    """The held-out scenes every arm and baseline is scored on: ``max(size.rows)`` strips, one question, the
    prompt ending at the question's symbol (the token the answer is read at)."""
    test = make_binding_task(n_test, seed=99, **size.task_kwargs(questions=1, rows=(max(size.rows),)))
    test.prompts = [p.removesuffix(" ?") for p in test.prompts]
    return test


def answer_prior(size: TaskSize, n_test: int = 512) -> float:
    """Held-out accuracy of always answering the most frequent training answer (the trivial baseline)."""
    train = make_binding_task(2048, seed=1000, **size.task_kwargs(questions=1))
    words, counts = np.unique(train.answers, return_counts=True)
    return float(np.mean(np.array(_held_out(size, n_test).answers) == words[counts.argmax()]))


def scene_majority(size: TaskSize, n_test: int = 512) -> float:
    """Held-out accuracy of answering the scene's most frequent colour (ties: first in colour order), which
    needs no binding: the best answer a model that sees the colours but not their strips can give."""
    test = _held_out(size, n_test)
    right = 0
    for colours, answer in zip(test.row_colours, test.answers):
        counts = [colours.count(c) for c in test.answer_words]
        right += test.answer_words[int(np.argmax(counts))] == answer
    return right / n_test


def text_only(size: TaskSize, n_test: int = 512, n_train: int = 4096) -> float:
    """Held-out accuracy of a text-only model: for each held-out prompt, the most frequent answer of the
    training questions with the same text (symbol order and asked symbol), else the overall majority. With
    enough data a lookup table is the Bayes-optimal text-only predictor."""
    train = make_binding_task(n_train, seed=1000, **size.task_kwargs(questions=1, rows=(max(size.rows),)))
    seen: dict[str, dict[str, int]] = {}
    for prompt, answer in zip(train.prompts, train.answers):
        tally = seen.setdefault(prompt.removesuffix(" ?"), {})
        tally[answer] = tally.get(answer, 0) + 1
    words, counts = np.unique(train.answers, return_counts=True)
    fallback = str(words[counts.argmax()])
    test = _held_out(size, n_test)
    right = 0
    for prompt, answer in zip(test.prompts, test.answers):
        votes = seen.get(prompt, {})
        right += (max(votes, key=lambda w: votes[w]) if votes else fallback) == answer
    return right / n_test


def random_guess(size: TaskSize, n_test: int = 512, seed: int = 0) -> float:
    """Held-out accuracy of a uniform random colour (seeded)."""
    test = _held_out(size, n_test)
    rng = np.random.default_rng(seed)
    colours = test.answer_words[:-1]  # "none" never answers when every strip holds an object
    return float(np.mean([colours[rng.integers(len(colours))] == a for a in test.answers]))
