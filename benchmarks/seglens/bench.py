"""``hf-ext bench seglens``: fix a shifted cohort's segmentation failures by editing SAE latents.

The synthetic cohorts are built so that the shift has a cause a latent can carry: ``adult`` lesions have a
fine grating texture on top of their brightness, and ``ssa`` images (same anatomy) carry a scanner artefact
made of the same grating over the whole brain. A TinyUNet and a tiny SegFormer
(``SegformerForSemanticSegmentation`` from a config) are trained on ``adult``; on ``ssa`` they take the
textured brain for lesion. A BatchTopK SAE is fitted at one site per model on activations of an ``adult`` and
an ``ssa`` calibration split. The diff report ranks latents by differential reliance (log-ratio of the mean
code, ``ssa`` vs ``adult``); :func:`select_intervention` (joint) scales the top ``m`` latents by
``(mean_adult / mean_ssa) ** s``, ``(m, s)`` chosen by the Dice of the ``ssa`` **calibration** split, subject
to lowering the Dice of an ``adult`` calibration split by at most 0.02. Everything is evaluated on held-out
``ssa`` images (disjoint from the calibration split): failures are images with lesion Dice < 0.5.
Same-setting baselines (frozen weights, no labels): no intervention; random latents of the same count ``m``
steered with the same strength ``s``; random latent orders with ``(m, s)`` tuned by the same calibration
search; intensity normalisation (each image mapped onto the ``adult`` intensity distribution); an input
low-pass filter with its width tuned on the same calibration splits under the same ``adult`` guard. AdaBN
(BatchNorm statistics re-estimated on unlabelled ``ssa`` calibration images) and fine-tuning on the labelled
calibration images change weights and are reported beside them. The alignment rows compare the two models'
SAEs (activation correlation) and two SAEs of the U-Net fitted on one cohort each (decoder cosine).
"""

from __future__ import annotations

import math
import resource
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from benchmarks.harness import BenchReport, Headline, Timer, pinned_threads, verdict
from benchmarks.seglens import models as bm
from hf_ext.seglens.activations import ActivationStore
from hf_ext.seglens.align import align_saes
from hf_ext.seglens.config import InterventionConfig
from hf_ext.seglens.core import lesion_dice
from hf_ext.seglens.diff import diff_report, matched_scale, predict_labels, select_intervention
from hf_ext.seglens.intervene import LatentIntervention
from hf_ext.seglens.sae import SparseAutoencoder
from hf_ext.seglens.synthetic import make_cohorts

METHOD = "Med-SegLens (diff-selected latents)"
SETTING = "frozen weights"
ADAPTED = "weights adapted"
FAIL = 0.5
MAX_DROP = 0.02
TEXTURE, ARTEFACT = 0.15, 0.15
SIGMAS = (0.5, 1.0, 1.5, 2.0)
RANDOM = "random latents, same m and strength"
RANDOM_TUNED = "random latents, (m, strength) tuned"
INTENSITY = "intensity normalisation (to adult)"
LOW_PASS = "input low-pass (width tuned on cal.)"
SHIFT = "adult -> ssa (grating artefact)"
ARCHS: dict[str, dict[str, Any]] = {
    "unet": {"model": "TinyUNet (width 8)", "site": "enc2", "expansion": 8},
    "segformer": {"model": "SegFormer (tiny, 4 stages)", "site": "segformer.stages.0", "expansion": 32},
}
GRID = InterventionConfig(m_grid=[1, 2, 4, 8, 16, 32, 64], strengths=[0.5, 1.0, 2.0, 4.0])


@dataclass(frozen=True)
class Plan:
    """Sizes of one run: images per cohort (``n``: ``n_ref`` adult calibration, as many held-out adult and the
    rest adult training; ``n_cal`` ssa calibration and the rest ssa evaluation), training steps of the U-Net
    and the SegFormer (0: that model is not run), SAE steps, fine-tuning steps, random draws (same ``m`` and
    strength; tuned), seeds and threads."""

    n: int
    n_ref: int
    n_cal: int
    unet_steps: int
    seg_steps: int
    sae_steps: int
    transfer_draws: int
    tuned_draws: int
    finetune_steps: int
    seeds: tuple[int, ...]
    threads: int = 1

    @property
    def archs(self) -> tuple[str, ...]:
        return tuple(a for a, steps in (("unet", self.unet_steps), ("segformer", self.seg_steps)) if steps)


def _setting(arch: str) -> dict[str, Any]:
    return {"model": ARCHS[arch]["model"], "shift": SHIFT, "site": ARCHS[arch]["site"], "image_px": 64}


ALIGNMENT = {
    "models": f"TinyUNet {ARCHS['unet']['site']} / SegFormer {ARCHS['segformer']['site']}",
    "cohorts": "adult, ssa",
    "image_px": 64,
}


def _plan(*, quick: bool, seed: int) -> Plan:
    """Full: 480 images per cohort, 200 U-Net and 500 SegFormer steps, 1000 SAE steps, 2 seeds, 5 + 2 random
    draws, 2 threads. Quick: the U-Net setting alone, 128 images, 60 U-Net steps, 150 SAE steps, one seed,
    one random draw of the same ``m`` and strength (no tuned search), 5 fine-tuning steps, 2 threads."""
    if quick:
        return Plan(128, 24, 32, 60, 0, 150, 1, 0, 5, (seed,), threads=2)
    return Plan(480, 64, 96, 200, 500, 1000, 5, 2, 60, (seed, seed + 1), threads=2)


def _settings(plan: Plan) -> list[dict[str, Any]]:
    both = len(plan.archs) == 2
    return [_setting(a) for a in plan.archs] + ([ALIGNMENT] if both else [])


def grid() -> list[dict[str, Any]]:
    """The settings of the full run: failure recovery on each model, and their SAE alignment."""
    return _settings(_plan(quick=False, seed=0))


def run(*, quick: bool = False, seed: int = 0) -> BenchReport:
    """The full run (:func:`grid`) or its quick slice (:func:`_plan`)."""
    return _report(_plan(quick=quick, seed=seed))


def _report(plan: Plan) -> BenchReport:
    with pinned_threads(plan.threads):
        runs = {a: [_one_seed(plan, s, a) for s in plan.seeds] for a in plan.archs}
        extra = (
            _alignment(plan, plan.seeds[0], runs["unet"][0], runs["segformer"][0]) if len(runs) == 2 else {}
        )
    rows: list[dict[str, Any]] = []
    for arch, per_seed in runs.items():
        rows += _rows(per_seed, arch)
    rows += extra.get("rows", [])
    first = plan.archs[0]
    headline = Headline.from_rows(
        rows,
        "recovered",
        higher_is_better=True,
        method_system=METHOD,
        where={"setting": SETTING, "model": ARCHS[first]["model"]},
    )
    notes = [
        "Synthetic phantoms only (no MRI data offline); figures show the mechanics, not a clinical effect.",
        f"Failures: held-out ssa images with lesion Dice < {FAIL}; latents and edit sizes were chosen on a "
        "separate ssa calibration split (and an adult calibration split), never on the evaluation images.",
    ]
    for arch in plan.archs:
        notes += _notes(rows, arch)
    return BenchReport(
        rows=rows,
        headline=headline,
        config={
            "plan": plan.__dict__ | {"seeds": list(plan.seeds)},
            "sites": {a: ARCHS[a]["site"] for a in plan.archs},
            "texture": TEXTURE,
            "artefact": ARTEFACT,
            "per_seed": {
                a: [
                    {
                        k: v
                        for k, v in r.items()
                        if k in ("seed", "chosen", "edits", "gate", "sigma", "failures")
                    }
                    for r in per_seed
                ]
                for a, per_seed in runs.items()
            },
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        },
        what=_what(plan),
        notes=notes + extra.get("notes", []),
        settings=_settings(plan),
    )


def _what(plan: Plan) -> str:
    def size(p: Plan) -> str:
        models = " + ".join("TinyUNet" if a == "unet" else "SegFormer" for a in p.archs)
        return f"{models}, {p.n} img, {len(p.seeds)} seed{'s' if len(p.seeds) > 1 else ''}"

    full = _plan(quick=False, seed=0)
    tail = "" if plan == full else f" (full: {size(full)})"
    return f"adult->ssa artefact, {size(plan)}{tail}"


def _notes(rows: list[dict[str, Any]], arch: str) -> list[str]:
    """The verdict lines of one model; a run without failures (``recovered`` NaN) says so instead."""
    model = ARCHS[arch]["model"]
    mine = [r for r in rows if r.get("model") == model and r["setting"] in (SETTING, ADAPTED)]
    me = next(r for r in mine if r["system"] == METHOD)
    if not math.isfinite(me["recovered"]):
        return [f"{model}: no held-out ssa image failed at this size: nothing to recover, no comparison."]
    same = [r for r in mine if r["setting"] == SETTING and r["system"] != METHOD]
    best = max(same, key=lambda r: r["recovered"])
    rand = max((r for r in same if r["system"] in (RANDOM, RANDOM_TUNED)), key=lambda r: r["recovered"])
    return [
        verdict(
            f"{model}: recovers >= half of the failures",
            me["recovered"] >= 0.5,
            f"{me['recovered']:.2f} of {me['failures']} failures",
        ),
        verdict(
            f"{model}: >= 2x the random-latent controls",
            me["recovered"] >= 2 * rand["recovered"] and me["recovered"] > 0,
            f"{me['recovered']:.2f} vs {rand['recovered']:.2f} ({rand['system']})",
        ),
        verdict(
            f"{model}: beats the best same-setting baseline",
            me["recovered"] > best["recovered"],
            f"{me['recovered']:.2f} vs {best['recovered']:.2f} ({best['system']})",
        ),
        verdict(
            f"{model}: adult Dice change >= -0.02",
            me["adult dDice"] >= -MAX_DROP,
            f"{me['adult dDice']:+.3f} when the same edits run on held-out adult images",
        ),
    ]


def _split(plan: Plan, seed: int) -> dict[str, Any]:
    c = make_cohorts(
        plan.n, 64, cohorts=("adult", "ssa"), shift=0.0, texture=TEXTURE, artefact=ARTEFACT, random_state=seed
    )
    a, b = c["adult"], c["ssa"]
    n_train = plan.n - 2 * plan.n_ref
    return {
        "train": a.subset(slice(0, n_train)),
        "ref": a.subset(slice(n_train, n_train + plan.n_ref)),
        "adult": a.subset(slice(n_train + plan.n_ref, plan.n)),
        "cal": b.subset(slice(0, plan.n_cal)),
        "eval": b.subset(slice(plan.n_cal, plan.n)),
    }


def _fit_sae(net: Any, arch: str, parts: list[Any], steps: int, seed: int) -> SparseAutoencoder:
    """A BatchTopK SAE at ``arch``'s site (``expansion`` x the site's channels latents, k = 8) fitted on the
    site activations of the images of ``parts``."""
    site = ARCHS[arch]["site"]
    store = ActivationStore(net, site, max_samples=40_000, seed=seed)
    x = torch.cat([store.collect(p.loader()).x for p in parts])
    return SparseAutoencoder(
        d_in=x.shape[1],
        expansion=ARCHS[arch]["expansion"],
        k=min(8, x.shape[1] // 2),
        steps=steps,
        batch_size=1024,
        seed=seed,
        site=site,
        model_id=arch,
    ).fit(x)


def _one_seed(plan: Plan, seed: int, arch: str) -> dict[str, Any]:
    d = _split(plan, seed)
    site = ARCHS[arch]["site"]
    out: dict[str, Any] = {"seed": seed, "systems": {}}
    with Timer() as t_train:
        model = bm.unet(seed) if arch == "unet" else bm.segformer(seed)
        steps = plan.unet_steps if arch == "unet" else plan.seg_steps
        net = bm.train(model, d["train"].images, d["train"].masks, steps=steps, lr=3e-3, seed=seed)
    with Timer() as t_sae:
        sae = _fit_sae(net, arch, [d["ref"], d["cal"]], plan.sae_steps, seed)
    ev, ad = d["eval"], d["adult"]
    held = torch.cat([ActivationStore(net, site, max_samples=40_000).collect(p.loader()).x for p in (ad, ev)])
    clean = lesion_dice(predict_labels(net, ev.images), ev.masks)
    clean_adult = lesion_dice(predict_labels(net, ad.images), ad.masks)
    with LatentIntervention(net, site, sae, {}, keep_error=False):
        spliced = lesion_dice(predict_labels(net, ev.images), ev.masks)
    out["sae"] = sae.metrics(held) | {
        "spliced_ratio": float(spliced.mean() / clean.mean()),
        "fit_s": t_sae.seconds,
        "train_s": t_train.seconds,
    }
    fail = clean < FAIL
    out["failures"] = int(fail.sum())
    cal, ref = (d["cal"].images, d["cal"].masks), (d["ref"].images, d["ref"].masks)
    report = diff_report(net, sae, {"adult": ref, "ssa": cal}, ablate_top=0)  # the ranking only
    with Timer() as t_sel:
        edits, trace = select_intervention(
            net, sae, report, "ssa", cal, GRID, reference_calibration=ref, max_reference_drop=MAX_DROP
        )
    out["edits"] = {str(k): list(v) for k, v in edits.items()}
    stats_t, stats_r = report.stats["ssa"], report.stats["adult"]

    def evaluate(
        model: Any, e: dict[int, tuple[str, float]] | None, transform: Any = None
    ) -> dict[str, float]:
        x_ev, x_ad = (
            (ev.images, ad.images) if transform is None else (transform(ev.images), transform(ad.images))
        )
        ctx = LatentIntervention(model, site, sae, e or {})
        with ctx, Timer() as t:
            after = lesion_dice(predict_labels(model, x_ev), ev.masks)
        with ctx:
            after_adult = lesion_dice(predict_labels(model, x_ad), ad.masks)
        return {
            "recovered": float((after[fail] >= FAIL).float().mean()) if fail.any() else math.nan,
            "fail Dice before": float(clean[fail].mean()) if fail.any() else math.nan,
            "fail Dice after": float(after[fail].mean()) if fail.any() else math.nan,
            "ssa Dice": float(after.mean()),
            "adult dDice": float(after_adult.mean() - clean_adult.mean()),
            "latents": len(e or {}),
            "ms/img": 1000 * t.seconds / len(ev),
        }

    systems = out["systems"]
    systems["no intervention"] = evaluate(net, {})
    systems[METHOD] = evaluate(net, edits) | {"select_s": t_sel.seconds}
    chosen = next((t for t in trace if t["kept"]), {"m": 0, "strength": 0.0})
    out["chosen"] = {k: chosen[k] for k in ("m", "strength")}
    alive = torch.nonzero(stats_t.mean > 0).flatten().tolist()
    gen = torch.Generator().manual_seed(1000 + seed)
    draws = []
    for _ in range(plan.transfer_draws):
        pick = [alive[i] for i in torch.randperm(len(alive), generator=gen)[: chosen["m"]].tolist()]
        draws.append(evaluate(net, {j: matched_scale(j, stats_t, stats_r, chosen["strength"]) for j in pick}))
    systems[RANDOM] = _mean(draws)
    draws = []
    for _ in range(plan.tuned_draws):
        order = [alive[i] for i in torch.randperm(len(alive), generator=gen).tolist()]
        e, _ = select_intervention(
            net,
            sae,
            report,
            "ssa",
            cal,
            GRID,
            candidates=order,
            reference_calibration=ref,
            max_reference_drop=MAX_DROP,
        )
        draws.append(evaluate(net, e))
    if draws:
        systems[RANDOM_TUNED] = _mean(draws)
    reference = d["ref"].images
    systems[INTENSITY] = evaluate(net, {}, lambda x: bm.match_histogram(x, reference))
    out["sigma"] = sigma = _tune_low_pass(net, cal, ref)
    systems[LOW_PASS] = evaluate(net, {}, (lambda x: bm.low_pass(x, sigma)) if sigma else None)
    systems["AdaBN (unlabelled ssa cal.)"] = evaluate(bm.adabn(net, d["cal"].images), {})
    tuned = bm.finetune(net, d["cal"].images, d["cal"].masks, steps=plan.finetune_steps, seed=seed)
    systems["fine-tune (labelled ssa cal.)"] = evaluate(tuned, {})
    out["net"], out["sae_model"] = net, sae
    return out


def _tune_low_pass(
    net: Any, cal: tuple[torch.Tensor, torch.Tensor], ref: tuple[torch.Tensor, torch.Tensor]
) -> float:
    """The blur width of :data:`SIGMAS` with the best ssa calibration Dice among those that lower the adult
    calibration Dice by at most ``MAX_DROP`` (0: no blur), the rule the latent edits follow."""

    def dice(x: torch.Tensor, y: torch.Tensor, sigma: float) -> float:
        return float(lesion_dice(predict_labels(net, bm.low_pass(x, sigma) if sigma else x), y).mean())

    best, best_dice, ref_base = 0.0, dice(*cal, 0.0), dice(*ref, 0.0)
    for sigma in SIGMAS:
        score = dice(*cal, sigma)
        if score > best_dice and dice(*ref, sigma) >= ref_base - MAX_DROP:
            best, best_dice = sigma, score
    return best


def _mean(draws: list[dict[str, float]]) -> dict[str, float]:
    return {k: sum(d[k] for d in draws) / len(draws) for k in draws[0]} | {"draws": len(draws)}


def _rows(runs: list[dict[str, Any]], arch: str) -> list[dict[str, Any]]:
    rows = []
    model = ARCHS[arch]["model"]
    n_fail = sum(r["failures"] for r in runs)
    for system in runs[0]["systems"]:
        per = [r["systems"][system] for r in runs]
        weights = [r["failures"] for r in runs]  # a seed without failures has NaN failure figures
        row: dict[str, Any] = {
            "system": system,
            "model": model,
            "setting": ADAPTED if system.startswith(("AdaBN", "fine-tune")) else SETTING,
            "is_baseline": system != METHOD,
            "failures": n_fail,
        }
        for key in ("recovered", "fail Dice before", "fail Dice after"):  # pooled over the failures
            pooled = [(p[key], w) for p, w in zip(per, weights) if w]
            row[key] = sum(v * w for v, w in pooled) / n_fail if n_fail else math.nan
        for key in ("ssa Dice", "adult dDice", "latents", "ms/img"):
            row[key] = sum(p[key] for p in per) / len(per)
        rows.append(row)
    sae = [r["sae"] for r in runs]
    rows.append(
        {
            "system": f"SAE {model} {ARCHS[arch]['site']}",
            "model": model,
            "setting": "SAE",
            "is_baseline": False,
            **{
                k: sum(s[k] for s in sae) / len(sae)
                for k in ("fvu", "l0", "dead_fraction", "spliced_ratio", "fit_s", "train_s")
            },
        }
    )
    return rows


def _alignment(plan: Plan, seed: int, run_u: dict[str, Any], run_s: dict[str, Any]) -> dict[str, Any]:
    """Alignment rows of ``seed``: the two models' SAEs of that seed's runs (``_one_seed`` outputs) by
    activation correlation, and two U-Net SAEs fitted on one cohort each by decoder cosine."""
    d = _split(plan, seed)
    site_u, site_s = ARCHS["unet"]["site"], ARCHS["segformer"]["site"]
    unet, seg, sae_u, sae_s = run_u["net"], run_s["net"], run_u["sae_model"], run_s["sae_model"]
    shared = torch.cat([d["adult"].images, d["eval"].images[:64]])
    cross = align_saes(sae_u, sae_s, "activation_correlation", models=(unet, seg), images=shared)
    cohort = align_saes(
        _fit_sae(unet, "unet", [d["train"]], plan.sae_steps, seed),
        _fit_sae(unet, "unet", [d["cal"]], plan.sae_steps, seed),
        "decoder_cosine",
    )
    notes = [
        f"Alignment (seed {seed}): U-Net {site_u} <-> SegFormer {site_s} (activation correlation, r >= 0.5): "
        f"{len(cross.shared_pairs)} shared pairs ({cross.shared_fraction:.0%} of the smaller SAE); "
        f"U-Net adult-SAE <-> ssa-SAE (decoder cosine >= 0.7): {len(cohort.shared_pairs)} shared "
        f"({cohort.shared_fraction:.0%}).",
    ]
    return {"rows": [], "notes": notes}


def plot(report: BenchReport, directory: Path) -> dict[str, str]:
    """``seglens_bench.png``: failure-case Dice before/after and the share recovered, per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    rows = [r for r in report.rows if "recovered" in r]
    names = [f"{r['model'].split(' ')[0]}: {r['system']}" for r in rows]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(12, 9))
    xs = range(len(rows))
    ax1.bar([x - 0.2 for x in xs], [r["fail Dice before"] for r in rows], 0.4, label="before", color="0.7")
    ax1.bar([x + 0.2 for x in xs], [r["fail Dice after"] for r in rows], 0.4, label="after")
    ax1.axhline(FAIL, color="k", lw=0.6, ls="--")
    ax1.set_xticks(list(xs), names, fontsize=6, rotation=25, ha="right")
    ax1.set(ylabel="lesion Dice on ssa failures", title="Dice of the failure cases")
    ax1.legend(fontsize=7)
    ax2.bar(
        list(xs),
        [r["recovered"] for r in rows],
        color=["C3" if r["system"] == METHOD else "C0" for r in rows],
    )
    ax2.axhline(0.5, color="k", lw=0.6, ls="--")
    ax2.set_xticks(list(xs), names, fontsize=6, rotation=25, ha="right")
    ax2.set(ylabel="share of failures with Dice >= 0.5", title="Failure cases recovered")
    sae = [r for r in report.rows if r.get("setting") == "SAE"]
    text = "; ".join(f"{r['system'].split(' (')[0]}: FVU {r['fvu']:.3f}, L0 {r['l0']:.1f}" for r in sae)
    fig.suptitle(text, fontsize=8)
    fig.tight_layout()
    path = directory / "seglens_bench.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return {"seglens_bench": str(path)}
