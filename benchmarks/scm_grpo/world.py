"""The tiny world model of ``hf-ext bench scm_grpo``: tokenizer, SFT warm start and held-out evaluation.

Rows come from :func:`hf_ext.scm_grpo.data.make_synthetic_mhfv` (entities ``e*``, relations ``r*``). The
word-level tokenizer spends one token per contract piece so that completions stay short: ``"\\nE3:"`` opens a
node line, ``"\\nE2->E3"`` / ``"\\nE4->C"`` are whole edge lines, ``"\\n</graph>"`` closes the graph. Decoding
joins tokens with spaces, which yields text in the ordinary output contract (``"E3: e1 r2 e7"``,
``"E2->E3"``) that :func:`hf_ext.scm_grpo.core.parse_scm_graph` reads like any model's output.
"""

from __future__ import annotations

from typing import Any

import torch

from hf_ext.scm_grpo.core import HOVER, parse_scm_graph

MAX_NODES = 8


def vocabulary(n_entities: int, n_relations: int) -> list[str]:
    """The tokenizer's words (``<pad> <bos> <eos> <unk>`` come first, from the tokenizer)."""
    nodes = [f"\nE{i}:" for i in range(1, MAX_NODES + 1)] + ["\nC:"]
    edges = [f"\nE{i}->E{i + 1}" for i in range(1, MAX_NODES)]
    edges += [f"\nE{i}->C" for i in range(1, MAX_NODES + 1)]
    return [
        *(f"e{i}" for i in range(n_entities)),
        *(f"r{i}" for i in range(n_relations)),
        *("claim", "evidence", ";", "<graph>", "\n</graph>", "<answer>", "</answer>", *HOVER),
        *nodes,
        *edges,
    ]


def prompt_text(row: dict[str, Any]) -> str:
    """``"claim <claim> evidence <fact> ; <fact> ; ..."`` (plain words, tokenised by the tokenizer)."""
    return f"claim {row['claim']} evidence " + " ; ".join(row["evidence"])


def completion_tokens(row: dict[str, Any]) -> list[str]:
    """The gold (padded) completion of ``row`` as tokens, from its ``chain`` of node texts."""
    path = row["chain"]
    out = ["<graph>"]
    for i, fact in enumerate(path, 1):
        out += [f"\nE{i}:", *fact.split()]
    out += ["\nC:", *row["claim"].split()]
    out += [f"\nE{i}->E{i + 1}" for i in range(1, len(path))] + [f"\nE{len(path)}->C"]
    return [*out, "\n</graph>", "<answer>", row["label"], "</answer>"]


def sft(
    model: Any,
    tok: Any,
    rows: list[dict[str, Any]],
    *,
    steps: int,
    lr: float,
    batch: int,
    seed: int,
    verdict_weight: float = 1.0,
) -> list[float]:
    """Teacher-forced SFT on prompt + gold completion (loss on completion tokens only); the loss curve.

    ``verdict_weight`` multiplies the loss on the verdict token (the label inside ``<answer>``) against 1 for
    every other completion token (see :func:`hf_ext.scm_grpo.warm_start.verdict_weighted_loss`).
    """
    from hf_ext.scm_grpo.warm_start import verdict_weighted_loss

    examples = []
    for row in rows:
        prompt = tok(prompt_text(row))["input_ids"]
        completion = tok.convert_tokens_to_ids(completion_tokens(row)) + [tok.eos_token_id]
        weights = [1.0] * len(completion)
        weights[-3] = verdict_weight  # the completion ends "<answer> LABEL </answer> <eos>"
        examples.append((prompt + completion, [0.0] * len(prompt) + weights))
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 50) * (1 - s / steps))
    model.train()
    losses = []
    for _ in range(steps):
        idx = torch.randint(len(examples), (batch,), generator=gen).tolist()
        width = max(len(examples[i][0]) for i in idx)
        ids = torch.full((batch, width), tok.pad_token_id)
        mask = torch.zeros(batch, width, dtype=torch.long)
        weight = torch.zeros(batch, width)
        for b, i in enumerate(idx):
            seq, w = examples[i]
            ids[b, : len(seq)] = torch.tensor(seq)
            mask[b, : len(seq)] = 1
            weight[b, : len(seq)] = torch.tensor(w)
        logits = model(input_ids=ids, attention_mask=mask).logits
        loss = verdict_weighted_loss(logits[:, :-1], ids[:, 1:], weight[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(loss.item())
    model.eval()
    return losses


@torch.no_grad()
def generate(model: Any, tok: Any, prompts: list[str], *, max_new_tokens: int, batch: int = 128) -> list[Any]:
    """Greedy completions ``(text, n_tokens)`` of ``prompts`` (left-padded batches)."""
    out = []
    for start in range(0, len(prompts), batch):
        enc = tok(prompts[start : start + batch], return_tensors="pt", padding=True, padding_side="left")
        seqs = model.generate(
            **enc,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        )[:, enc["input_ids"].shape[1] :]
        for seq in seqs.tolist():
            n = next((i + 1 for i, t in enumerate(seq) if t == tok.eos_token_id), len(seq))
            out.append((tok.decode(seq[:n], skip_special_tokens=True), n))
    return out


def evaluate(model: Any, tok: Any, rows: list[dict[str, Any]], *, max_new_tokens: int) -> dict[str, Any]:
    """Held-out figures of greedy completions.

    ``format_valid`` (fraction of completions in the contract), ``depth_abs_err`` (mean ``|d - d*|`` over
    valid graphs), ``depth_abs_err_h<n>`` (per hop count), ``accuracy`` and ``macro_f1`` (invalid answers
    count as wrong), ``tokens`` (mean completion length), ``hack_rate`` (wrong label among valid graphs at
    exactly the target depth) and the per-row ``(depth, target, correct)`` triples for the depth analysis.
    """
    from torchmetrics.functional.classification import multiclass_f1_score

    outputs = generate(model, tok, [prompt_text(r) for r in rows], max_new_tokens=max_new_tokens)
    graphs = [parse_scm_graph(text) for text, _ in outputs]
    correct = [g.label == r["label"] for g, r in zip(graphs, rows)]
    valid = [(g.depth, r["num_hops"], ok, r) for g, r, ok in zip(graphs, rows, correct) if g.is_valid]
    errs = [abs(d - t) for d, t, _, _ in valid if d is not None]
    on_target = [ok for d, t, ok, _ in valid if d == t]
    classes = {lab: i for i, lab in enumerate(HOVER)}
    pred = [classes.get(g.label or "", 1 - classes[r["label"]]) for g, r in zip(graphs, rows)]
    f1 = multiclass_f1_score(
        torch.tensor(pred), torch.tensor([classes[r["label"]] for r in rows]), num_classes=2, average="macro"
    )
    out: dict[str, Any] = {
        "format_valid": len(valid) / len(rows),
        "depth_abs_err": sum(errs) / len(errs) if errs else float("nan"),
        "accuracy": sum(correct) / len(rows),
        "macro_f1": float(f1),
        "tokens": sum(n for _, n in outputs) / len(outputs),
        "hack_rate": 1 - sum(on_target) / len(on_target) if on_target else float("nan"),
    }
    for hop in sorted({r["num_hops"] for r in rows}):
        e = [abs(d - t) for d, t, _, _ in valid if t == hop and d is not None]
        out[f"depth_abs_err_h{hop}"] = sum(e) / len(e) if e else float("nan")
    out["per_row"] = [
        (g.depth if g.is_valid else None, r["num_hops"], ok) for g, r, ok in zip(graphs, rows, correct)
    ]
    return out
