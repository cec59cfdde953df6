"""``hf-ext bench vegas``: Vegas vs plain greedy and the other sparse self-drafts, on a trained all-global LM.

The model is :mod:`~benchmarks.vegas.lm`'s byte-level Llama (2 global layers, 4 KV heads of
32, 0.43 M parameters), trained once on Python standard-library source and shipped beside this module. Its
weights are 1.7 MB while one row's KV is 2 kB per token, so KV reads dominate a decode step from about a
thousand tokens on: the regime in which a sparse self-draft can pay.

Prompts are held-out standard-library files (never trained on). Rows alternate between a *retrieval* prompt
(a long file, then ``"\\n# again:\\n"`` and the opening of a function defined early in it: the continuation
must be read from far back) and a *code* prompt (the file itself). Batch 1 uses row 0.

Per context, one prefill of the largest batch fills an :class:`~hf_ext.vegas.cache.InPlaceCache`;
every arm decodes from it after its lengths are reset (decoding writes only past the prompt, so the prefix is
shared and never copied), the batch-1 settings from its first row. Timing covers decode only; every system is
decoded three times, round robin, and timed by its fastest run (this shared host's speed drifts between
minutes, and a process's first call of each path pays one-time costs). At the largest setting the speed
targets' three contenders (the best plain arm, Vegas and the best other sparse arm, each at its fastest gamma)
then run up to ten more rounds, and the targets are also judged on the median of those rounds' ratios
(:func:`paired_rounds`). Counted costs beside the times: alpha, tau,
KV entries and weight bytes read per token, a cost model of a step (per forward, bytes, query-key arithmetic;
fitted on the plain arms and timings of the verify's attention alone, bytes at each setting's own read rate,
the self-draft loop's fixed cost per forward timed on a short context) whose predicted tokens/s ratio is
compared with the measured one and extrapolated to an H200, and the attention mass each selection keeps.
Acceptance is also compared on more text than a grid row holds: per context, an acceptance pass decodes
:data:`ACCEPTANCE_PROMPTS` prompts each alone with every sparse arm at the paper's gamma and gives Vegas's
alpha less each rival's with a bootstrap interval over the prompts.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, cast

import torch

from benchmarks.harness import BenchReport, Headline, Timer, pinned_threads, verdict

THREADS = 2
SELECTORS = {"vegas": "vegas", "sink+window": "streamingllm", "quest": "quest", "full-kv oracle": "full"}
SPARSE = ("vegas", "sink+window", "quest")
PLAIN, STATIC = "plain greedy (InPlaceCache)", "plain greedy (StaticCache)"
KERNEL = "plain greedy (InPlaceCache, chunk_attention)"  # the verify's attention kernel under plain decoding
PLAIN_ARMS = (PLAIN, STATIC, KERNEL)
MODEL_BASE = KERNEL  # the plain arm the cost model is fitted on: its attention is the verify's kernel
MARKER = b"\n# again:\n"
QUESTION = 64  # bytes of the early function repeated after the marker
LOOP_CONTEXT = 128  # tokens of the prompt that times the self-draft loop's fixed cost per forward
SHARES = ("forward", "bytes", "pairs", "selection", "scatter")  # the cost model's terms
GAMMA_SWEEP = (1, 2, 3)  # draft lengths tried for every sparse arm at the largest setting (the paper's is 6)
# the speed targets at the largest setting (docs page, "Targets"): (verdict name, least ratio)
VS_PLAIN = ("Vegas >= 1.3x the best plain greedy", 1.3)
VS_RIVAL = ("Vegas >= 1.1x the best other sparse self-draft", 1.1)
REPEATS = 3  # decodes of every system per setting, fastest kept (a process's first call pays one-time costs)
PAIRED_ROUNDS = 10  # extra rounds at the largest setting for the speed targets: best plain, Vegas, best rival
PAIRED_SECONDS = 75.0  # no paired round starts past this many seconds of them (three always run)
ACCEPTANCE_PROMPTS = 32  # prompts per context in the acceptance pass, each decoded alone at the paper's gamma
BOOTSTRAP_DRAWS = 2000  # resamples of the prompts for the interval of an acceptance difference
GAMMA = 6  # the paper's draft length, every grid setting's


@dataclass(frozen=True)
class Size:
    """What a run decodes: every context x batch, the self-draft arms beside the plain ones, new tokens per
    row, the gamma sweep at the largest setting and the acceptance pass's prompts per context (0: none)."""

    contexts: tuple[int, ...]
    batches: tuple[int, ...]
    arms: tuple[str, ...]
    new: int
    sweep: tuple[int, ...] = ()
    acceptance: int = 0


# The full run's grid is every context x every batch; --quick (the tour's row) decodes its smallest setting as
# the full run does (same new tokens and repeats, so its row compares with the full run's), with only the arms
# its headline needs (the plain arms always run: at 4096 one of them is the fastest baseline in every full
# run), and without the gamma sweep, paired rounds, acceptance pass or attention mass.
FULL = Size((4096, 16384, 32768), (1, 8), tuple(SELECTORS), 32, GAMMA_SWEEP, ACCEPTANCE_PROMPTS)
QUICK = Size((4096,), (1,), ("vegas",), FULL.new)
# H200 (stated, not measured): HBM bandwidth, per-forward launch overhead of a 4-layer model, bf16.
H200_BW, H200_FORWARD_S, BF16 = 4.8e12, 60e-6, 2


# ---------------------------------------------------------------------------------------------- prompts
def _retrieval(text: bytes, n: int) -> list[int]:
    """``n`` bytes: the file's first ``n - len(MARKER) - QUESTION`` bytes, the marker, then the first
    ``QUESTION`` bytes of a ``def`` in the first fifth of it (the question about an early part)."""
    body = n - len(MARKER) - QUESTION
    head = text[:body]
    at = head.find(b"\ndef ", 0, max(1, body // 5))
    at = at + 1 if at >= 0 else 0
    return list(head + MARKER + head[at : at + QUESTION])


def prompts(n: int, batch: int) -> torch.Tensor:
    """``[batch, n]`` byte prompts from held-out standard-library files (concatenated to reach ``n``)."""
    from benchmarks.vegas.lm import stdlib_sources

    if n <= len(MARKER) + QUESTION:
        raise ValueError(f"`n`={n} leaves no room for a file before the marker and the question.")
    files = sorted(stdlib_sources()["held_out"].items(), key=lambda kv: -len(kv[1]))
    rows = []
    for r in range(batch):
        start = r % len(files)
        text = b"".join(f[1] for f in files[start:] + files[:start])
        while len(text) < n:
            text += text
        rows.append(_retrieval(text, n) if r % 2 == 0 else list(text[:n]))
    return torch.tensor(rows)


# ---------------------------------------------------------------------------------------------- running
def _static_copy(lm: Any, cache: Any, rows: int, n: int, max_len: int) -> Any:
    from transformers import StaticCache

    static = StaticCache(config=lm.config, max_cache_len=max_len)
    for dst, src in zip(static.layers, cache.layers):
        cast(Any, dst).update(src.keys[:rows, :, :n], src.values[:rows, :, :n])
    return static


def _compare(ref: torch.Tensor, seq: torch.Tensor, n: int) -> dict[str, Any]:
    if torch.equal(ref, seq):
        return {"identical": True}
    pos = int((ref[:, n:] != seq[:, n:]).any(0).nonzero()[0])
    return {"identical": False, "mismatch_pos": pos}


def _decode(lm: Any, prompt: torch.Tensor, cache: Any, new: int, **kw: Any) -> tuple[Any, float]:
    with torch.no_grad(), Timer(prompt.device) as t:
        out = lm.generate(
            prompt, cache=cache, max_new_tokens=new, do_sample=False, return_dict_in_generate=True, **kw
        )
    return out, t.seconds


def _self_draft(
    lm: Any, prompt: torch.Tensor, cache: Any, new: int, selector: str, gamma: int
) -> tuple[Any, float]:
    """:func:`_decode` by ``vegas_generate`` with ``selector`` at draft length ``gamma``."""
    from hf_ext.vegas.config import VegasConfig
    from hf_ext.vegas.generate import vegas_generate

    vc = VegasConfig(num_draft_tokens=gamma, selector=selector, fallback=False)
    return _decode(lm, prompt, cache, new, custom_generate=vegas_generate, vegas_config=vc)


def _prefill(lm: Any, prompt: torch.Tensor, cache: Any) -> None:
    """Fill ``cache`` with ``prompt`` less its last token, which each decode feeds first."""
    with torch.no_grad():
        lm(prompt[:, :-1], cache=cache, use_cache=True, logits_to_keep=1)


def _draft_costs(stats: Any, lm_config: Any, rows: int, n: int) -> dict[str, float]:
    """Counted costs of a self-draft decode from a ``rows x n`` prompt (the prompt's last token included):
    forwards, KV entries attended, query-key pairs, and the selection's own traffic in entries (K-only reads
    count half an entry), and the contiguous runs of the drafts' selections (each a scattered read)."""
    layers, heads = lm_config.num_hidden_layers, lm_config.num_attention_heads
    return {
        "forwards": 1 + stats.forwards,  # the prompt's last token, then drafts and verifies
        "kv_entries": rows * layers * n + stats.kv_entries,
        "pairs": heads * rows * layers * n + stats.query_key_pairs,
        "extra_entries": 0.5 * (stats.score_key_reads + stats.selection_entries),
        "runs": stats.selection_runs,
    }


def _setting(
    lm: Any,
    prompt: torch.Tensor,
    base: Any,
    *,
    new: int,
    runs: tuple[tuple[str, int], ...],
    setting: dict[str, Any],
    repeats: int,
    paired: int = 0,
) -> list[dict[str, Any]]:
    """Rows of one (context, batch) setting: three plain baselines (SDPA on the in-place cache and on
    transformers' ``StaticCache``; the verify's ``chunk_attention`` kernel on the in-place cache, so that no
    arm's speed comes from the kernel alone), then the self-draft ``runs`` (arm, gamma); a run at a gamma
    other than the setting's is named with it (the gamma sweep). Every system is decoded ``repeats`` times in
    turn (round robin, so that a slow spell of the shared host falls on all of them, the plain arms included)
    and timed by its fastest run; greedy decoding gives the same tokens and counters every time. With
    ``paired`` rounds, the best plain arm, Vegas at its fastest gamma and the fastest other sparse arm then
    run that many more rounds on their own (:func:`paired_rounds`); Vegas's row carries their summary as
    ``_paired``."""
    from hf_ext.vegas.attention import attention_implementation, register_chunk_attention

    b, n = prompt.shape
    layers, heads = lm.config.num_hidden_layers, lm.config.num_attention_heads
    emitted = b * new
    plain_entries = b * layers * sum(n + i for i in range(new))  # every forward reads the whole cache
    names = {f"{a} (gamma {g})" if g != setting["gamma"] else a: (a, g) for a, g in runs}

    def run(system: str) -> tuple[Any, float]:
        if system == PLAIN:
            return _decode(lm, prompt, base.rows(b, n - 1), new)
        if system == STATIC:
            return _decode(lm, prompt, _static_copy(lm, base, b, n - 1, n + new), new)
        if system == KERNEL:
            with attention_implementation(lm, register_chunk_attention()):
                return _decode(lm, prompt, base.rows(b, n - 1), new)
        arm, gamma = names[system]
        return _self_draft(lm, prompt, base.rows(b, n - 1), new, SELECTORS[arm], gamma)

    systems = (*PLAIN_ARMS, *names)
    outs: dict[str, Any] = {}
    seconds = dict.fromkeys(systems, math.inf)
    for _ in range(repeats):
        for system in systems:
            out, t = run(system)
            if (
                t < seconds[system]
            ):  # the fastest run's own phase times (its tokens and counters never change)
                outs[system], seconds[system] = out, t
    ref = outs[PLAIN].sequences
    rows = []
    for name in PLAIN_ARMS:
        same = {"identical": "reference"} if name == PLAIN else _compare(ref, outs[name].sequences, n)
        rows.append(
            {**setting, "system": name, "is_baseline": True, **same, "forwards": new,
             "kv_entries_per_token": plain_entries / emitted, "_seconds": seconds[name],
             "_pairs": heads * plain_entries, "_extra_entries": 0.0, "_runs": 0.0}
        )  # fmt: skip
    for name, (arm, gamma) in names.items():
        s = outs[name].vegas_stats
        cost = _draft_costs(s, lm.config, b, n)
        rows.append(
            {
                **setting,
                "gamma": gamma,
                "system": name,
                "is_baseline": arm != "vegas",
                "_arm": arm,
                **_compare(ref, outs[name].sequences, n),
                "alpha": s.acceptance_rate,
                "tau": s.mean_accepted_length,
                "forwards": cost["forwards"],
                "kv_entries_per_token": cost["kv_entries"] / emitted,
                "selection_entries_per_token": s.selection_entries / emitted,
                "draft_share": s.draft_seconds / max(s.draft_seconds + s.verify_seconds, 1e-12),
                "_seconds": seconds[name],
                "_drafts_per_iteration": s.drafted / max(s.row_iterations, 1),
                "_verifies": s.iterations,
                "_draft_ms": 1e3 * s.draft_seconds / max(s.draft_forwards, 1),
                "_verify_ms": 1e3 * s.verify_seconds / max(s.iterations, 1),
                "_pairs": cost["pairs"],
                "_extra_entries": cost["extra_entries"],
                "_runs": cost["runs"],
            }
        )
    if paired:
        duel = paired_contenders(seconds, names)
        by_system = {r["system"]: r for r in rows}
        by_system[duel[1]]["_paired"] = paired_rounds(lambda system: run(system)[1], duel, paired)
    t_best = min(seconds[name] for name in PLAIN_ARMS)
    for row in rows:
        t = row.pop("_seconds")
        row["tokens_per_s"] = emitted / t
        row["tokens_per_s_ratio"] = t_best / t
    return rows


def paired_contenders(seconds: dict[str, float], names: dict[str, tuple[str, int]]) -> tuple[str, str, str]:
    """From a setting's fastest times per system, ``(best plain arm, Vegas at its fastest gamma, the
    fastest other sparse arm at its fastest gamma)``; ``names`` maps each self-draft system to its
    ``(arm, gamma)``."""
    plain = min(PLAIN_ARMS, key=seconds.__getitem__)
    vegas = min((s for s, (arm, _) in names.items() if arm == "vegas"), key=seconds.__getitem__)
    rivals = [s for s, (arm, _) in names.items() if arm in SPARSE and arm != "vegas"]
    if not rivals:
        raise ValueError(f"paired rounds need a sparse arm other than Vegas; got {sorted(names)}.")
    return plain, vegas, min(rivals, key=seconds.__getitem__)


def paired_rounds(
    decode: Any, contenders: tuple[str, str, str], rounds: int, budget_s: float = PAIRED_SECONDS
) -> dict[str, Any]:
    """Time ``contenders`` (plain, Vegas, rival) ``rounds`` more times and compare Vegas with each baseline
    within a round (:func:`paired_summary`). Unlike :func:`~benchmarks.harness.interleaved_times`, the order
    rotates every round, ``decode(system)`` returns its own seconds (decode only, as in the grid: a
    ``StaticCache`` copy is not timed), and a round starts only within ``budget_s`` of the first (three always
    run), so that a slow host cannot push the benchmark past its time budget."""
    times: dict[str, list[float]] = {s: [] for s in contenders}
    spent = 0.0
    for r in range(rounds):
        if r >= 3 and spent > budget_s:
            break
        with Timer() as t:
            for system in contenders[r % 3 :] + contenders[: r % 3]:
                times[system].append(decode(system))
        spent += t.seconds
    return paired_summary(times, contenders)


def paired_summary(times: dict[str, list[float]], contenders: tuple[str, str, str]) -> dict[str, Any]:
    """Per round, each baseline's time over Vegas's (``> 1``: Vegas faster), and over the rounds their median,
    smallest and largest: a slow spell of the shared host slows every system of a round alike, so a ratio
    within a round moves less than one of fastest times taken from different rounds.

    Args:
        times: seconds per round of each of ``contenders``, all of the same length.
        contenders: ``(plain, vegas, rival)`` system names.
    """
    plain, vegas, rival = contenders
    if len({len(times[s]) for s in contenders}) != 1 or not times[vegas]:
        raise ValueError(f"`times` must hold the same number (>= 1) of rounds per contender, got {times}.")
    out: dict[str, Any] = {"plain": plain, "vegas": vegas, "rival": rival, "rounds": len(times[vegas]),
                           "seconds": times}  # fmt: skip
    for key, base in (("vs_plain", plain), ("vs_rival", rival)):
        ratios = [b / v for b, v in zip(times[base], times[vegas])]
        out[key] = {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}
    return out


def acceptance_pass(
    lm: Any, base: Any, prompt: torch.Tensor, count: int, new: int, gamma: int
) -> dict[str, Any]:
    """Acceptance per prompt: the first ``count`` rows of :func:`prompts` at ``prompt``'s length, each
    decoded alone by plain greedy and by every sparse arm at ``gamma``, ``base``'s rows at a time (``base``
    already holds ``prompt``, the first rows, prefilled; later rows are prefilled into it in turn).

    A grid row at batch 1 is one prompt of ``new`` tokens, whose alpha moves by several hundredths per draft
    token; this pass gives the acceptance comparison many prompts, and the same prompts to every arm.

    Returns:
        ``alpha``: per sparse arm, ``(accepted, drafted)`` per prompt; ``by_position``: per sparse arm, the
        :func:`position_acceptance` summed over the prompts; ``identical``: per prompt and sparse arm in turn,
        whether the arm's tokens equal plain greedy's.
    """

    width, n = prompt.shape
    every = prompts(n, count).to(prompt.device)
    alpha: dict[str, list[tuple[int, int]]] = {arm: [] for arm in SPARSE}
    by_position = {arm: [(0, 0)] * gamma for arm in SPARSE}
    identical = []
    for first in range(0, count, width):
        block = every[first : first + width]
        if first:
            _prefill(lm, block, base.rows(len(block), 0))
        for r in range(len(block)):
            row = block[r : r + 1]
            ref = _decode(lm, row, base.rows(1, n - 1, first=r), new)[0].sequences
            for arm in SPARSE:
                out = _self_draft(lm, row, base.rows(1, n - 1, first=r), new, SELECTORS[arm], gamma)[0]
                s = out.vegas_stats
                alpha[arm].append((s.accepted, s.drafted))
                pos = position_acceptance(s.trace, gamma)
                by_position[arm] = [(a + b, m + k) for (a, m), (b, k) in zip(by_position[arm], pos)]
                identical.append(torch.equal(ref, out.sequences))
    return {"alpha": alpha, "by_position": by_position, "identical": identical}


def position_acceptance(trace: list[tuple[int, int, int, int, int]], gamma: int) -> list[tuple[int, int]]:
    """Per draft position ``j = 1..gamma``, ``(accepted, reached)`` over a :class:`VegasStats` trace: position
    ``j`` is reached when the draft holds ``j`` tokens and the ``j - 1`` before it were accepted, so
    accepted / reached is the acceptance at ``j`` given the draft so far was right (positions past the
    first see only the iterations that got there)."""
    counts = [[0, 0] for _ in range(gamma)]
    for *_, drafted, accepted in trace:
        for j in range(min(drafted, accepted + 1)):
            counts[j][0] += j < accepted
            counts[j][1] += 1
    return [(a, m) for a, m in counts]


def paired_alpha_interval(
    method: list[tuple[int, int]], rival: list[tuple[int, int]], draws: int = BOOTSTRAP_DRAWS, seed: int = 0
) -> tuple[float, float, float]:
    """``alpha(method) - alpha(rival)`` over the same prompts and its 95% bootstrap interval: the prompts are
    resampled with replacement (the same draw for both arms) and each arm's alpha recomputed as accepted over
    drafted of the draw.

    Args:
        method, rival: ``(accepted, drafted)`` per prompt, in the same prompt order.
    """
    if len(method) != len(rival) or not method:
        raise ValueError(f"`method` and `rival` need the same prompts (>= 1): {len(method)}, {len(rival)}.")
    a, b = torch.tensor(method, dtype=torch.float64), torch.tensor(rival, dtype=torch.float64)
    if (a[:, 1] < 1).any() or (b[:, 1] < 1).any():
        raise ValueError(f"every prompt of `method` and `rival` must draft a token, got {method}, {rival}.")
    pick = torch.randint(len(method), (draws, len(method)), generator=torch.Generator().manual_seed(seed))
    diff = a[pick, 0].sum(1) / a[pick, 1].sum(1) - b[pick, 0].sum(1) / b[pick, 1].sum(1)
    lo, hi = torch.quantile(diff, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    return float(a[:, 0].sum() / a[:, 1].sum() - b[:, 0].sum() / b[:, 1].sum()), lo, hi


def _calibrate(lm: Any, base: Any, rows: int, context: int, chunk: int, reps: int = 3) -> dict[str, Any]:
    """Time one pass of the verify's attention (``chunk_attention``: ``chunk`` query rows over every layer's
    ``context - 1`` prefilled slots, the call each self-draft arm's verify makes), the fastest of ``reps``
    like the arms: the cost model's only measurement with more than one query row, taken outside every arm.
    Also times Vegas's selection from that pass's two score rows (importance and top-k over every layer's
    cache, the work a Vegas verify adds; ``selection_seconds``): a cost that is neither bytes of KV nor
    query-key products. And times a draft's attention over a budget of slots read in place, scattered at
    random against the same number in one run (``run_seconds``: the extra time per run of a selection, the
    cost of reading it through a slot list rather than as one stream). And times the same pass with one query
    row (``one_row_seconds``: every layer's cache read once, from which :func:`byte_rates` takes the
    setting's own read rate)."""
    from hf_ext.kernels.chunked import KeySelection, chunk_attention
    from hf_ext.kernels.gathered_attention import gathered_decode_attention
    from hf_ext.vegas.config import VegasConfig
    from hf_ext.vegas.core import budget, vegas_indices_from_scores

    cfg = lm.config
    layers, heads, d = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.head_dim
    n = context - 1  # prefilled: the prompt but its last token
    view = base.rows(rows, n)
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(rows, heads, chunk, d, generator=gen).to(base.layers[0].keys.device)
    lengths = torch.full((rows,), n, device=q.device)
    seconds = selection = one_row = math.inf
    for _ in range(reps):
        with Timer(q.device) as t:
            for layer in view.layers:
                chunk_attention(q, layer.keys, layer.values, lengths, scale=d**-0.5)
        seconds = min(seconds, t.seconds)
        with Timer(q.device) as t:
            for layer in view.layers:
                chunk_attention(q[:, :, :1], layer.keys, layer.values, lengths, scale=d**-0.5)
        one_row = min(one_row, t.seconds)
    first = view.layers[0]
    score_rows = torch.tensor([[0, chunk - 1]] * rows, device=q.device)
    _, lse, logits = chunk_attention(
        q, first.keys, first.values, lengths, scale=d**-0.5, score_rows=score_rows
    )
    assert logits is not None
    lse = lse[:, :, [0, chunk - 1]].contiguous()
    vc = VegasConfig(fallback=False)
    valid = [n - chunk + 1] * rows
    ks = [budget(n, v, vc.sparse_ratio, vc.min_tokens, n + chunk) for v in valid]
    for _ in range(reps):
        with Timer(q.device) as t:
            for _layer in view.layers:
                vegas_indices_from_scores(logits, lse, valid_len=valid, budgets=ks, mode=vc.score_mode)
        selection = min(selection, t.seconds)
    k, tail = ks[0], torch.full((rows,), valid[0], device=q.device)
    spread = torch.stack([torch.randperm(valid[0], generator=gen)[:k].sort().values for _ in range(rows)])
    packed = torch.arange(k, device=q.device).expand(rows, -1)
    reads = {"scattered": KeySelection.from_padded(spread.to(q.device), tail),
             "packed": KeySelection.from_padded(packed, tail)}  # fmt: skip
    draft = dict.fromkeys(reads, math.inf)
    for _ in range(reps):
        for name, sel in reads.items():
            with Timer(q.device) as t:
                for layer in view.layers:
                    gathered_decode_attention(q[:, :, :1], layer.keys, layer.values, sel, scale=d**-0.5,
                                              length=tail + 1)  # fmt: skip
            draft[name] = min(draft[name], t.seconds)
    extra_runs = reads["scattered"].runs() - reads["packed"].runs()
    run_seconds = max(0.0, draft["scattered"] - draft["packed"]) / (layers * extra_runs)
    entries = rows * layers * n
    return {"context": context, "batch": rows, "forwards": 0, "kv_entries": entries,
            "pairs": chunk * heads * entries, "seconds": seconds, "selection_seconds": selection,
            "run_seconds": run_seconds, "one_row_seconds": one_row,
            "one_row_pairs": heads * entries}  # fmt: skip


def _calibrate_loop(lm: Any, prompt: torch.Tensor, new: int, gamma: int, repeats: int) -> dict[str, Any]:
    """Time the self-draft loop itself: ``new`` tokens with the full-cache selector over a prompt of
    :data:`LOOP_CONTEXT` tokens, where reading the cache costs almost nothing, so what remains per forward is
    the loop's fixed cost (the custom attention path, selection and gathers, per-row acceptance, and the
    verify's ``gamma + 1`` rows through the MLPs); the fastest of ``repeats``, outside every arm and
    setting."""
    import logging

    from hf_ext.vegas.cache import InPlaceCache

    prompt = prompt[:, :LOOP_CONTEXT]
    b, n = prompt.shape
    cfg = lm.config
    base = InPlaceCache(cfg, b, n + new + gamma + 2, device=prompt.device)
    _prefill(lm, prompt, base)
    quiet = logging.getLogger("hf_ext.vegas.attention")
    level, seconds = quiet.level, math.inf
    quiet.setLevel(logging.ERROR)  # the budget covers the whole short cache: the one-time warning is expected
    try:
        for _ in range(repeats):
            out, t = _self_draft(lm, prompt, base.rows(b, n - 1), new, "full", gamma)
            seconds = min(seconds, t)
    finally:
        quiet.setLevel(level)
    return {"batch": b, **_draft_costs(out.vegas_stats, cfg, b, n), "seconds": seconds}


def _grid(
    contexts: tuple[int, ...],
    batches: tuple[int, ...],
    arms: tuple[str, ...],
    new: int,
    gamma: int,
    repeats: int,
    device: str = "cpu",
    sweep: tuple[int, ...] = (),
    paired: int = 0,
    acceptance: int = 0,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], dict[str, Any], dict[int, Any]]:
    """Rows of every (context, batch) setting at ``gamma`` (at the largest context and batch also the sparse
    arms at each gamma of ``sweep``, in the same round robin as the plain arms, then ``paired`` rounds of the
    speed targets' contenders); the verify calibrations; the loop calibrations; the model's recipe; per
    context, the :func:`acceptance_pass` over ``acceptance`` prompts (none when 0)."""
    from benchmarks.vegas.lm import byte_llama
    from hf_ext.vegas.cache import InPlaceCache

    lm, recipe = byte_llama()
    lm.to(device)
    rows, calibration = [], []
    loop: list[dict[str, Any]] = []
    accepted: dict[int, Any] = {}
    for n in contexts:
        prompt = prompts(n, max(batches)).to(device)
        if not loop:  # the prompts' first tokens
            loop = [_calibrate_loop(lm, prompt[:b], new, gamma, repeats) for b in sorted(batches)]
        base = InPlaceCache(lm.config, max(batches), n + new + gamma + 2, device=device)
        _prefill(lm, prompt, base)
        for b in sorted(batches):
            runs = [(a, gamma) for a in arms]
            top = (n, b) == (max(contexts), max(batches))
            if top:  # the sweep, interleaved with the plain arms
                runs += [(a, g) for g in sweep for a in arms if a in SPARSE]
            setting = {"context": n, "batch": b, "gamma": gamma}
            rows += _setting(
                lm, prompt[:b], base, new=new, runs=tuple(runs), setting=setting, repeats=repeats,
                paired=paired if top else 0,
            )  # fmt: skip
            calibration.append(_calibrate(lm, base, b, n, gamma + 1))
        if acceptance:
            accepted[n] = acceptance_pass(lm, base, prompt, acceptance, new, gamma)
        del base
    return rows, calibration, loop, recipe, accepted


# ---------------------------------------------------------------------------------------------- byte model
def entry_bytes(config: Any, element: int) -> int:
    """Bytes of one cache position in one layer (K and V of every KV head)."""
    return 2 * config.num_key_value_heads * config.head_dim * element


def step_bytes(row: dict[str, Any], param_bytes: int, kv_entry: int) -> tuple[float, float]:
    """``(weight bytes, KV bytes)`` of a setting's decode: weights once per forward, KV per entry attended."""
    emitted = row["batch"] * row["new"]
    return row["forwards"] * param_bytes, row["kv_entries_per_token"] * emitted * kv_entry


def cost_terms(row: dict[str, Any], param_bytes: int, kv_entry: int) -> tuple[float, float, float]:
    """``(forwards, bytes, query-key pairs)`` of a setting's decode; bytes are the weights, the attended KV
    and the selection's own traffic (the scoring pass's key re-read, the gathers, Quest's page bounds)."""
    w, kv = step_bytes(row, param_bytes, kv_entry)
    return float(row["forwards"]), w + kv + row["_extra_entries"] * kv_entry, float(row["_pairs"])


def fit_cost_model(
    rows: list[dict[str, Any]], calibration: list[dict[str, Any]], param_bytes: int, kv_entry: int
) -> tuple[float, float, float]:
    """``(seconds per forward, bytes per second, seconds per query-key pair)`` of
    ``t = forwards * c + bytes / bw + pairs * p``, least squares in relative error, on the
    :data:`MODEL_BASE` plain arms (one query row per forward) and the timings of the verify's attention alone
    (``gamma + 1`` rows, no forward); never on a self-draft arm. A term whose coefficient comes out negative
    is dropped and the rest refitted."""
    plain = [r for r in rows if r["system"] == MODEL_BASE]
    x = [cost_terms(r, param_bytes, kv_entry) for r in plain] + [
        (c["forwards"], c["forwards"] * param_bytes + c["kv_entries"] * kv_entry, c["pairs"])
        for c in calibration
    ]
    y = [r["batch"] * r["new"] / r["tokens_per_s"] for r in plain] + [c["seconds"] for c in calibration]
    xs = torch.tensor(x, dtype=torch.float64) / torch.tensor(y, dtype=torch.float64)[:, None]
    active = [0, 1, 2]
    coef = torch.zeros(3, dtype=torch.float64)
    while active:
        sol = torch.linalg.lstsq(xs[:, active], torch.ones(len(y), 1, dtype=torch.float64)).solution[:, 0]
        if bool((sol >= 0).all()):
            coef[active] = sol
            break
        active.pop(int(sol.argmin()))
    c, inv_bw, p = (float(v) for v in coef)
    return c, (1.0 / inv_bw if inv_bw > 0 else math.inf), p


def loop_forward_cost(
    loop: dict[str, Any], fit: tuple[float, float, float], param_bytes: int, kv_entry: int
) -> float:
    """Seconds per forward of the self-draft loop: a :func:`_calibrate_loop` timing less its bytes and
    query-key arithmetic under the fitted ``(c, bw, p)``, divided by its forwards."""
    _, bw, p = fit
    nbytes = loop["forwards"] * param_bytes + (loop["kv_entries"] + loop["extra_entries"]) * kv_entry
    return (loop["seconds"] - nbytes / bw - loop["pairs"] * p) / loop["forwards"]


def byte_rates(
    calibration: list[dict[str, Any]], p: float, kv_entry: int, default: float
) -> dict[tuple[int, int], float]:
    """Per ``(context, batch)``, bytes per second at which the kernel reads that setting's cache: its
    calibration's one-row pass (every layer's cache once) less that pass's query-key arithmetic at ``p``.
    A cache small enough for the CPU's caches reads faster than one that is not (on the project's host 43
    GB/s at 67 MB, 23 GB/s at 537 MB), which one fitted rate cannot price. ``default`` where a calibration
    has no one-row timing or its arithmetic would take the whole time."""
    rates = {}
    for x in calibration:
        reading = x.get("one_row_seconds", 0.0) - x.get("one_row_pairs", 0.0) * p
        rates[(x["context"], x["batch"])] = x["kv_entries"] * kv_entry / reading if reading > 0 else default
    return rates


def apply_cost_model(
    rows: list[dict[str, Any]],
    calibration: list[dict[str, Any]],
    param_bytes: int,
    kv_entry: int,
    loop: list[dict[str, Any]] | None = None,
) -> tuple[
    tuple[float, float, float], dict[str, dict[str, float]], dict[int, float], dict[tuple[int, int], float]
]:
    """Add ``weight_MB_per_token``, ``kv_MB_per_token``, ``model_ratio`` (the cost model's tokens/s ratio vs
    the :data:`MODEL_BASE` plain arm) and ``model_vs_measured`` (its ratio to the measured one vs the same
    arm) to every row.

    A self-draft arm's forwards cost the loop's own per-forward time (:func:`loop_forward_cost`, per batch
    size, from ``loop``) instead of the plain arms' ``c``; without ``loop`` they cost ``c``. A Vegas row's
    verifies (``_verifies``) also cost the selection's measured time at its setting (a calibration's
    ``selection_seconds``, when present), and every row's drafts the runs of their selections (``_runs``)
    at the setting's ``run_seconds``. Bytes cost the setting's own read rate (:func:`byte_rates`), the fitted
    ``bw`` where it has none.

    Returns the fitted ``(c, bw, p)``, per system at the largest setting the modelled shares of its time
    (``forward``, ``bytes``, ``pairs``, ``selection``), the loop's seconds per forward by batch size, and the
    byte rate per setting."""
    c, bw, p = fit_cost_model(rows, calibration, param_bytes, kv_entry)
    rate = byte_rates(calibration, p, kv_entry, bw)
    c_loop = {x["batch"]: loop_forward_cost(x, (c, bw, p), param_bytes, kv_entry) for x in loop or []}
    plain = {(r["context"], r["batch"]): r for r in rows if r["system"] == MODEL_BASE}
    select = {(x["context"], x["batch"]): x.get("selection_seconds", 0.0) for x in calibration}
    per_run = {(x["context"], x["batch"]): x.get("run_seconds", 0.0) for x in calibration}

    def terms(r: dict[str, Any]) -> tuple[float, float, float, float, float]:
        f, nbytes, pairs = cost_terms(r, param_bytes, kv_entry)
        per_forward = c if r["system"] in PLAIN_ARMS else c_loop.get(r["batch"], c)
        vegas = r.get("_arm") == "vegas"
        setting = (r["context"], r["batch"])
        selection = r.get("_verifies", 0) * select.get(setting, 0.0) if vegas else 0.0
        scatter = r.get("_runs", 0.0) * per_run.get(setting, 0.0)
        return f * per_forward, nbytes / rate.get(setting, bw), pairs * p, selection, scatter

    top = max((r["context"], r["batch"]) for r in rows)
    shares = {}
    for r in rows:
        ref = plain[(r["context"], r["batch"])]
        w, kv = step_bytes(r, param_bytes, kv_entry)
        emitted = r["batch"] * r["new"]
        r["weight_MB_per_token"] = w / emitted / 1e6
        r["kv_MB_per_token"] = kv / emitted / 1e6
        r["model_ratio"] = sum(terms(ref)) / sum(terms(r))
        measured = r["tokens_per_s"] / ref["tokens_per_s"]
        r["model_vs_measured"] = r["model_ratio"] / measured
        if (r["context"], r["batch"]) == top:
            t = terms(r)
            shares[r["system"]] = {k: v / sum(t) for k, v in zip(SHARES, t)}
    return (c, bw, p), shares, c_loop, rate


def h200_projection(
    rows: list[dict[str, Any]], config: Any, params: int, context: int, batch: int
) -> list[dict[str, Any]]:
    """Modelled speedup of each self-draft over plain decoding on an H200 at ``context`` x ``batch``, bf16.

    Per forward ``H200_FORWARD_S`` + bytes / ``H200_BW``, bytes = bf16 weights + every row's KV reads. Each
    arm keeps alpha, tau and drafts per iteration from its largest measured setting; a draft reads its
    budget at ``context`` (plus the sink for sink+window) and the tail, a verify reads the whole cache.
    """
    from hf_ext.vegas.config import VegasConfig
    from hf_ext.vegas.core import budget

    cfg = VegasConfig(fallback=False)
    kv = entry_bytes(config, BF16) * config.num_hidden_layers
    w = BF16 * params

    def fwd(entries: float) -> float:
        return H200_FORWARD_S + (w + batch * entries * kv) / H200_BW

    largest: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r["system"] in SELECTORS:
            cur = largest.setdefault(r["system"], r)
            if (r["context"], r["batch"]) > (cur["context"], cur["batch"]):
                largest[r["system"]] = r
    k = budget(context, context, cfg.sparse_ratio, cfg.min_tokens, context)
    out = []
    for arm, r in largest.items():
        g, tau = r["_drafts_per_iteration"], r["tau"]
        read = {"full-kv oracle": context, "sink+window": cfg.sink_tokens + k}.get(arm, k) + (g + 1) / 2
        iteration = g * fwd(read) + fwd(context + g)
        out.append(
            {
                "system": arm,
                "context": context,
                "batch": batch,
                "alpha": r["alpha"],
                "tau": tau,
                "h200_speedup": fwd(context) / (iteration / tau),
                "h200_speedup_if_all_accepted": fwd(context) / ((g * fwd(read) + fwd(context + g)) / (g + 1)),
            }
        )
    return out


def h200_plain_shares(config: Any, params: int, context: int, batch: int) -> dict[str, float]:
    """Shares of one plain H200 decode step: weights, KV reads and the fixed per-forward time."""
    kv = batch * context * entry_bytes(config, BF16) * config.num_hidden_layers / H200_BW
    w = BF16 * params / H200_BW
    total = kv + w + H200_FORWARD_S
    return {"kv": kv / total, "weights": w / total, "fixed": H200_FORWARD_S / total}


# ---------------------------------------------------------------------------------------------- report
def _verdicts(rows: list[dict[str, Any]]) -> list[str]:
    every = [r for r in rows if "_arm" in r]  # self-draft rows, the gamma sweep's included
    same = [r for r in every if r["identical"] is True]
    notes = [
        verdict(
            "every self-draft arm token-identical to plain greedy",
            len(same) == len(every),
            f"{len(same)}/{len(every)} runs identical",
        )
    ]
    drafts = [r for r in every if r["system"] in SELECTORS]
    settings = sorted({(r["context"], r["batch"]) for r in drafts})
    for n, b in settings:
        grp = {r["system"]: r for r in drafts if (r["context"], r["batch"]) == (n, b)}
        if "vegas" not in grp:
            continue
        v = grp["vegas"]
        rivals = {k: grp[k]["alpha"] for k in ("sink+window", "quest") if k in grp}
        if rivals:
            notes.append(
                verdict(
                    f"N={n} batch {b}: Vegas alpha >= " + " and ".join(rivals).replace("quest", "Quest"),
                    all(v["alpha"] >= a for a in rivals.values()),
                    f"{v['alpha']:.3f} vs " + ", ".join(f"{k} {a:.3f}" for k, a in rivals.items()),
                )
            )
    top = max((s for s in settings if s[1] == max(b for _, b in settings)), default=None)
    if top is not None:
        at_top = {r["system"]: r for r in rows if (r["context"], r["batch"]) == top}
        top_v = at_top.get("vegas")
        if top_v is not None:
            others = [at_top[k]["tokens_per_s_ratio"] for k in ("sink+window", "quest") if k in at_top]
            notes.append(
                verdict(
                    f"N={top[0]} batch {top[1]}: {VS_PLAIN[0]}",
                    top_v["tokens_per_s_ratio"] >= VS_PLAIN[1],
                    f"{top_v['tokens_per_s_ratio']:.2f}x",
                )
            )
            if others:
                notes.append(
                    verdict(
                        f"N={top[0]} batch {top[1]}: {VS_RIVAL[0]}",
                        top_v["tokens_per_s_ratio"] >= VS_RIVAL[1] * max(others),
                        f"{top_v['tokens_per_s_ratio'] / max(others):.2f}x",
                    )
                )
    return notes + _tuned_verdicts(every) + _paired_verdicts(rows)


def _acceptance_verdicts(acceptance: dict[int, dict[str, Any]], gamma: int) -> list[str]:
    """Lossless and the acceptance target from :func:`acceptance_pass`, per context, with the bootstrap
    interval (:func:`paired_alpha_interval`) of Vegas's alpha less each rival's, and the acceptance by draft
    position."""
    if not acceptance:
        return []
    same = [ok for counts in acceptance.values() for ok in counts["identical"]]
    notes = [
        verdict(
            "acceptance pass: every self-draft run token-identical to plain greedy",
            all(same),
            f"{sum(same)}/{len(same)} runs identical",
        )
    ]
    rivals = [arm for arm in SPARSE if arm != "vegas"]
    for n, counts in sorted(acceptance.items()):
        per = counts["alpha"]
        alpha = {arm: sum(a for a, _ in per[arm]) / sum(d for _, d in per[arm]) for arm in SPARSE}
        gaps = {arm: paired_alpha_interval(per["vegas"], per[arm]) for arm in rivals}
        values = ", ".join(f"{arm} {alpha[arm]:.3f}" for arm in rivals)
        intervals = "; ".join(
            f"Vegas - {arm} {d:+.3f}, 95% bootstrap interval over the prompts {lo:+.3f} to {hi:+.3f}"
            for arm, (d, lo, hi) in gaps.items()
        )
        notes.append(
            verdict(
                f"N={n}, {len(per['vegas'])} prompts each decoded alone (gamma {gamma}): Vegas alpha >= "
                + " and ".join(rivals).replace("quest", "Quest"),
                all(alpha["vegas"] >= alpha[arm] for arm in rivals),
                f"{alpha['vegas']:.3f} vs {values}; {intervals}",
            )
        )
        notes.append(
            f"N={n}, acceptance by draft position 1..{gamma} (accepted / reached: a position is reached when "
            "the tokens before it were accepted): "
            + "; ".join(
                f"{arm} "
                + " / ".join(f"{a / max(m, 1):.3f}" for a, m in counts["by_position"][arm])
                + f" (reached {counts['by_position'][arm][0][1]} to {counts['by_position'][arm][-1][1]})"
                for arm in SPARSE
            )
        )
    return notes


def _fastest_per_arm(rows: list[dict[str, Any]], setting: tuple[int, int]) -> dict[str, dict[str, Any]]:
    """Per sparse arm, its fastest row (over every gamma run) at the ``(context, batch)`` setting."""
    best: dict[str, dict[str, Any]] = {}
    for r in rows:
        if (r["context"], r["batch"]) == setting and r.get("_arm") in SPARSE:
            if r["_arm"] not in best or r["tokens_per_s"] > best[r["_arm"]]["tokens_per_s"]:
                best[r["_arm"]] = r
    return best


def _tuned_verdicts(drafts: list[dict[str, Any]]) -> list[str]:
    """The speed targets with every sparse arm at its fastest gamma (default and sweep), where a sweep ran."""
    swept = [r for r in drafts if r["system"] not in SELECTORS]
    if not swept:
        return []
    at = (swept[0]["context"], swept[0]["batch"])
    best = _fastest_per_arm(drafts, at)
    if "vegas" not in best:
        return []
    v = best.pop("vegas")
    where = f"N={at[0]} batch {at[1]}, each sparse arm at its fastest gamma"
    notes = [
        verdict(
            f"{where}: {VS_PLAIN[0]}",
            v["tokens_per_s_ratio"] >= VS_PLAIN[1],
            f"{v['tokens_per_s_ratio']:.2f}x at gamma {v['gamma']}",
        )
    ]
    if best:
        rival = max(best.values(), key=lambda r: r["tokens_per_s"])
        notes.append(
            verdict(
                f"{where}: {VS_RIVAL[0]}",
                v["tokens_per_s"] >= VS_RIVAL[1] * rival["tokens_per_s"],
                f"{v['tokens_per_s'] / rival['tokens_per_s']:.2f}x {rival['_arm']} at gamma {rival['gamma']}",
            )
        )
    return notes


def _paired_verdicts(rows: list[dict[str, Any]]) -> list[str]:
    """The speed targets from the paired rounds (:func:`paired_rounds`), where they ran: the median over
    rounds of each baseline's time over Vegas's in the same round, with the smallest and largest."""
    row = next((r for r in rows if "_paired" in r), None)
    if row is None:
        return []
    p = row["_paired"]
    where = (
        f"N={row['context']} batch {row['batch']}, median of {p['rounds']} paired rounds ({p['vegas']} vs "
        f"{p['plain']} and {p['rival']})"
    )
    return [
        verdict(
            f"{where}: {name}",
            p[key]["median"] >= least,
            f"{p[key]['median']:.2f}x; rounds {p[key]['min']:.2f}-{p[key]['max']:.2f}x",
        )
        for key, (name, least) in (("vs_plain", VS_PLAIN), ("vs_rival", VS_RIVAL))
    ]


def _report(
    rows: list[dict[str, Any]],
    calibration: list[dict[str, Any]],
    loop: list[dict[str, Any]],
    mass: dict[str, dict[str, float]],
    recipe: dict[str, Any],
    config: dict[str, Any],
    lm_config: Any,
) -> BenchReport:
    params = int(recipe.get("parameters", 0)) or _params(lm_config)
    (c, bw, p_pair), model_shares, c_loop, rates = apply_cost_model(
        rows, calibration, 4 * params, entry_bytes(lm_config, 4), loop
    )
    top = max((r["context"], r["batch"]) for r in rows)
    plain_top = next(r for r in rows if (r["context"], r["batch"]) == top and r["system"] == MODEL_BASE)
    cal_top = next(x for x in calibration if (x["context"], x["batch"]) == top)
    plain_step = top[1] * plain_top["new"] / plain_top["tokens_per_s"] / plain_top["forwards"]
    chunk_cost = cal_top["seconds"] / plain_step
    proj = h200_projection(rows, lm_config, params, 32768, 128)
    shares = h200_plain_shares(lm_config, params, 32768, 128)
    for r in rows:
        p = next((x for x in proj if x["system"] == r["system"]), None)
        if p is not None and (r["context"], r["batch"]) == top:
            r["h200_32k_b128"] = p["h200_speedup"]
    bits = recipe.get("held_out_bits_per_byte", float("nan"))
    far = recipe.get("induction_far", {}).get("ratio", float("nan"))
    notes = [
        f"torch threads pinned to {THREADS}; CPU wall-clock on a shared 2-core host; decode only (one shared "
        "prefill per context). Real: the trained byte model and held-out standard-library text.",
        f"model: vegas-byte-llama, {params / 1e6:.2f} M parameters, {lm_config.num_hidden_layers} global "
        f"layers, held-out {bits:.2f} bits/byte; induction check (repeat after 3000 bytes vs first "
        f"occurrence): loss ratio {far:.2f}.",
        *_verdicts(rows),
        *_acceptance_verdicts(config.get("acceptance", {}), config["gamma"]),
        *(
            [
                f"attention mass the next draft keeps at N={min(config['contexts'])} x batch "
                f"{config['mass_rows']} (mean over layers, heads, rows and {config['gamma']} draft steps; "
                "worst head in brackets), same budget: "
                + "; ".join(f"{k} {v['mean']:.3f} ({v['worst_head']:.2f})" for k, v in mass.items())
            ]
            if mass
            else []
        ),
        f"cost model, fitted on the plain arms and {len(calibration)} timings of the verify's attention "
        f"alone (never on a self-draft arm): {1e3 * c:.2f} ms per forward + bytes / {bw / 1e9:.2f} GB/s + "
        f"{1e12 * p_pair:.0f} ps per query-head x cache-position pair (weights once per forward; KV per "
        "entry attended; the selection's key re-reads and page bounds), bytes priced at each setting's own "
        "read rate instead (a one-row pass of the kernel over its cache, less its arithmetic: "
        + ", ".join(f"{v / 1e9:.1f} GB/s at N={n} x batch {b}" for (n, b), v in sorted(rates.items()))
        + "); a self-draft forward costs "
        f"the loop's own fixed time instead, timed at a {LOOP_CONTEXT}-token context (full-cache drafts) "
        "less its bytes and arithmetic: "
        + ", ".join(f"{1e3 * v:.2f} ms at batch {b}" for b, v in sorted(c_loop.items()))
        + "; a Vegas verify also costs its selection (importance and top-k from the score rows, every "
        f"layer), timed alone per setting: {1e3 * cal_top['selection_seconds']:.1f} ms at N={top[0]} x "
        f"batch {top[1]}; a draft's selection costs per contiguous run it reads through its slot list, timed "
        f"alone per setting (random slots against one run): {1e9 * cal_top['run_seconds']:.0f} ns at "
        f"N={top[0]} x batch {top[1]}"
        + f"; `model_ratio` = its predicted tokens/s ratio vs {MODEL_BASE}, `model_vs_measured` = "
        "prediction / measurement (1 = exact; target within 0.7-1.3).",
        f"calibration at N={top[0]} x batch {top[1]}: the verify's attention alone ({config['gamma'] + 1} "
        f"query rows, chunk_attention over every layer) takes {chunk_cost:.2f}x a whole plain decode step "
        "with the same kernel.",
        f"cost model shares at N={top[0]} x batch {top[1]} (per forward / bytes / query-key arithmetic / "
        "selection / scattered reads): "
        + "; ".join(
            f"{k} " + "/".join(f"{100 * v[t]:.0f}" for t in SHARES) + "%" for k, v in model_shares.items()
        ),
        "H200 projection (model, not a measurement) at 32k x batch 128, bf16: per forward "
        f"{H200_FORWARD_S * 1e6:.0f} us + bytes / {H200_BW / 1e12:.1f} TB/s; a plain step is "
        f"{100 * shares['kv']:.1f}% KV reads, {100 * shares['weights']:.2f}% weights, "
        f"{100 * shares['fixed']:.1f}% fixed time; per arm (measured alpha/tau kept): "
        + "; ".join(f"{p['system']} {p['h200_speedup']:.2f}x" for p in proj),
    ]
    if config["quick"]:
        notes.append(_quick_note(rows, top))
    paired = next((r["_paired"] for r in rows if "_paired" in r), None)
    if paired is not None:
        config = {**config, "paired": paired}
    head = headline(rows, top)
    clean = [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]
    for r in clean:
        r.pop("new", None)
    settings = [{"context": n, "batch": b} for n in config["contexts"] for b in config["batches"]]
    return BenchReport(
        rows=clean,
        headline=head,
        config=config,
        notes=notes,
        what=_what(config, top),
        settings=settings,
    )


def _quick_note(rows: list[dict[str, Any]], top: tuple[int, int]) -> str:
    """What limits Vegas in the quick run's one setting: its forwards and their times against a plain step."""
    at = [r for r in rows if (r["context"], r["batch"]) == top]
    plain = max((r for r in at if r["system"] in PLAIN_ARMS), key=lambda r: r["tokens_per_s"])
    v = _fastest_per_arm(at, top)["vegas"]
    step = 1e3 * plain["batch"] / plain["tokens_per_s"]
    return (
        f"--quick: the smallest setting of the full grid, Vegas and the plain arms only. Vegas read "
        f"{v['kv_MB_per_token']:.1f} MB of KV per token against {plain['kv_MB_per_token']:.1f} MB, with "
        f"{v['forwards'] / plain['forwards']:.2f}x the forwards (tau {v['tau']:.2f}): a draft forward took "
        f"{v['_draft_ms']:.2f} ms and a verify {v['_verify_ms']:.2f} ms against {step:.2f} ms per step of "
        f"{plain['system']}; it gains where the reads it skips outweigh those forwards. With one setting the "
        "cost model is fitted on two timings for three terms: its figures here are not the full run's."
    )


def _what(config: dict[str, Any], top: tuple[int, int]) -> str:
    """The tour's "what ran": the settings, new tokens and arms of the run."""
    if not config["quick"]:
        return (
            f"trained byte Llama, N={top[0]} x batch {top[1]}: Vegas at its fastest gamma vs plain greedy "
            "and the other sparse self-drafts at every gamma run"
        )
    arms = ", ".join(config["arms"])
    full = f"{'/'.join(f'{n // 1024}k' for n in FULL.contexts)} x {'/'.join(map(str, FULL.batches))}"
    return (
        f"byte Llama, N={top[0]} x batch {top[1]}, {config['new']} new tokens: {arms} vs plain greedy "
        f"(full: {full}, every arm)"
    )


def headline(rows: list[dict[str, Any]], setting: tuple[int, int]) -> Headline:
    """Vegas at its fastest gamma against every baseline row of the ``(context, batch)`` setting: the plain
    arms and each other sparse arm at every gamma run (the oracle, alpha = 1 by construction, is left out)."""
    pool = [r for r in rows if (r["context"], r["batch"]) == setting and r["system"] != "full-kv oracle"]
    fastest = _fastest_per_arm(pool, setting)["vegas"]
    return Headline.from_rows(pool, "tokens_per_s", higher_is_better=True, method_system=fastest["system"])


def _params(config: Any) -> int:
    from transformers import LlamaForCausalLM

    with torch.device("meta"):
        return sum(p.numel() for p in LlamaForCausalLM(config).parameters())


def _run(contexts: tuple[int, ...], batches: tuple[int, ...], arms: tuple[str, ...], new: int, gamma: int,
         quick: bool, device: str = "cpu", sweep: tuple[int, ...] = (),
         acceptance: int = 0) -> BenchReport:  # fmt: skip
    from benchmarks.vegas.attention_mass import attention_mass
    from benchmarks.vegas.lm import byte_llama

    with pinned_threads(THREADS):
        paired = 0 if quick else PAIRED_ROUNDS
        rows, calibration, loop, recipe, accepted = _grid(
            contexts, batches, arms, new, gamma, REPEATS, device, sweep, paired, acceptance
        )
        lm = byte_llama()[0].to(device)
        mass_rows = min(8, max(batches))
        mass = {} if quick else attention_mass(lm, prompts(min(contexts), mass_rows).to(device))
    for r in rows:
        r["new"] = new
    cfg = {"contexts": contexts, "batches": batches, "arms": arms, "new": new, "gamma": gamma, "quick": quick,
           "mass_rows": mass_rows, "gamma_sweep": sweep, "acceptance": accepted}  # fmt: skip
    return _report(rows, calibration, loop, mass, recipe, cfg, lm.config)


def grid() -> list[dict[str, Any]]:
    """The full run's settings: every context x batch of :data:`FULL` (each at gamma :data:`GAMMA`)."""
    return [{"context": n, "batch": b} for n in FULL.contexts for b in FULL.batches]


def run(*, quick: bool = False, seed: int = 0, model: str | None = None) -> BenchReport:
    """Run the benchmark (module docstring). Full (:data:`FULL`): N in {4096, 16384, 32768} x batch {1, 8},
    every arm, 32 new tokens at the paper's gamma 6, then the sparse arms at gamma in :data:`GAMMA_SWEEP` at
    32768 x 8, and per context the :func:`acceptance_pass` over :data:`ACCEPTANCE_PROMPTS` prompts, every
    system decoded :data:`REPEATS` times; quick (:data:`QUICK`): the smallest setting of that grid, Vegas and
    the plain arms only. ``seed`` is unused: greedy decoding of fixed prompts is deterministic.

    ``model="gemma-3-270m"`` (``hf-ext bench vegas --model gemma-3-270m``) runs the Gemma-3-270M benchmark of
    :mod:`benchmarks.vegas.gemma` instead (quick: its 4096 x 1 setting, every arm).

    Raises:
        ValueError: ``model`` names another model.
    """
    if model is not None:
        from benchmarks.vegas import gemma

        if model != gemma.MODEL:
            raise ValueError(f"`model` must be {gemma.MODEL!r} (or None for the byte model), got {model!r}.")
        return gemma.run_gemma(gemma.SETTINGS[:1] if quick else gemma.SETTINGS)
    size = QUICK if quick else FULL
    return _run(size.contexts, size.batches, size.arms, size.new, GAMMA, quick, sweep=size.sweep,
                acceptance=size.acceptance)  # fmt: skip


def paper_regime(device: str = "cuda", context: int = 32768, batch: int = 64, new: int = 64) -> BenchReport:
    """The paper's regime on an accelerator: one long context at a large batch, plain vs the sparse drafts
    (fp32 weights, the Triton kernels through ``backend="auto"``). ``python -m benchmarks.vegas.bench
    --device cuda --context 32768 --batch 64`` runs it and prints the table."""
    return _run((context,), (batch,), SPARSE, new, GAMMA, False, device)


if __name__ == "__main__":
    import argparse

    from benchmarks.harness import format_table

    parser = argparse.ArgumentParser(description=paper_regime.__doc__)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--context", type=int, default=32768)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--new", type=int, default=64)
    args = parser.parse_args()
    report = paper_regime(args.device, args.context, args.batch, args.new)
    print(format_table(report.rows))
    print("\n".join(report.notes))
