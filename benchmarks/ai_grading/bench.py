"""``hf-ext bench ai_grading``: graders side by side on synthetic calculus answers at several OCR noise rates.

Data: ``items`` synthetic questions (five families) answered by ``students`` simulated students with a
balanced mix of error types; the reference ("TA") score is the sympy rubric engine on the **clean** text.
OCR noise (:class:`~hf_ext.ai_grading.NoisyOCR`) corrupts the text at each setting. Graders:

- the LLM pipeline (:class:`~hf_ext.ai_grading.RubricGrader`) on Gemma-3-270M base (real weights; greedy,
  one run, one retry, compact schema with a JSON prefill), on a stratified subset: each call costs seconds;
  and the same pipeline on a tiny random Llama (a pipeline check, the LLM slot of ``--quick``);
- baselines: the trivial grader (always the mean reference score) and final-answer-only (full marks iff
  the noisy ``Answer`` line is equivalent to the reference answer);
- the symbolic reference: the same rubric engine on the **noisy** text, through the same pipeline (a
  reference, not a competitor: it knows the targets);
- a simulated LLM (the engine's JSON with each item moved by +-1 with probability 0.2 per run) through the
  real prompt -> text -> parser path, R = 1 or 3 runs aggregated by max or median: it exercises
  aggregation and spread-based deferral.
"""

from __future__ import annotations

import dataclasses
import math
import resource
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.ai_grading import graders as G
from benchmarks.harness import BenchReport, Headline, Timer, pinned_threads, progress, verdict
from hf_ext.ai_grading.backends import TransformersBackend
from hf_ext.ai_grading.core import aggregate_runs
from hf_ext.ai_grading.pipeline import GradeReport, RubricGrader
from hf_ext.ai_grading.report import EvaluationProtocol, ProtocolResult
from hf_ext.ai_grading.synthetic import NoisyOCR, SympyRubricBackend, SympyRubricEngine

NOISE = {"clean": (0.0, 0.0), "ocr 3%": (0.03, 0.05), "ocr 10%": (0.10, 0.05)}
LLM_NOISE = "ocr 3%"
LLM = "LLM pipeline"
GEMMA, TINY = "Gemma-3-270M base", "tiny random Llama"
# The full run's settings: each OCR noise rate, and the model in the LLM slot ("none": the LLM pipeline is not
# run there). The tiny random Llama is a pipeline check, small enough for --quick, where Gemma's seconds per
# call are not.
GRID = (
    {"noise": "clean", "llm": "none"},
    {"noise": LLM_NOISE, "llm": GEMMA},
    {"noise": LLM_NOISE, "llm": TINY},
    {"noise": "ocr 10%", "llm": "none"},
)
FULL: dict[str, Any] = {"items": 60, "students": 5, "llm_answers": 12, "bootstrap": 1000, "settings": GRID}
QUICK: dict[str, Any] = {
    "items": 15,
    "students": 2,
    "llm_answers": 3,
    "bootstrap": 200,
    "settings": (GRID[2],),
}
THREADS = 2


def llm_backend() -> Any:
    """The LLM under test; a stronger grader is this one line, e.g.
    ``OpenAICompatibleBackend("http://localhost:8000/v1", "Qwen2.5-7B-Instruct")``."""
    from hf_ext.assets import gemma3_270m

    return TransformersBackend(*gemma3_270m(), max_new_tokens=64)


def _tiny_backend() -> Any:
    from hf_ext.testing import tiny_llama, word_tokenizer

    tok = word_tokenizer()
    lm = tiny_llama(vocab_size=len(tok), max_position_embeddings=2048)  # the prompts run to ~400 tokens
    return TransformersBackend(lm, tok, max_new_tokens=8)


BACKENDS = {GEMMA: llm_backend, TINY: _tiny_backend}


def _subset(facts: list[dict[str, Any]], k: int) -> list[int]:
    """``k`` answer indices, round-robin over error types (families vary along the way)."""
    by_error: dict[str, list[int]] = {}
    for i, f in enumerate(facts):
        by_error.setdefault(f["error"], []).append(i)
    queues = [list(v) for _, v in sorted(by_error.items())]
    out: list[int] = []
    while len(out) < k and any(queues):
        for q in queues:
            if q and len(out) < k:
                out.append(q.pop(0))
    return sorted(out)


def _row(
    system: str, role: str, setting: str, reports: list[GradeReport], ref: np.ndarray, seconds: float
) -> dict:
    from hf_ext.metrics.functional.grading import grading_agreement

    scored = np.array([r.final is not None for r in reports])
    a = np.array([r.final if r.final is not None else np.nan for r in reports])
    m = np.array([r.max_points for r in reports])
    stats = {k: math.nan for k in ("qwk", "mae", "bias", "exact", "within_0.5")}
    if scored.any():
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            out = grading_agreement(a[scored], ref[scored], m[scored])
        stats = {k: float(out[k]) for k in stats}
    auto = [
        not r.deferred and abs(r.final - g) <= 0.5 + 1e-9 for r, g in zip(reports, ref) if r.final is not None
    ]
    return {
        "system": system,
        "is_baseline": role == "baseline",
        "role": role,
        "setting": setting,
        "n": len(reports),
        "scored": int(scored.sum()),
        **stats,
        "parse_fail": float(np.mean([bool(r.parse_errors) for r in reports])),
        "deferred": float(np.mean([r.deferred for r in reports])),
        "auto_within_0.5": float(sum(auto) / len(reports)),
        "s_per_answer": seconds / len(reports),
    }


def _with_final(reports: list[GradeReport], rule: str | None) -> list[GradeReport]:
    """Reports re-aggregated from their runs: ``None`` = the first run alone."""
    out = []
    for r in reports:
        if not r.runs:
            out.append(r)
            continue
        final = r.runs[0].total if rule is None else aggregate_runs(r.runs, rule=rule)[0]
        out.append(dataclasses.replace(r, final=final))
    return out


def _run(size: dict[str, Any], seed: int, quick: bool) -> BenchReport:
    rows: list[dict[str, Any]] = []
    extra: dict[str, Any] = {"llm": {}}
    with Timer() as total, pinned_threads(THREADS):
        sq, subs, facts = G.make_data(size["items"], size["students"], seed)
        ref = np.array([f["ref"] for f in facts])
        engine = SympyRubricEngine(sq)
        subset = _subset(facts, size["llm_answers"])
        noises = dict.fromkeys(s["noise"] for s in size["settings"])
        for setting in progress(noises, desc="ai_grading", unit="setting"):
            p_char, p_seg = NOISE[setting]
            ocr = G.ocr_texts(NoisyOCR(p_char, p_seg, seed), subs, sq.quiz)
            graders = _graders(engine, sq.quiz, subs, ocr, float(ref.mean()), seed)
            for name, (role, reps, sec) in graders.items():
                rows.append(_row(name, role, setting, reps, ref, sec))
            extra[setting] = _simulated_figures(graders["simulated LLM, R=3 max"][1], ref, facts)
            extra[setting]["final_only_bias"] = _bias_by_error(graders["final answer only"][1], ref, facts)
            llms = [s["llm"] for s in size["settings"] if s["noise"] == setting and s["llm"] != "none"]
            if llms:
                label = f"{setting}, LLM subset"
                for name, (role, reps, sec) in graders.items():
                    part = [reps[i] for i in subset]
                    rows.append(_row(name, role, label, part, ref[subset], sec / len(reps) * len(subset)))
            for model in llms:
                row, extra["llm"][model] = _llm(model, sq.quiz, subs, ocr, subset, facts, ref)
                rows.append(row)
            if setting == "ocr 10%":
                sym = graders["symbolic rubric engine"][1]
                extra["protocol"] = _protocol(sym, ref, facts, ocr, subs, sq, size["bootstrap"], seed)
    return _report(rows, extra, size, seed, quick, total.seconds)


def _graders(
    engine: SympyRubricEngine, quiz: Any, subs: list[Any], ocr: list[Any], mean_score: float, seed: int
) -> dict[str, tuple[str, list[GradeReport], float]]:
    """Every grader but the LLM on every answer of one noise setting: ``name -> (role, reports, seconds)``."""
    symbolic = RubricGrader(SympyRubricBackend(engine), n_runs=1, temperature=0.0)
    sym, sym_s = G.run_pipeline(symbolic, subs, ocr, quiz)
    final, final_s = G.final_only_reports(engine, quiz, ocr)
    trivial = G.constant_reports(mean_score, quiz, subs)
    judge = RubricGrader(G.NoisyJudge(engine, 0.2, seed), n_runs=3, aggregate="max")
    sim, sim_s = G.run_pipeline(judge, subs, ocr, quiz)
    return {
        "symbolic rubric engine": ("reference", sym, sym_s),
        "always the mean score": ("baseline", trivial, 0.0),
        "final answer only": ("baseline", final, final_s),
        "simulated LLM, R=1": ("simulated", _with_final(sim, None), sim_s / 3),
        "simulated LLM, R=3 max": ("simulated", sim, sim_s),
        "simulated LLM, R=3 median": ("simulated", _with_final(sim, "median"), sim_s),
    }


def _llm(
    model: str,
    quiz: Any,
    subs: list[Any],
    ocr: list[Any],
    subset: list[int],
    facts: list[dict[str, Any]],
    ref: np.ndarray,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The LLM pipeline with ``model`` on the answer indices ``subset``: its row and its call figures."""
    with Timer() as load:
        backend = BACKENDS[model]()
    llm = RubricGrader(backend, n_runs=1, temperature=0.0, max_retries=1, compact=True, prefill=True)
    reports, seconds = G.run_pipeline(llm, subs, ocr, quiz, subset)
    label = f"{LLM_NOISE}, LLM subset"
    calls = sum(r.n_calls for r in reports)
    figures = {
        "model": model,
        "load_s": load.seconds,
        "calls": calls,
        "s_per_call": seconds / max(1, calls),
        "parse_errors": [e for r in reports for e in r.parse_errors],
        "raw_example": reports[0].raw_texts[-1] if reports[0].raw_texts else "",
        "silent_zeros": sum(1 for r in reports if r.parse_errors and r.final == 0.0),
        "subset_errors": [facts[i]["error"] for i in subset],
    }
    return _row(f"{LLM} ({model})", "method", label, reports, ref[subset], seconds), figures


def _simulated_figures(
    sim: list[GradeReport], ref: np.ndarray, facts: list[dict[str, Any]]
) -> dict[str, float]:
    from hf_ext.metrics.functional.grading import deferral_curve

    single = np.array([r.runs[0].total for r in sim])
    agg = {rule: np.array([aggregate_runs(r.runs, rule=rule)[0] for r in sim]) for rule in ("max", "median")}
    spread = np.array([r.spread for r in sim])
    curve = deferral_curve(agg["max"], ref, spread, budgets=(0.2,))
    return {
        "bias_max_minus_single": float(agg["max"].mean() - single.mean()),
        "bias_median_minus_single": float(agg["median"].mean() - single.mean()),
        "large_captured_at_20pct": float(curve["large_captured"][0]),
        "mae_kept_at_20pct": float(curve["mae_kept"][0]),
        "aurc": float(curve["aurc"]),
    }


def _bias_by_error(
    reports: list[GradeReport], ref: np.ndarray, facts: list[dict[str, Any]]
) -> dict[str, float]:
    """Mean (grade - reference) per simulated error type."""
    diff = np.array([r.final for r in reports]) - ref
    errors = np.array([f["error"] for f in facts])
    return {e: float(diff[errors == e].mean()) for e in sorted(set(errors.tolist()))}


def _protocol(sym, ref, facts, ocr, subs, sq, boot, seed) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    qids = [q.id for q in sq.quiz.questions]
    clean = [s.answers[q] for s in subs for q in qids]
    noisy = [o.text[q] for o in ocr for q in qids]
    seg = [len(c.splitlines()) != len(n.splitlines()) for c, n in zip(clean, noisy)]
    result = EvaluationProtocol(n_bootstrap=boot, seed=seed).evaluate(
        sym,
        ref,
        strata={"error": [f["error"] for f in facts], "family": [f["family"] for f in facts]},
        reference_items=[f["ref_items"] for f in facts],
        ocr_misread=[c != n for c, n in zip(clean, noisy)],
        segmentation=seg,
    )
    return result.data


def _report(
    rows: list[dict[str, Any]],
    extra: dict[str, Any],
    size: dict[str, Any],
    seed: int,
    quick: bool,
    total_s: float,
) -> BenchReport:
    model = next(m["llm"] for m in size["settings"] if m["llm"] != "none")  # Gemma in the full run
    label = f"{LLM_NOISE}, LLM subset"
    system = f"{LLM} ({model})"
    headline = Headline.from_rows(
        rows, "auto_within_0.5", higher_is_better=True, method_system=system, where={"setting": label}
    )
    get = {(r["system"], r["setting"]): r for r in rows}
    llm, calls = get[(system, label)], extra["llm"][model]
    sim = extra[LLM_NOISE]
    n_answers = size["items"] * size["students"]
    notes = [
        f"{n_answers} synthetic answers ({size['items']} questions x {size['students']} simulated "
        f"students, seed {seed}); reference = sympy rubric engine on the clean text; QWK bin width 0.5 "
        "over 0..3 points.",
        f"Headline (setting '{label}', {llm['n']} answers stratified over error types): share of answers "
        "graded automatically within 0.5 points of the reference (deferred answers count as misses): "
        f"{system} {headline.method:.2f} vs best baseline {headline.best_baseline_system} "
        f"{headline.best_baseline:.2f}.",
        verdict(
            "Target: the LLM pipeline beats the best same-setting baseline",
            headline.comparable and headline.beats_baseline,
            f"{headline.method:.2f} vs {headline.best_baseline:.2f}; parse failures "
            f"{llm['parse_fail']:.0%} after one retry, {calls['s_per_call']:.2f} s per call",
        ),
        "Parse failures are deferred with the raw text kept, never scored 0: silent zeros "
        f"{calls['silent_zeros']} of {llm['n']}.",
        f"Simulated LLM at '{LLM_NOISE}': aggregation bias max - single "
        f"{sim['bias_max_minus_single']:+.3f} points, median - single "
        f"{sim['bias_median_minus_single']:+.3f}; deferring the 20% highest-spread answers captures "
        f"{sim['large_captured_at_20pct']:.0%} of its large errors (|a-g| >= 1).",
    ]
    if ("symbolic rubric engine", "clean") in get:
        clean_sym = get[("symbolic rubric engine", "clean")]
        notes.append(
            "The symbolic rubric engine is a reference, not a competitor (it knows the targets): on clean "
            f"text it gives QWK {clean_sym['qwk']:.3f}, MAE {clean_sym['mae']:.3f} (pipeline sanity check)."
        )
    first = next(n for n in NOISE if n in extra)
    notes.append(
        f"Final answer only ({first} text), mean grade - reference by error type: "
        + ", ".join(f"{e} {v:+.2f}" for e, v in extra[first]["final_only_bias"].items())
        + " (lenient on correct answers with wrong work, harsh wherever partial credit is due)."
    )
    if quick:
        notes.append(
            f"--quick: the '{LLM_NOISE}' setting alone, {n_answers} answers, the LLM pipeline on {llm['n']} "
            f"of them with the {TINY} (a pipeline check: Gemma's {FULL['llm_answers']} answers take minutes)."
        )
    config = {
        "size": size,
        "noise": {k: {"p_char": v[0], "p_seg": v[1]} for k, v in NOISE.items()},
        "llm": extra["llm"],
        "simulated": {k: extra[k] for k in NOISE if k in extra},
        "protocol": extra.get("protocol", {}),
        "seconds": total_s,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "threads": THREADS,
    }
    noises = dict.fromkeys(s["noise"] for s in size["settings"])
    what = f"{n_answers} calculus answers at {', '.join(noises)}; LLM: {', '.join(extra['llm'])}" + (
        f" (full: {FULL['items'] * FULL['students']} x 3 noise rates, + Gemma)" if quick else ""
    )
    return BenchReport(
        rows=rows,
        headline=headline,
        config=config,
        what=what,
        notes=notes,
        settings=[dict(s) for s in size["settings"]],
    )


def grid() -> list[dict[str, Any]]:
    """The full run's settings: OCR noise rate and the model in the LLM slot (``"none"``: not run there)."""
    return [dict(s) for s in GRID]


def run(*, quick: bool = False, seed: int = 0) -> BenchReport:
    """300 answers at three noise rates, Gemma and a tiny random Llama on 12 of them at ``ocr 3%``
    (``quick``: 30 answers at ``ocr 3%``, the tiny random Llama on 3)."""
    return _run(QUICK if quick else FULL, seed, quick)


def plot(report: BenchReport, directory: Path) -> dict[str, str]:
    """QWK and MAE against OCR noise per grader, and the protocol's breakdown at 10% noise.

    Returns ``{"noise": path, "protocol": path}`` of ``ai_grading_noise.png`` and ``ai_grading_protocol.png``
    (no protocol figure from a run without the ``ocr 10%`` setting, e.g. ``--quick``).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    ran = [n for n in NOISE if any(r["setting"] == n for r in report.rows)]
    systems = dict.fromkeys(r["system"] for r in report.rows if r["setting"] in NOISE)
    for system in systems:
        pts = [next(r for r in report.rows if r["system"] == system and r["setting"] == s) for s in ran]
        for ax, fig_name in zip(axes, ("qwk", "mae")):
            ax.plot(ran, [p[fig_name] for p in pts], "o-", label=system)
    for ax, fig_name in zip(axes, ("QWK (higher is better)", "MAE, points (lower is better)")):
        ax.set_title(fig_name, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    noise = directory / "ai_grading_noise.png"
    fig.savefig(noise, dpi=120)
    plt.close(fig)
    if not report.config["protocol"]:
        return {"noise": str(noise)}
    protocol = directory / "ai_grading_protocol.png"
    ProtocolResult(report.config["protocol"]).plot(protocol)
    return {"noise": str(noise), "protocol": str(protocol)}
