"""``hf-ext bench ai_grading``: graders side by side on synthetic calculus answers at several OCR noise rates.

Data: ``items`` synthetic questions (five families) answered by ``students`` simulated students with a
balanced mix of error types; the reference ("TA") score is the sympy rubric engine on the **clean** text.
OCR noise (:class:`~hf_ext.ai_grading.NoisyOCR`) corrupts the text at each setting. Graders:

- the LLM pipeline (:class:`~hf_ext.ai_grading.RubricGrader`) on Gemma-3-270M base (real weights;
  constrained JSON decoding, whole points, one run, compact schema with a JSON prefill) on a stratified
  subset, with 0 or 4 few-shot examples, each pass read greedily and as expected points; and the same
  pipeline on a tiny random Llama with a character tokenizer (a pipeline check, the LLM slot of ``--quick``);
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
from hf_ext.ai_grading.backends import CallableBackend, TransformersBackend
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
FULL: dict[str, Any] = {"items": 60, "students": 5, "llm_answers": 30, "bootstrap": 1000, "settings": GRID}
QUICK: dict[str, Any] = {
    "items": 15,
    "students": 2,
    "llm_answers": 3,
    "bootstrap": 200,
    "settings": (GRID[2],),
}
THREADS = 2


def llm_backend() -> Any:
    """The LLM under test, with constrained JSON decoding (whole points: the rubric's items are 0 or 1).

    A stronger grader is this one line, e.g. ``TransformersBackend.from_pretrained(name,
    decoding="constrained", points_step=1.0)`` for a local instruction-tuned model, or an
    ``OpenAICompatibleBackend`` (free decoding, validated by the parser)."""
    from hf_ext.assets import gemma3_270m

    return TransformersBackend(*gemma3_270m(), decoding="constrained", points_step=1.0)


def _tiny_backend() -> Any:
    from hf_ext.testing import tiny_llama

    tok = G.char_tokenizer()  # a word-level tokenizer cannot write JSON
    lm = tiny_llama(
        vocab_size=len(tok), max_position_embeddings=4096
    )  # character prompts run to ~1500 tokens
    return TransformersBackend(lm, tok, decoding="constrained", points_step=1.0)


BACKENDS = {GEMMA: llm_backend, TINY: _tiny_backend}
# Per model: the few-shot counts and the ways to read the constrained pass ("constrained": the most probable
# allowed points per item, greedy; "expected": the probability-weighted mean of the allowed points).
SHOTS = {GEMMA: (0, 4), TINY: (0,)}
READS = {GEMMA: ("constrained", "expected"), TINY: ("constrained",)}
BUDGETS = tuple(round(0.05 * k, 2) for k in range(11))  # deferral budgets 0..50%


def _system(model: str, shots: int, read: str) -> str:
    how = "greedy" if read == "constrained" else "expected points"
    return f"{LLM} ({model}, {shots}-shot, {how})"


def _key(messages: Any, seed: int) -> str:
    return f"{seed}:{messages[-2]['content'] if len(messages) > 1 else ''}:{messages[-1]['content']}"


class _Recorder:
    """The constrained backend, keeping each call's expected-points reply: one forward pass, two readings."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.expected: dict[Any, str] = {}

    def __call__(self, messages: Any, *, seed: int, temperature: float, question: Any) -> str:
        reply = self.backend(messages, seed=seed, temperature=temperature, question=question)
        prefix = messages[-1]["content"] if messages[-1]["role"] == "assistant" else ""
        self.expected[_key(messages, seed)] = prefix + self.backend.last_decoding.text("expected")
        return str(reply)

    def replay(self, messages: Any, *, seed: int, temperature: float) -> str:
        return str(self.expected[_key(messages, seed)])


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
    system: str,
    role: str,
    setting: str,
    reports: list[GradeReport],
    ref: np.ndarray,
    seconds: float,
    extra: dict[str, Any] | None = None,
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
        **(extra or {}),
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
    extra: dict[str, Any] = {"llm": {}, "subset": {}}
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
                flags = {k: [v[i] for i in subset] for k, v in _flags(ocr, subs, sq).items()}
                for name, (role, reps, sec) in graders.items():
                    part = [reps[i] for i in subset]
                    detail, extra["subset"][name] = _subset_figures(
                        part, ref[subset], flags, size, seed, False
                    )
                    rows.append(
                        _row(name, role, label, part, ref[subset], sec / len(reps) * len(subset), detail)
                    )
            for model in llms:
                llm_rows, extra["llm"][model] = _llm(
                    model, sq.quiz, subs, ocr, subset, ref, flags, size, seed
                )
                rows += llm_rows
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
    ref: np.ndarray,
    flags: dict[str, list[bool]],
    size: dict[str, Any],
    seed: int,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The LLM pipeline with ``model`` on the answer indices ``subset``, per few-shot count and reading of
    the constrained pass: its rows and its figures."""
    with Timer() as load:
        backend = BACKENDS[model]()
    recorder = _Recorder(backend)
    label = f"{LLM_NOISE}, LLM subset"
    rows, systems, calls, seconds, first = [], {}, 0, 0.0, []
    for shots in SHOTS[model]:
        settings: dict[str, Any] = {"n_runs": 1, "temperature": 0.0, "compact": True, "prefill": True}
        settings["examples"] = G.few_shot_examples(shots, seed)
        reports, sec = G.run_pipeline(RubricGrader(recorder, **settings), subs, ocr, quiz, subset)
        reads = {"constrained": reports}
        if "expected" in READS[model]:
            replay = RubricGrader(CallableBackend(recorder.replay), **settings)
            reads["expected"] = G.run_pipeline(replay, subs, ocr, quiz, subset)[0]
        for read in READS[model]:
            name = _system(model, shots, read)
            detail, systems[name] = _subset_figures(reads[read], ref[subset], flags, size, seed, True)
            rows.append(_row(name, "method", label, reads[read], ref[subset], sec, detail))
        calls += sum(r.n_calls for r in reports)
        seconds += sec
        first += reports
    figures = {
        "model": model,
        "load_s": load.seconds,
        "calls": calls,
        "s_per_call": seconds / max(1, calls),
        "parse_errors": [e for r in first for e in r.parse_errors],
        "raw_example": first[0].raw_texts[-1] if first and first[0].raw_texts else "",
        "silent_zeros": sum(1 for r in first if r.parse_errors and r.final == 0.0),
        "systems": systems,
    }
    return rows, figures


def _flags(ocr: list[Any], subs: list[Any], sq: Any) -> dict[str, list[bool]]:
    """Per answer: the OCR text differs from the clean one; a line moved between questions."""
    qids = [q.id for q in sq.quiz.questions]
    clean = [s.answers[q] for s in subs for q in qids]
    noisy = [o.text[q] for o in ocr for q in qids]
    return {
        "ocr_misread": [c != n for c, n in zip(clean, noisy)],
        "segmentation": [len(c.splitlines()) != len(n.splitlines()) for c, n in zip(clean, noisy)],
    }


def _subset_figures(
    reports: list[GradeReport],
    ref: np.ndarray,
    flags: dict[str, list[bool]],
    size: dict[str, Any],
    seed: int,
    model_risk: bool,
) -> tuple[dict[str, float], dict[str, Any]]:
    """The protocol on one grader's subset reports: bootstrap intervals (row columns), P5 failure tags and
    deferral curves by OCR confidence and, for the LLM, by the model's confidence in its points."""
    from hf_ext.metrics.functional.grading import deferral_curve

    result = EvaluationProtocol(n_bootstrap=size["bootstrap"], seed=seed).evaluate(
        reports, ref.tolist(), ocr_misread=flags["ocr_misread"], segmentation=flags["segmentation"]
    )
    overall = result.data["overall"]
    detail = {k: overall.get(k, math.nan) for k in ("qwk_lo", "qwk_hi", "within_0.5_lo", "within_0.5_hi")}
    scored = [i for i, r in enumerate(reports) if r.final is not None]
    a = np.array([reports[i].final for i in scored], dtype=float)
    risks = {"ocr": np.array([1 - reports[i].ocr_confidence for i in scored])}
    if model_risk:
        risks["model"] = np.array([1 - min(run.confidence or 0.0 for run in reports[i].runs) for i in scored])
    curves = {}
    for name, risk in risks.items():
        if len(scored) >= 2:
            c = deferral_curve(a, ref[scored], risk, budgets=BUDGETS)
            curves[name] = {k: c[k].tolist() for k in ("budget", "mae_kept", "large_captured", "aurc")}
    figures = {
        "overall": overall,
        "failure_modes": {k: v["count"] for k, v in result.data["failure_modes"].items()},
        "deferral": curves,
    }
    return detail, figures


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
    result = EvaluationProtocol(n_bootstrap=boot, seed=seed).evaluate(
        sym,
        ref,
        strata={"error": [f["error"] for f in facts], "family": [f["family"] for f in facts]},
        reference_items=[f["ref_items"] for f in facts],
        **_flags(ocr, subs, sq),
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
    mine = [
        r for r in rows if r["role"] == "method" and r["setting"] == label and f"({model}," in r["system"]
    ]
    best = max(mine, key=lambda r: (r["auto_within_0.5"], r["qwk"]))  # the best reading: an optimistic pick
    system = best["system"]
    headline = Headline.from_rows(
        rows, "auto_within_0.5", higher_is_better=True, method_system=system, where={"setting": label}
    )
    get = {(r["system"], r["setting"]): r for r in rows}
    llm, calls = best, extra["llm"][model]
    sim = extra[LLM_NOISE]
    n_answers = size["items"] * size["students"]
    base = get[(headline.best_baseline_system, label)]
    notes = [
        f"{n_answers} synthetic answers ({size['items']} questions x {size['students']} simulated "
        f"students, seed {seed}); reference = sympy rubric engine on the clean text; QWK bin width 0.5 "
        "over 0..3 points.",
        f"Headline (setting '{label}', {llm['n']} answers stratified over error types): share of answers "
        "graded automatically within 0.5 points of the reference (deferred answers count as misses), for "
        f"the best of the {len(mine)} readings of {model} (picked on these answers): {system} "
        f"{headline.method:.2f} [95% CI of within 0.5: {llm['within_0.5_lo']:.2f}, "
        f"{llm['within_0.5_hi']:.2f}] "
        f"vs best baseline {headline.best_baseline_system} {headline.best_baseline:.2f} "
        f"[{base['within_0.5_lo']:.2f}, {base['within_0.5_hi']:.2f}].",
        verdict(
            f"Target: {model} grades better than the best same-setting baseline",
            headline.comparable and headline.beats_baseline,
            f"{headline.method:.2f} vs {headline.best_baseline:.2f}; QWK {llm['qwk']:.3f} "
            f"[{llm['qwk_lo']:.3f}, {llm['qwk_hi']:.3f}]; parse failures {llm['parse_fail']:.0%} "
            f"(constrained decoding), {calls['s_per_call']:.2f} s per call",
        ),
    ]
    for name, figs in calls["systems"].items():
        curve = figs["deferral"].get("model")
        if curve:
            notes.append(
                f"{name}: QWK {figs['overall']['qwk']:.3f}, within 0.5 {figs['overall']['within_0.5']:.2f}; "
                f"deferring the 20% least confident answers captures {curve['large_captured'][4]:.0%} of its "
                f"large errors (AURC {curve['aurc']:.3f}); P5 tags of its large errors: "
                + ", ".join(f"{k} {v}" for k, v in figs["failure_modes"].items() if v)
            )
    notes += [
        f"Constrained decoding: {len(calls['parse_errors'])} parse failures in {calls['calls']} calls, "
        f"silent zeros {calls['silent_zeros']}; {calls['load_s']:.1f} s to load {model}.",
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
            f"of them with the {TINY} under constrained decoding (a pipeline check: its grades are valid "
            f"JSON but random; Gemma's {FULL['llm_answers']} answers x 2 prompts take minutes)."
        )
    config = {
        "size": size,
        "noise": {k: {"p_char": v[0], "p_seg": v[1]} for k, v in NOISE.items()},
        "llm": extra["llm"],
        "simulated": {k: extra[k] for k in NOISE if k in extra},
        "protocol": extra.get("protocol", {}),
        "subset": extra["subset"],
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
    """300 answers at three noise rates, Gemma and a tiny random Llama on 30 of them at ``ocr 3%``
    (``quick``: 30 answers at ``ocr 3%``, the tiny random Llama on 3)."""
    return _run(QUICK if quick else FULL, seed, quick)


def plot(report: BenchReport, directory: Path) -> dict[str, str]:
    """QWK and MAE against OCR noise per grader, deferral curves on the LLM subset, and the protocol's
    breakdown at 10% noise.

    Returns ``{"noise": path, "deferral": path, "protocol": path}`` of ``ai_grading_noise.png``,
    ``ai_grading_deferral.png`` and ``ai_grading_protocol.png`` (no protocol figure from a run without the
    ``ocr 10%`` setting, e.g. ``--quick``).
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
    paths = {"noise": str(noise), "deferral": _plot_deferral(report, directory / "ai_grading_deferral.png")}
    if report.config["protocol"]:
        protocol = directory / "ai_grading_protocol.png"
        ProtocolResult(report.config["protocol"]).plot(protocol)
        paths["protocol"] = str(protocol)
    return paths


def _plot_deferral(report: BenchReport, path: Path) -> str:
    """MAE on the kept answers against the share deferred, on the LLM subset: the LLM readings deferring
    their least confident answers, the other graders deferring by OCR confidence."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for model in report.config["llm"].values():
        for name, figs in model["systems"].items():
            curve = figs["deferral"].get("model")
            if curve:
                ax.plot(curve["budget"], curve["mae_kept"], "o-", ms=3, label=f"{name[len(LLM) + 2 : -1]}")
    for name, figs in report.config["subset"].items():
        curve = figs["deferral"].get("ocr")
        if curve and not name.startswith("simulated"):
            ax.plot(curve["budget"], curve["mae_kept"], "s--", ms=3, label=f"{name} (by OCR conf.)")
    ax.set_xlabel("share of answers deferred to a human")
    ax.set_ylabel("MAE on the kept answers, points")
    ax.set_title(f"Deferral curves, {LLM_NOISE} LLM subset", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(path)
