"""``hf-ext bench scm_grpo``: does the gated depth reward bring graph depth to the target without costing
format or accuracy?

Layer 1 scores synthetic completions (valid, cyclic, dangling, untagged, wrong-label, padded) with each
reward: microseconds per completion, and the parser's depth against networkx's longest path on random DAGs.

Layer 2 is the mechanism demo, on each world of :data:`WORLDS` (a small 2-3 hop world and a 2-4 hop one). A
config-built 2-layer Llama (hidden 64) with a word-level tokenizer is SFT-trained on the synthetic multi-hop
world of :func:`hf_ext.scm_grpo.data.make_synthetic_mhfv`, on gold graphs padded with up to ``max_pad``
redundant evidence nodes, so its graphs start too deep by a varying amount; the loss on the verdict token is
weighted 10x (:func:`hf_ext.scm_grpo.warm_start.verdict_weighted_loss`), so the start beats chance on the
label and the correctness-gated depth reward has a signal. From that one checkpoint, stock
``trl.GRPOTrainer`` runs each arm on the same prompts, optimiser and budget, with a KL term (``beta``) back
to the checkpoint, which is also the reference model:

- ``sft_only``: the checkpoint (no RL);
- ``A_label_format``: ``r_acc + 0.5 r_fmt``;
- ``B_scm``: A + ``0.5 r_acc f(d)`` (SCM-GRPO's reward set);
- ``C_ungated``: A + ``0.5 f(d)`` without the correctness gate (reward-hacking control);
- ``D_length``: A + trl's ``get_soft_overlong_punishment`` (a generic conciseness baseline).

Held-out claims are decoded greedily and scored for format validity, mean ``|d - d*|``, label accuracy and
macro-F1, completion length and, for the ungated control, wrong labels among graphs at the target depth.
"""

from __future__ import annotations

import random
import resource
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from benchmarks.harness import BenchReport, Headline, Timer, mean_se, pinned_threads, seeded, verdict
from benchmarks.scm_grpo import world as W
from hf_ext.scm_grpo.data import gold_graph, make_synthetic_mhfv

MODEL = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2)
MAX_NEW = 56
ARMS = ("A_label_format", "B_scm", "C_ungated", "D_length")
WORLDS: dict[str, dict[str, Any]] = {  # smallest first; each world has its own SFT warm start
    "2-3 hops": dict(hops=[2, 3], n_entities=14, n_relations=4, n_distractors=2, max_pad=2),
    "2-4 hops": dict(hops=[2, 3, 4], n_entities=40, n_relations=8, n_distractors=3, max_pad=3),
}
SFT_BY_WORLD: dict[str, dict[str, Any]] = {  # the warm start: SFT with the verdict token's loss weighted up
    "2-3 hops": dict(lr=6e-3, verdict_weight=10.0),
    "2-4 hops": dict(lr=3e-3, verdict_weight=10.0),
}


@dataclass(frozen=True)
class Budget:
    """What one run spends on a world: items, SFT and GRPO steps (of ``claims_per_step`` claims x G), seeds
    and arms (never the world itself)."""

    sft_steps: int
    n_train: int
    n_test: int
    grpo_steps: int
    seeds: int
    arms: tuple[str, ...]
    claims_per_step: int = 8


FULL: dict[str, Budget] = {
    "2-3 hops": Budget(sft_steps=400, n_train=500, n_test=300, grpo_steps=20, seeds=2, arms=ARMS),
    "2-4 hops": Budget(sft_steps=3200, n_train=20_000, n_test=300, grpo_steps=40, seeds=2, arms=ARMS),
}
QUICK: dict[str, Budget] = {
    "2-3 hops": Budget(
        sft_steps=100, n_train=500, n_test=60, grpo_steps=2, seeds=1, arms=("A_label_format", "B_scm")
    ),
}
MICRO = {"full": (10_000, 1000), "quick": (500, 200)}  # layer 1: completions scored, random DAGs
GRPO: dict[str, Any] = dict(
    num_generations=8,
    learning_rate=5e-4,
    beta=0.1,  # KL back to the warm start (the reference model): without it GRPO gives the verdict back
    loss_type="dapo",
    scale_rewards="group",
    temperature=1.0,
)
SFT_BATCH = 32
BASELINES = {"sft_only", "A_label_format", "D_length"}
FIGURES = ("format_valid", "depth_abs_err", "accuracy", "macro_f1", "tokens", "hack_rate")


class _Timed:
    """A reward function that adds its own wall time to ``seconds`` (same ``__name__`` for trl's logs)."""

    def __init__(self, reward: Any) -> None:
        self.reward, self.seconds = reward, 0.0
        self.__name__ = getattr(reward, "__name__", type(reward).__name__)

    def __call__(self, **kwargs: Any) -> list[float]:
        with Timer() as t:
            out = self.reward(**kwargs)
        self.seconds += t.seconds
        return list(out)


def _rewards(arm: str) -> tuple[list[Any], list[float]]:
    from trl.rewards import get_soft_overlong_punishment

    from hf_ext.scm_grpo.rewards import SCMDepthReward, SCMGraphFormatReward, SCMLabelReward

    funcs: list[Any] = [SCMLabelReward(), SCMGraphFormatReward()]
    if arm == "B_scm":
        funcs.append(SCMDepthReward())
    elif arm == "C_ungated":
        funcs.append(SCMDepthReward(gate_on_correct=False, name="scm_depth_ungated"))
    elif arm == "D_length":
        funcs.append(get_soft_overlong_punishment(MAX_NEW, MAX_NEW // 2))
    return funcs, [1.0, 0.5, 0.5][: len(funcs)]


@contextmanager
def _quiet() -> Iterator[None]:
    import datasets

    was_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        if was_enabled:
            datasets.enable_progress_bars()


def _grpo(arm: str, start: str, tok: Any, rows: list[dict[str, Any]], budget: Budget, seed: int) -> tuple:
    """One GRPO arm from the SFT checkpoint saved at ``start`` (also the KL reference): the policy, seconds
    per step and the reward share."""
    from datasets import Dataset
    from transformers import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    data = [{"prompt": W.prompt_text(r), "label": r["label"], "num_hops": r["num_hops"]} for r in rows]
    funcs, weights = _rewards(arm)
    timed: list[Any] = [_Timed(f) for f in funcs]
    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(
            output_dir=out,
            max_steps=budget.grpo_steps,
            per_device_train_batch_size=budget.claims_per_step * GRPO["num_generations"],
            max_completion_length=MAX_NEW,
            reward_weights=weights,
            seed=seed,
            data_seed=seed,
            use_cpu=True,
            bf16=False,
            report_to=[],
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
            dataloader_num_workers=0,
            **GRPO,
        )
        trainer = GRPOTrainer(
            start, reward_funcs=timed, args=args, train_dataset=Dataset.from_list(data), processing_class=tok
        )
        trainer.remove_callback(PrinterCallback)
        with Timer() as t:
            trainer.train()
    return trainer.model, t.seconds / budget.grpo_steps, sum(f.seconds for f in timed) / t.seconds


def _row(system: str, evals: list[dict[str, Any]], costs: list[tuple[float, float]]) -> dict[str, Any]:
    row: dict[str, Any] = {"system": system, "is_baseline": system in BASELINES}
    for fig in FIGURES:
        row[fig], row[f"{fig}_se"], _ = mean_se(e[fig] for e in evals)
    for hop in (2, 3, 4):
        row[f"depth_abs_err_h{hop}"] = mean_se(e.get(f"depth_abs_err_h{hop}", float("nan")) for e in evals)[0]
    row["s_per_step"] = mean_se(c[0] for c in costs)[0] if costs else float("nan")
    row["reward_share"] = mean_se(c[1] for c in costs)[0] if costs else float("nan")
    return row


def world_rows(world: str, seed: int, n: int) -> list[dict[str, Any]]:
    """``n`` rows of the synthetic world named ``world`` (a key of :data:`WORLDS`)."""
    spec = WORLDS[world]
    return make_synthetic_mhfv(seed, n, **{**spec, "hops": tuple(spec["hops"])})


def microbench(n: int, n_dags: int, seed: int, *, world: str = "2-4 hops") -> dict[str, Any]:
    """Layer 1: microseconds per completion of each reward on ``world``, and depth agreement with networkx."""
    import networkx as nx

    from hf_ext.scm_grpo.core import parse_scm_graph
    from hf_ext.scm_grpo.rewards import (
        SCMCombinedReward,
        SCMDepthReward,
        SCMGraphFormatReward,
        SCMLabelReward,
    )

    rows = world_rows(world, seed, n)
    completions = [mutate(r, i) for i, r in enumerate(rows)]
    columns: dict[str, Any] = {"label": [r["label"] for r in rows], "num_hops": [r["num_hops"] for r in rows]}
    out: dict[str, Any] = {"n": n}
    for reward in (SCMLabelReward(), SCMGraphFormatReward(), SCMDepthReward(), SCMCombinedReward()):
        with Timer() as t:
            reward(completions=completions, **columns)
        out[f"us_{reward.__name__}"] = 1e6 * t.seconds / n
    rng = random.Random(seed)
    agree = 0
    for _ in range(n_dags):
        text, edges, k = random_dag(rng)
        graph = nx.DiGraph(edges)
        ref = nx.dag_longest_path_length(graph.subgraph(nx.ancestors(graph, "C") | {"C"}))
        agree += parse_scm_graph(text).depth == ref
    out["depth_agreement"] = agree / n_dags
    out["n_dags"] = n_dags
    return out


KINDS = ("valid", "cyclic", "dangling", "untagged", "wrong_label", "valid")


def mutate(row: dict[str, Any], i: int) -> str:
    """The gold completion of ``row``, broken one way by ``i`` (see :data:`KINDS`)."""
    text = row["graph"]
    kind = KINDS[i % len(KINDS)]
    if kind == "cyclic":
        return text.replace("</graph>", "C -> E1\n</graph>")
    if kind == "dangling":
        return text.replace("</graph>", "E9 -> C\n</graph>")
    if kind == "untagged":
        return text.replace("<graph>", "").replace("</graph>", "")
    if kind == "wrong_label":
        other = "NOT_SUPPORTED" if row["label"] == "SUPPORTED" else "SUPPORTED"
        return gold_graph(row["chain"], row["claim"], other)
    return text


def random_dag(rng: random.Random, max_nodes: int = 8) -> tuple[str, list[tuple[str, str]], int]:
    """A random DAG over ``E1..Ek`` and ``C`` in the output contract, its edges and ``k``."""
    k = rng.randint(1, max_nodes)
    order = [f"E{i}" for i in range(1, k + 1)] + ["C"]
    rng.shuffle(order)
    order.remove("C")
    order.append("C")  # C last: every edge goes forward in this order, so the graph is a DAG into C
    edges = [(a, b) for i, a in enumerate(order) for b in order[i + 1 :] if rng.random() < 0.35]
    edges.append((rng.choice(order[:-1]), "C"))
    edges = list(dict.fromkeys(edges))
    nodes = [f"E{i}: fact {i}" for i in range(1, k + 1)] + ["C: claim"]
    body = "\n".join([*nodes, *(f"{a} -> {b}" for a, b in edges)])
    return f"<graph>\n{body}\n</graph>\n<answer>SUPPORTED</answer>", edges, k


def grid() -> list[dict[str, Any]]:
    """The settings of the full run: each synthetic world (hops, entities, relations, distractors, padding)
    with its model; arms, seeds, steps and items are not settings."""
    return [_setting(world) for world in FULL]


def _setting(world: str) -> dict[str, Any]:
    return {"world": world, **WORLDS[world], "model": "llama 2 layers x 64"}


def run(*, quick: bool = False, seed: int = 0) -> BenchReport:
    """Layer 1 and layer 2 (see the module docstring) on every world of the grid, 2 seeds, 4 arms.

    ``quick``: the smallest world only, a shorter warm start (100 SFT steps), A vs B, one seed, 2 GRPO steps,
    60 test claims.
    """
    plan = QUICK if quick else FULL
    rows: list[dict[str, Any]] = []
    worlds: dict[str, dict[str, Any]] = {}
    with Timer() as total, _quiet(), pinned_threads(1):
        micro = microbench(*MICRO["quick" if quick else "full"], seed, world=list(plan)[-1])
        for world, budget in plan.items():
            world_out, evals, costs = _layer2(world, budget, seed)
            rows += [{"world": world, **_row(name, evals[name], costs[name])} for name in evals]
            worlds[world] = {**world_out, "depth_bins": _depth_bins(evals)}
    main = list(plan)[-1]  # the largest world run carries the headline
    headline = Headline.from_rows(
        rows, "depth_abs_err", higher_is_better=False, method_system="B_scm", where={"world": main}
    )
    config = {
        "plan": {w: {**vars(b), "arms": list(b.arms)} for w, b in plan.items()},
        "model": {**MODEL, "num_hidden_layers": 2},
        "grpo": GRPO,
        "max_completion_length": MAX_NEW,
        "microbench": micro,
        "worlds": worlds,
        "headline_world": main,
        "total_s": total.seconds,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    what = "; ".join(
        f"{w} world, {len(b.arms)} arms, {b.seeds} seed{'s' * (b.seeds > 1)}, {b.grpo_steps} GRPO steps"
        for w, b in plan.items()
    )
    if quick:
        what += f" (full: {len(FULL)} worlds, {len(ARMS)} arms, {FULL[main].seeds} seeds)"
    notes = _notes(rows, config, quick)
    settings = [_setting(world) for world in plan]
    return BenchReport(rows=rows, headline=headline, config=config, what=what, notes=notes, settings=settings)


def _layer2(world: str, budget: Budget, seed: int) -> tuple[dict[str, Any], dict, dict]:
    """SFT warm start on ``world``, then every arm of ``budget`` on each seed; evaluations and costs."""
    from hf_ext.testing import tiny_llama, word_tokenizer

    spec, sft = WORLDS[world], SFT_BY_WORLD[world]
    tok = word_tokenizer(W.vocabulary(spec["n_entities"], spec["n_relations"]))
    train = world_rows(world, seed, budget.n_train)
    test = world_rows(world, seed + 10_000, budget.n_test)
    with seeded(seed):
        start = tiny_llama(seed, vocab_size=len(tok), max_position_embeddings=128, **MODEL)
        with Timer() as sft_timer:
            losses = W.sft(start, tok, train, steps=budget.sft_steps, **sft, batch=SFT_BATCH, seed=seed)
    evals: dict[str, list[dict[str, Any]]] = {
        "sft_only": [W.evaluate(start, tok, test, max_new_tokens=MAX_NEW)]
    }
    costs: dict[str, list[tuple[float, float]]] = {"sft_only": []}
    with tempfile.TemporaryDirectory() as checkpoint:
        start.save_pretrained(checkpoint)  # every arm loads its policy and its KL reference from here
        for s in range(seed, seed + budget.seeds):
            for arm in budget.arms:
                with seeded(s):
                    policy, step_s, share = _grpo(arm, checkpoint, tok, train, budget, s)
                evals.setdefault(arm, []).append(W.evaluate(policy, tok, test, max_new_tokens=MAX_NEW))
                costs.setdefault(arm, []).append((step_s, share))
    out = {
        "vocab_size": len(tok),
        "sft": {**sft, "steps": budget.sft_steps, "batch": SFT_BATCH, "final_loss": losses[-1]},
        "sft_seconds": sft_timer.seconds,
    }
    return out, evals, costs


def _depth_bins(evals: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """Held-out accuracy by ``d - d*`` per system (first seed), the depth analysis of the paper."""
    out = {}
    for name, runs in evals.items():
        bins: dict[Any, list[bool]] = {}
        for d, t, ok in runs[0]["per_row"]:
            bins.setdefault("invalid" if d is None else d - t, []).append(ok)
        keys = sorted(k for k in bins if k != "invalid") + (["invalid"] if "invalid" in bins else [])
        out[name] = [
            {"rel_depth": k, "n": len(bins[k]), "accuracy": sum(bins[k]) / len(bins[k])} for k in keys
        ]
    return out


def _notes(rows: list[dict[str, Any]], config: dict[str, Any], quick: bool) -> list[str]:
    micro = config["microbench"]
    notes = [
        "All data synthetic (entity chains of 2-3 or 2-4 hops, claims composed along the chain, "
        "NOT_SUPPORTED = last hop corrupted); config-built 2-layer Llama; the output contract and reward "
        "terms are reconstructions from the paper's abstract, and the paper's inverted U (which needs a real "
        "instruction-following model and HoVer) is out of scope here.",
        f"Layer 1: {micro['n']} completions; us/completion: "
        + ", ".join(f"{k[3:]} {v:.1f}" for k, v in micro.items() if k.startswith("us_"))
        + f"; depth = networkx longest path on {micro['depth_agreement']:.1%} of {micro['n_dags']} "
        "random DAGs.",
    ]
    for world, out in config["worlds"].items():
        notes += _world_notes(world, [r for r in rows if r["world"] == world], out["sft_seconds"])
    notes.append(f"Run {config['total_s']:.0f} s, peak RSS {config['peak_rss_mb']:.0f} MB.")
    if quick:
        notes.append(
            "--quick: the smallest world of the full run, 100 of its 400 warm-start SFT steps, A vs B, one "
            "seed, 2 GRPO steps, 60 held-out claims; the full run adds the 2-4 hop world, arms C and D and a "
            "second seed."
        )
    return notes


def _world_notes(world: str, rows: list[dict[str, Any]], sft_s: float) -> list[str]:
    """The target lines of one world (``[world]`` first); NaN figures read as ``nan``, never raise."""
    by = {r["system"]: r for r in rows}
    a, b, sft = by["A_label_format"], by["B_scm"], by["sft_only"]
    cut_a = 1 - b["depth_abs_err"] / a["depth_abs_err"] if a["depth_abs_err"] else float("nan")
    cut_sft = 1 - b["depth_abs_err"] / sft["depth_abs_err"] if sft["depth_abs_err"] else float("nan")
    notes = [
        verdict(
            f"[{world}] B cuts mean |d - d*| by >= 40% vs A",
            cut_a >= 0.4,
            f"B {b['depth_abs_err']:.3f} +- {b['depth_abs_err_se']:.3f} vs A {a['depth_abs_err']:.3f} +- "
            f"{a['depth_abs_err_se']:.3f}: {cut_a:.0%}; vs the SFT start {sft['depth_abs_err']:.3f}: "
            f"{cut_sft:.0%}",
        ),
        verdict(f"[{world}] B format validity >= 90%", b["format_valid"] >= 0.9, f"{b['format_valid']:.1%}"),
        verdict(
            f"[{world}] B accuracy >= 0.6 and not below A's",
            b["accuracy"] >= max(0.6, a["accuracy"]),
            f"B {b['accuracy']:.3f} +- {b['accuracy_se']:.3f} vs A {a['accuracy']:.3f} +- "
            f"{a['accuracy_se']:.3f}; the warm start {sft['accuracy']:.3f}",
        ),
    ]
    if "C_ungated" in by:
        c = by["C_ungated"]
        notes.append(
            f"[{world}] Gate: wrong labels among valid graphs at the target depth, B {b['hack_rate']:.3f} vs "
            f"ungated C {c['hack_rate']:.3f} (accuracy {b['accuracy']:.3f} vs {c['accuracy']:.3f})."
        )
    notes.append(
        f"[{world}] Cost: B {b['s_per_step']:.3f} s per GRPO step ({b['reward_share']:.1%} in the "
        f"rewards) vs A {a['s_per_step']:.3f} s; one thread; SFT {sft_s:.0f} s."
    )
    return notes
