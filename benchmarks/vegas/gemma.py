"""``hf-ext bench vegas --model gemma-3-270m``: Vegas on the real Gemma-3-270M, used through ``generate``.

Gemma-3-270M (fp32, 268 M parameters of which 168 M are the tied embedding / LM head; 18 layers, 15 with a
512-token sliding window and 3 global, one KV head of 256) decodes real text: each row is the
standard-library source and docstrings of :func:`hf_ext.assets.english_texts` (``code``, then ``docs``, then
``license``), tokenized, row ``r`` starting :data:`ROW_SHIFT` x ``r`` tokens further in (never repeated
filler). Per (context, batch) one prefill fills an :class:`~hf_ext.vegas.cache.InPlaceCache` (the prompt
but its last token, in chunks); every arm decodes :data:`NEW` tokens from it (its lengths reset, or a copy
into the arm's own cache kind), so the prefill is shared and only decoding is timed.

Arms: plain greedy on ``DynamicCache``, ``StaticCache``, the ``InPlaceCache`` (SDPA) and the project's
``chunk_attention`` kernel; stock prompt lookup (``prompt_lookup_num_tokens=10``; transformers runs it on
batch 1 only, so a batch decodes row by row); sink+window and Quest at the paper's gamma; Vegas at each
gamma of :data:`GAMMAS`; the combined draft (``VegasConfig(lookup_ngram=2)``, prompt lookup's own n-gram
size); and Vegas with its cost-model fallback on (the default ``VegasConfig()``). A forward hook counts every
decode forward (rows, query tokens, logits kept, cache length) of every arm; the cost model
(:func:`hf_ext.vegas.core.forward_cost`) prices those forwards with constants fitted on timed forwards of
this model alone (never on an arm), so each arm's ratio is predicted from its counts and compared with the
measured one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import torch

from benchmarks.harness import BenchReport, Headline, Timer, pinned_threads, verdict

MODEL = "gemma-3-270m"
THREADS = 2
# (context, batch): kept small so that a run fits a few exclusive minutes on this shared 2-core host (each
# context is prefilled once for the widest batch, and stock prompt lookup prefills each row again); not timed
# yet, so not yet "the largest slice that fits 10 minutes"
SETTINGS = ((4096, 1), (4096, 2))
NEW = 24  # decoded tokens per row and arm
ROUNDS = 3  # each arm decodes this many times, in interleaved rounds; its time is the fastest
GAMMA = 6  # the paper's draft length (sink+window, Quest, the combined draft)
GAMMAS = (1, 2, 4, 6)  # Vegas's draft lengths
LOOKUP_TOKENS = 10  # stock prompt lookup's candidates (``prompt_lookup_num_tokens``)
LOOKUP_NGRAM = 2  # transformers' prompt lookup matches up to 2-grams (``max_matching_ngram_size``)
ROW_SHIFT = 1500  # tokens between the starts of two rows of a batch
PREFILL_CHUNK = 1024
PLAIN_ARMS = (
    "plain greedy (DynamicCache)",
    "plain greedy (StaticCache)",
    "plain greedy (InPlaceCache)",
    "plain greedy (InPlaceCache, chunk_attention)",
)
LOOKUP = "prompt lookup (stock, 10 tokens)"
FALLBACK = "vegas (fallback on)"
COMBINED = f"vegas + lookup (combined, gamma {GAMMA})"
COMBINED_FALLBACK = f"vegas + lookup (combined, gamma {GAMMA}, fallback on)"
TARGET_PLAIN, TARGET_FLOOR = 1.3, 0.95


def token_stream(tokenizer: Any) -> torch.Tensor:
    """Token ids ``[T]`` of the standard library's source, docstrings and licence (one pass, no repeats)."""
    from hf_ext.assets import english_texts

    texts = english_texts()
    text = "\n\n".join(texts[k] for k in ("code", "docs", "license") if k in texts)
    return cast(torch.Tensor, tokenizer(text, return_tensors="pt")["input_ids"][0])


def prompts(stream: torch.Tensor, n: int, batch: int) -> torch.Tensor:
    """``[batch, n]`` windows of ``stream``, row ``r`` from token ``r * ROW_SHIFT`` (BOS first, as the
    tokenizer writes it)."""
    need = n - 1 + (batch - 1) * ROW_SHIFT
    if need >= len(stream):
        raise ValueError(
            f"`n`={n} x batch {batch} needs {need + 1} tokens of real text; the stream holds {len(stream)}."
        )
    bos = stream[:1]
    return torch.stack(
        [torch.cat([bos, stream[1 + r * ROW_SHIFT : r * ROW_SHIFT + n]]) for r in range(batch)]
    )


# ---------------------------------------------------------------------------------------------- counting
class ForwardLog:
    """Counts the decode forwards of ``lm`` through a pre-hook: per forward ``(rows, query tokens, logits
    kept, cache length, mode)``."""

    def __init__(self, lm: Any) -> None:
        self.calls: list[tuple[int, int, int, int, str]] = []
        self.seconds: list[float] = []
        self.on = False
        self._handles = [
            lm.register_forward_pre_hook(self._record, with_kwargs=True),
            lm.register_forward_hook(self._done),
        ]

    def _done(self, module: Any, args: Any, output: Any) -> None:
        if self.on:
            self.seconds[-1] = time.perf_counter() - self.seconds[-1]

    def remove(self) -> None:
        for h in self._handles:
            h.remove()

    def _record(self, module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        if not self.on:
            return
        ids = cast(torch.Tensor, kwargs.get("input_ids", args[0] if args else None))
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        past = cache.get_seq_length() if cache is not None else 0
        keep = kwargs.get("logits_to_keep", 0) or ids.shape[1]
        self.calls.append(
            (
                ids.shape[0],
                ids.shape[1],
                int(keep),
                int(past),
                kwargs.get("vegas_mode") or "plain",
            )
        )
        self.seconds.append(time.perf_counter())

    @contextmanager
    def record(self) -> Iterator[list[tuple[int, int, int, int, str]]]:
        self.calls, self.seconds, self.on = [], [], True
        try:
            yield self.calls
        finally:
            self.on = False


# ---------------------------------------------------------------------------------------------- arms
def _copy(
    kind: str,
    lm: Any,
    base: Any,
    rows: slice,
    n: int,
    capacity: int,
    rollback: bool = False,
) -> Any:
    """The first ``n`` entries of ``base``'s ``rows`` copied into a new ``DynamicCache`` or ``StaticCache``;
    ``rollback``: a ``DynamicCache`` whose sliding layers record their past (assisted decoding crops it)."""
    from transformers import DynamicCache, StaticCache

    cache: Any
    if kind == "dynamic":
        cache = DynamicCache(config=lm.config)
        if rollback:
            cache.activate_past_recording()
    else:
        cache = StaticCache(config=lm.config, max_cache_len=capacity)
    for dst, src in zip(cache.layers, base.layers):
        cast(Any, dst).update(src.keys[rows, :, :n].clone(), src.values[rows, :, :n].clone())
    return cache


def _generate(lm: Any, prompt: torch.Tensor, cache: Any, **kw: Any) -> tuple[Any, float]:
    with torch.no_grad(), Timer() as t:
        out = lm.generate(
            prompt,
            cache=cache,
            max_new_tokens=NEW,
            do_sample=False,
            return_dict_in_generate=True,
            **kw,
        )
    return out, t.seconds


def arms() -> dict[str, dict[str, Any]]:
    """Every arm by name: its kind and, for a ``vegas_generate`` arm, its ``VegasConfig`` keyword
    arguments."""
    out: dict[str, dict[str, Any]] = {name: {"kind": name} for name in PLAIN_ARMS}
    out[LOOKUP] = {"kind": LOOKUP}
    out[f"sink+window (gamma {GAMMA})"] = {
        "kind": "vegas",
        "selector": "streamingllm",
        "num_draft_tokens": GAMMA,
    }
    out[f"quest (gamma {GAMMA})"] = {
        "kind": "vegas",
        "selector": "quest",
        "num_draft_tokens": GAMMA,
    }
    for g in GAMMAS:
        out[f"vegas (gamma {g})"] = {"kind": "vegas", "num_draft_tokens": g}
    out[COMBINED] = {
        "kind": "vegas",
        "num_draft_tokens": GAMMA,
        "lookup_ngram": LOOKUP_NGRAM,
    }
    out[COMBINED_FALLBACK] = {**out[COMBINED], "fallback": True}
    out[FALLBACK] = {"kind": "vegas", "fallback": True}
    return out


def decode(
    lm: Any, log: ForwardLog, spec: dict[str, Any], prompt: torch.Tensor, base: Any
) -> tuple[torch.Tensor, float, Any, list[tuple[int, int, int, int, str]]]:
    """Decode ``prompt`` ``[B, n]`` by one arm from the prefilled ``base``; returns the sequences, the decode
    seconds (a cache copy is not timed), ``VegasStats`` (``None`` for host arms) and the counted forwards."""
    from hf_ext.vegas.attention import (
        attention_implementation,
        register_chunk_attention,
    )
    from hf_ext.vegas.config import VegasConfig
    from hf_ext.vegas.generate import vegas_generate

    b, n = prompt.shape
    kind = spec["kind"]
    if kind == LOOKUP:
        # transformers 5.25's assisted decoding feeds the whole prompt on its first iteration even when the
        # cache already holds it, so it starts from an empty cache, one row at a time (it takes batch 1 only);
        # its first forward (the prefill) is taken off its time and its counts
        seqs, total, counted = [], 0.0, []
        for r in range(b):
            with log.record() as calls:
                out, t = _generate(lm, prompt[r : r + 1], None, prompt_lookup_num_tokens=LOOKUP_TOKENS)
            seqs.append(out.sequences[0])
            total += t - log.seconds[0]
            counted += calls[1:]
        return torch.stack(seqs), total, None, counted
    kw: dict[str, Any] = {}
    if kind in PLAIN_ARMS[:2]:
        cache = _copy(
            "dynamic" if kind == PLAIN_ARMS[0] else "static",
            lm,
            base,
            slice(0, b),
            n - 1,
            n + NEW,
        )
    else:
        cache = base.rows(b, n - 1)
    if kind == "vegas":
        config = {k: v for k, v in spec.items() if k != "kind"}
        kw = {
            "custom_generate": vegas_generate,
            "vegas_config": VegasConfig(**{"fallback": False, **config}),
        }
    with log.record() as calls:
        if kind == PLAIN_ARMS[3]:
            with attention_implementation(lm, register_chunk_attention()):
                out, t = _generate(lm, prompt, cache)
        else:
            out, t = _generate(lm, prompt, cache, **kw)
    return out.sequences, t, getattr(out, "vegas_stats", None), list(calls)


# ---------------------------------------------------------------------------------------------- cost model
def model_shape(lm: Any) -> dict[str, Any]:
    """What the cost model needs of ``lm``: weight bytes read per forward (the tied embedding counted once,
    as the LM head reads it whole), matmul parameters per token row (body) and per kept logits row (head),
    bytes of one cached position of one layer, per-layer windows, query heads and head size."""
    cfg = lm.config.get_text_config(decoder=True)
    params = {id(p): p for p in lm.parameters()}
    element = next(iter(params.values())).element_size()
    head = lm.get_output_embeddings().weight
    total = sum(p.numel() for p in params.values())
    return {
        "weight_bytes": total * element,
        "body_params": total - head.numel(),
        "head_params": head.numel(),
        "entry_bytes": 2 * cfg.num_key_value_heads * cfg.head_dim * element,
        "windows": [cfg.sliding_window if t == "sliding_attention" else None for t in cfg.layer_types],
        "heads": cfg.num_attention_heads,
        "head_dim": cfg.head_dim,
    }


def calibrate(
    lm: Any, base: Any, b: int, n: int, widths: tuple[int, ...], reps: int = 2
) -> list[dict[str, Any]]:
    """Time one plain forward of ``w`` query tokens per row (every logits row kept, as a verify does) over
    ``b`` rows of the prefilled ``n``-token cache, for each ``w`` of ``widths`` (fastest of ``reps``): the
    cost model's fit points, taken outside every arm."""
    out = []
    for w in widths:
        best = math.inf
        ids = torch.full((b, w), 3, dtype=torch.long)
        for _ in range(reps):
            view = base.rows(b, n)
            with torch.no_grad(), Timer() as t:
                lm(input_ids=ids, cache=view, use_cache=True, logits_to_keep=w)
            best = min(best, t.seconds)
        out.append({"calls": [(b, w, w, n, "plain")], "seconds": best})
    return out


def counted_terms(
    calls: list[tuple[int, int, int, int, str]],
    shape: dict[str, Any],
    budget_k: int | None,
) -> tuple[float, float, float]:
    """``(forwards, bytes, flops)`` of a list of counted forwards (:class:`ForwardLog`): per forward the
    weights once plus each row's cache reads per layer (a global layer its whole cache, or ``budget_k`` when
    ``mode == "draft"``; a sliding layer its window), and ``2 x`` parameters per token row (the LM head
    per kept row) plus the attention's ``4 x heads x head_dim`` per query-position pair."""
    from hf_ext.vegas.core import forward_cost

    forwards = byte_sum = flop_sum = 0.0
    for rows, q, keep, past, mode in calls:
        reads = None if mode != "draft" or budget_k is None else budget_k
        nb, nf = forward_cost(shape, rows=rows, query=q, kept=keep, context=past, draft_reads=reads)
        forwards += 1
        byte_sum += nb
        flop_sum += nf
    return forwards, byte_sum, flop_sum


def read_rate(lm: Any, reps: int = 3) -> float:
    """Bytes/s of one streaming read of the LM head's weight (671 MB in fp32), fastest of ``reps``: the
    machine's read rate, measured apart from any forward (a decode step's bytes and fixed cost cannot be told
    apart from forwards whose bytes hardly change)."""
    w = lm.get_output_embeddings().weight
    best = math.inf
    with torch.no_grad():
        for _ in range(reps):
            with Timer() as t:
                w.sum()
            best = min(best, t.seconds)
    return w.numel() * w.element_size() / best


def fit(points: list[tuple[float, float, float, float]], bw: float) -> tuple[float, float]:
    """Non-negative least squares of ``seconds - bytes / bw = c x forwards + flops / F`` over
    ``(forwards, bytes, flops, seconds)`` points; returns ``(c, F)`` (``inf`` for a term fitted to 0)."""
    from scipy.optimize import nnls

    a = torch.tensor([(p[0], p[2]) for p in points], dtype=torch.float64)
    y = torch.tensor([p[3] - p[1] / bw for p in points], dtype=torch.float64)
    scale = a.abs().max(0).values.clamp(min=1e-30)
    coef = torch.from_numpy(nnls((a / scale).numpy(), y.numpy())[0]) / scale
    c, per_flop = coef.tolist()
    return c, 1 / per_flop if per_flop else math.inf


# ---------------------------------------------------------------------------------------------- the run
def _prefill(lm: Any, prompt: torch.Tensor, capacity: int) -> Any:
    from hf_ext.vegas.cache import InPlaceCache

    b, n = prompt.shape
    cache = InPlaceCache(lm.config, b, capacity, dtype=next(lm.parameters()).dtype)
    with torch.no_grad():
        for s in range(0, n - 1, PREFILL_CHUNK):
            lm(
                input_ids=prompt[:, s : min(s + PREFILL_CHUNK, n - 1)],
                cache=cache,
                use_cache=True,
                logits_to_keep=1,
            )
    return cache


def run_gemma(
    settings: tuple[tuple[int, int], ...] = SETTINGS,
    names: tuple[str, ...] | None = None,
) -> BenchReport:
    """The Gemma grid (module docstring): every ``(context, batch)`` of ``settings``, every arm (or
    ``names``)."""
    from hf_ext.assets import gemma3_270m
    from hf_ext.vegas.core import budget

    with pinned_threads(THREADS):
        lm, tok = gemma3_270m(torch.float32)
        stream = token_stream(tok)
        shape = model_shape(lm)
        bw = read_rate(lm)
        log = ForwardLog(lm)
        specs = {k: v for k, v in arms().items() if names is None or k in names}
        rows: list[dict[str, Any]] = []
        points: list[tuple[float, float, float, float]] = []
        prefill_s: dict[tuple[int, int], float] = {}
        for n in sorted({c for c, _ in settings}):
            widest = max(b for c, b in settings if c == n)
            prompt_all = prompts(stream, n, widest)
            with Timer() as t:
                base = _prefill(lm, prompt_all, n + NEW + max(GAMMAS) + LOOKUP_TOKENS + 2)
            prefill_s[(n, widest)] = t.seconds
            for b in sorted(b for c, b in settings if c == n):
                prompt = prompt_all[:b]
                _generate(
                    lm, prompt, base.rows(b, n - 1)
                )  # warm-up: a process's first decode pays one-time costs
                for cal in calibrate(lm, base, b, n - 1, (1, GAMMA + 1, LOOKUP_TOKENS + 1)):
                    points.append((*counted_terms(cal["calls"], shape, None), cal["seconds"]))
                k = budget(n, n, 0.07, 256, n + NEW)
                runs = {name: [decode(lm, log, spec, prompt, base)] for name, spec in specs.items()}
                for _ in range(ROUNDS - 1):
                    for name, spec in specs.items():
                        runs[name].append(decode(lm, log, spec, prompt, base))
                ref = None
                for name, spec in specs.items():
                    seqs, _, stats, calls = runs[name][0]
                    secs = min(run[1] for run in runs[name])
                    ref = seqs if ref is None else ref
                    terms = counted_terms(calls, shape, k if spec["kind"] == "vegas" else None)
                    if spec["kind"] in PLAIN_ARMS[2:]:
                        points.append((*terms, secs))
                    rows.append(
                        {
                            "context": n,
                            "batch": b,
                            "system": name,
                            "identical": all(bool(torch.equal(run[0], ref)) for run in runs[name]),
                            "seconds": secs,
                            "_terms": terms,
                            "_stats": stats,
                        }
                    )
        log.remove()
    return report(rows, points, shape, bw, prefill_s, settings)


def crossover(
    shape: dict[str, Any], c: float, bw: float, flops: float, alpha: float, gamma: int
) -> list[str]:
    """Per batch of 1..64, the least context (4k..1M, doubling) at which the cost model predicts Vegas
    (``alpha``, ``gamma``, the default budget) ahead of plain decoding on this machine's fitted constants."""
    from hf_ext.vegas.core import budget, predicted_speedup

    out = []
    for b in (1, 2, 4, 8, 16, 32, 64):
        n = 4096
        while n <= 2**20:
            r = predicted_speedup(
                weight_bytes=shape["weight_bytes"],
                entry_bytes=shape["entry_bytes"],
                windows=shape["windows"],
                context=n,
                batch=b,
                gamma=gamma,
                budget_k=budget(n, n, 0.07, 256, n + NEW),
                acceptance=alpha,
                body_params=shape["body_params"],
                head_params=shape["head_params"],
                heads=shape["heads"],
                head_dim=shape["head_dim"],
                byte_rate=bw,
                flop_rate=flops,
                forward_seconds=c,
            )
            if r > 1:
                out.append(f"batch {b}: {n // 1024}k ({r:.2f}x)")
                break
            n *= 2
        else:
            out.append(f"batch {b}: none up to 1M")
    return out


def report(
    rows: list[dict[str, Any]],
    points: list[tuple[float, float, float, float]],
    shape: dict[str, Any],
    bw: float,
    prefill_s: dict[tuple[int, int], float],
    settings: tuple[tuple[int, int], ...],
) -> BenchReport:
    """The table, the cost model's fit and predictions, the targets' verdicts and the crossover."""
    c, flops = fit(points, bw)

    def predicted(r: dict[str, Any]) -> float:
        f, nb, nf = r["_terms"]
        return c * f + nb / bw + nf / flops

    out = []
    for n, b in sorted({(r["context"], r["batch"]) for r in rows}):
        at = [r for r in rows if (r["context"], r["batch"]) == (n, b)]
        plain = min((r for r in at if r["system"] in PLAIN_ARMS), key=lambda r: r["seconds"])
        for r in at:
            s = r["_stats"]
            measured = plain["seconds"] / r["seconds"]
            model = predicted(plain) / predicted(r)
            out.append(
                {
                    "context": n,
                    "batch": b,
                    "system": r["system"],
                    "is_baseline": not r["system"].startswith("vegas"),
                    "identical": r["identical"],
                    "alpha": round(s.acceptance_rate, 3) if s is not None and s.decision != "plain" else None,
                    "forwards": int(r["_terms"][0]),
                    "tokens_per_s": round(b * NEW / r["seconds"], 3),
                    "ratio": round(measured, 3),
                    "model_ratio": round(model, 3),
                    "model_vs_measured": round(model / measured, 3),
                    "decision": None if s is None else s.decision,
                }
            )
    top = max(settings, key=lambda nb: nb[0] * nb[1])
    pool = [r for r in out if (r["context"], r["batch"]) == top]
    vegas = [r for r in pool if r["system"].startswith("vegas (gamma")]
    best = max(vegas, key=lambda r: r["tokens_per_s"])
    head = Headline.from_rows(
        [r for r in pool if r["is_baseline"] or r is best],
        "tokens_per_s",
        higher_is_better=True,
        method_system=best["system"],
    )
    notes = [
        f"torch threads pinned to {THREADS}; CPU wall-clock on a shared 2-core host; fp32; decode only "
        f"({NEW} new tokens per row, each arm timed by the fastest of {ROUNDS} interleaved rounds, one "
        "shared prefill per context: "
        + ", ".join(f"{n}x{b} {s:.0f} s" for (n, b), s in prefill_s.items())
        + ").",
        verdict(
            "every arm token-identical to plain greedy",
            all(r["identical"] for r in out),
            f"{sum(r['identical'] for r in out)}/{len(out)} rows",
        ),
        verdict(
            f"N={top[0]} batch {top[1]}: Vegas >= {TARGET_PLAIN}x the fastest plain greedy",
            best["ratio"] >= TARGET_PLAIN,
            f"{best['ratio']:.2f}x at {best['system']}",
        ),
    ]
    for n, b in settings:
        by_name = {r["system"]: r for r in out if (r["context"], r["batch"]) == (n, b)}
        if LOOKUP in by_name:
            mine = max(
                (r for name, r in by_name.items() if name.startswith("vegas")),
                key=lambda r: r["tokens_per_s"],
            )
            notes.append(
                verdict(
                    f"N={n} batch {b}: Vegas (best arm) ahead of stock prompt lookup",
                    mine["tokens_per_s"] > by_name[LOOKUP]["tokens_per_s"],
                    f"{mine['system']} {mine['tokens_per_s']:.2f} vs "
                    f"{by_name[LOOKUP]['tokens_per_s']:.2f} tok/s",
                )
            )
        if FALLBACK in by_name and b == 1 and n == min(c for c, _ in settings):
            notes.append(
                verdict(
                    f"N={n} batch 1: Vegas with its fallback >= {TARGET_FLOOR}x plain",
                    by_name[FALLBACK]["ratio"] >= TARGET_FLOOR,
                    f"{by_name[FALLBACK]['ratio']:.2f}x (decision: {by_name[FALLBACK]['decision']})",
                )
            )
    err = [r["model_vs_measured"] for r in out]
    within = sum(0.7 <= e <= 1.3 for e in err)
    notes.append(
        f"cost model (hf_ext.vegas.core.forward_cost per counted forward), bytes at the read rate of one "
        f"streaming read of the LM head ({bw / 1e9:.1f} GB/s), the rest fitted on {len(points)} timed plain "
        f"forwards and plain arms (never a self-draft arm): {1e3 * c:.1f} ms per forward + bytes / "
        f"{bw / 1e9:.1f} GB/s + FLOPs / {flops / 1e9:.1f} GFLOP/s; predicted / measured ratio within 0.7-1.3 "
        f"on {within}/{len(err)} rows (range {min(err):.2f}-{max(err):.2f})."
    )
    alpha = best["alpha"] if best["alpha"] is not None else 0.8
    gamma = int(best["system"].split("gamma ")[1].rstrip(")"))
    notes.append(
        f"crossover predicted by the cost model (this machine's fit, alpha {alpha:.2f}, gamma {gamma}): "
        + "; ".join(crossover(shape, c, bw, flops, alpha, gamma))
    )
    return BenchReport(
        rows=out,
        headline=head,
        notes=notes,
        config={"model": MODEL, "settings": settings, "new": NEW, "gammas": GAMMAS},
        what="Gemma-3-270M (fp32) on standard-library text, "
        + ", ".join(f"{n}x{b}" for n, b in settings)
        + ": every arm",
        settings=[{"context": n, "batch": b} for n, b in settings],
    )
