"""The benchmark's language model: a small all-global Llama trained once, offline, on Python standard-library
source (byte-level, 256 tokens), then cached under :func:`hf_ext.assets.cache_dir`.

Why: Vegas saves KV reads, so the benchmark needs a model whose decode step is dominated by KV reads (small
weights, 4 KV heads in every layer, no sliding-window layers) and whose attention has real structure that
stays put from one verify to the next. A random-weight model has none (every sparse draft is rejected), and
Gemma-3-270M has 15 of 18 layers local and a 262k-token head.

Recipe (fixed, reproducible): the standard library's ``*.py`` files (tests excluded), split by file into
train and held-out (every file whose path hashes to 0 mod 20 is held out; the benchmark's prompts come from
those); byte tokens; 2 layers, hidden 128, 4 heads of 32, MLP 352, RoPE theta 5e5, tied embeddings (0.43 M
parameters); seed 0, 2 torch threads, the :data:`NUMERICS` (so that any x86-64 CPU with AVX2 builds the same
weights); AdamW (betas 0.9/0.95, weight decay 0.1), a fresh one for each of the :data:`STAGES` (512-byte
windows, then 4096, then 16384, each stage with its warm-up and cosine decay), so that the model is trained at
the lengths it decodes at.
The first :data:`COPY_STEPS` steps are a copy task (a random printable segment repeated); after them every
window gets :data:`COPIES` of its own spans (32-128 bytes, half of them first replaced by random bytes) pasted
again further on. The size is chosen for the time budget: in 15 minutes of two cores this model trains on
about 3x the text of a 3.3 M-parameter one (the first shipped recipe) and predicts held-out text better at
every length measured; its attention also keeps more of its mass on what the last verify selected (the docs
page has both). Copying (induction) heads do not form within the budget (the docs page gives the recipes
tried and the token counts they need).
The model ships in the repository beside this benchmark (:data:`SHIPPED`, 1.7 MB): ``recipe.json`` beside the
weights records
the recipe's hash, the wall time, the losses and the induction check (loss on a repeated held-out segment vs
on its first occurrence), and the manifest the SHA-256 of every file, checked on every load. When this
module's recipe changes, the model is trained again into :func:`hf_ext.assets.cache_dir` (about 13 minutes on
two cores, with a progress bar); a test rebuilds the shipped recipe and compares the bytes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

NAME = "vegas-byte-llama"
#: The shipped build of this module's recipe (weights, config, ``recipe.json`` and the SHA-256 manifest).
SHIPPED = Path(__file__).with_name("byte_llama")
SEED = 0
COPIES = 2
RANDOM_SPANS = 0.5
COPY_STEPS = 150
THREADS = 2
#: The training process's numerics: ATen's CPU kernels capped at AVX2 and MKL in its conditional numerical
#: reproducibility mode for AVX2, so that a build rounds alike on every x86-64 CPU with AVX2. Without them an
#: AVX-512 CPU rounds otherwise (ATen's vector width, MKL's GEMM kernels), the runs drift apart over 2800
#: steps and two machines build two different models.
NUMERICS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2,STRICT"}
EVAL_BYTES, EVAL_EDGES = 8192, (0, 512, 4096, 8192)


@dataclass(frozen=True)
class Stage:
    """One stage of the recipe: ``steps`` AdamW steps on ``batch`` windows of ``seq`` bytes; the learning rate
    rises linearly to ``lr`` over ``warmup`` steps, then follows a cosine to 0 at the stage's end."""

    steps: int
    batch: int
    seq: int
    lr: float
    warmup: int

    def lr_at(self, step: int) -> float:
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        return self.lr * 0.5 * (1 + math.cos(math.pi * (step - self.warmup) / (self.steps - self.warmup)))


#: Short windows first (most of the text, fast), then long ones, so that the model is trained at the lengths
#: the benchmark decodes at (a model trained on 512-byte windows only predicts poorly past 512 bytes, one
#: trained up to 4096 bytes poorly past 8k). A 16k step costs 12x a 4k one on two cores (SDPA's CPU training
#: path is quadratic), hence few of them.
STAGES = (
    Stage(steps=2200, batch=8, seq=512, lr=3e-3, warmup=40),
    Stage(steps=450, batch=1, seq=4096, lr=1e-3, warmup=20),
    Stage(steps=50, batch=1, seq=16384, lr=5e-4, warmup=5),
)
ARCH: dict[str, Any] = dict(
    vocab_size=256,
    hidden_size=128,
    intermediate_size=352,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=4,
    head_dim=32,
    rope_theta=5e5,
    max_position_embeddings=65536,
    tie_word_embeddings=True,
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
)


def recipe_sha256(stages: tuple[Stage, ...] = STAGES, seed: int = SEED) -> str:
    """SHA-256 of everything that decides the trained bytes: architecture, stages, data mix, seed, threads and
    numerics (the text is the running Python's standard library, named by its version in ``recipe.json``)."""
    recipe = {
        "arch": ARCH,
        "stages": [asdict(stage) for stage in stages],
        "numerics": NUMERICS,
        "seed": seed,
        "threads": THREADS,
        "copies": COPIES,
        "random_spans": RANDOM_SPANS,
        "copy_steps": COPY_STEPS,
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()


def _held_out(rel: str) -> bool:
    return int(hashlib.sha256(rel.encode()).hexdigest(), 16) % 20 == 0


@cache
def stdlib_sources() -> dict[str, dict[str, bytes]]:
    """``{"train": {path: bytes}, "held_out": {path: bytes}}``: the standard library's ``*.py`` files (tests,
    ``site-packages`` and ``idle_test`` excluded), split by a hash of the relative path (5% held out)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    out: dict[str, dict[str, bytes]] = {"train": {}, "held_out": {}}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("test/", "site-packages/", "idlelib/idle_test/")) or "/test" in rel:
            continue
        out["held_out" if _held_out(rel) else "train"][rel] = path.read_bytes()
    return out


def _batch(data: Any, generator: Any, batch: int, seq: int) -> Any:
    """``[batch, seq + 1]`` byte windows, each with ``COPIES`` earlier spans pasted again further on."""
    import torch

    starts = torch.randint(0, data.numel() - seq - 1, (batch,), generator=generator)
    x = torch.stack([data[s : s + seq + 1] for s in starts.tolist()])
    for row in range(batch):
        for _ in range(COPIES):
            m = int(torch.randint(32, 129, (), generator=generator))
            a = int(torch.randint(0, seq - 2 * m, (), generator=generator))
            c = int(torch.randint(a + m, seq + 1 - m, (), generator=generator))
            if torch.rand((), generator=generator) < RANDOM_SPANS:  # unpredictable except by copying
                x[row, a : a + m] = torch.randint(32, 127, (m,), generator=generator)
            x[row, c : c + m] = x[row, a : a + m].clone()
    return x


def _copy_batch(generator: Any, batch: int, seq: int) -> Any:
    """``[batch, seq + 1]`` rows of one random printable segment (32-128 bytes) repeated: the warm-up task
    meant to start copying heads early (in the recorded builds none formed; see the module docstring)."""
    import torch

    rows = []
    for _ in range(batch):
        m = int(torch.randint(32, 129, (), generator=generator))
        seg = torch.randint(32, 127, (m,), generator=generator)
        rows.append(seg.repeat(seq // m + 2)[: seq + 1])
    return torch.stack(rows)


def induction_check(lm: Any, text: bytes, *, span: int = 256, gap: int = 0) -> dict[str, float]:
    """Mean loss (nats/byte) on ``span`` held-out bytes and on the same bytes repeated after ``gap`` more.

    The repeat is predictable only by copying from the first occurrence, so ``repeat / first`` far below 1
    shows copying (induction) heads.
    """
    import torch

    seg = list(text[:span])
    filler = list(text[span : span + gap])
    ids = torch.tensor([seg + filler + seg])
    with torch.no_grad():
        logp = torch.log_softmax(lm(ids).logits[0, :-1].float(), -1)
    nll = -logp.gather(-1, ids[0, 1:, None])[:, 0]
    first = float(nll[: span - 1].mean())
    repeat = float(nll[-span + 1 :].mean())
    return {"first": first, "repeat": repeat, "ratio": repeat / first}


def _evaluate(lm: Any, held_out: bytes) -> dict[str, Any]:
    import torch

    ids = torch.tensor([list(held_out[:EVAL_BYTES])])
    with torch.no_grad():
        logits = lm(ids).logits[0, :-1].float()
    nll = torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="none")
    loss = float(nll.mean())
    by_position = {
        f"{a}-{b}": float(nll[a : b - 1].mean()) / math.log(2) for a, b in zip(EVAL_EDGES, EVAL_EDGES[1:])
    }
    return {
        "held_out_loss": loss,
        "held_out_bits_per_byte": loss / math.log(2),
        "held_out_bits_per_byte_by_position": by_position,
        "induction": induction_check(lm, held_out),
        "induction_far": induction_check(lm, held_out, gap=3000),
    }


def _optimizer(lm: Any) -> Any:
    import torch

    decay = [p for p in lm.parameters() if p.dim() >= 2]
    rest = [p for p in lm.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, betas=(0.9, 0.95))


def train(target: Path, *, stages: tuple[Stage, ...] = STAGES, seed: int = SEED) -> dict[str, Any]:
    """Train the model through ``stages`` (a fresh AdamW each) in a new Python process with the
    :data:`NUMERICS` environment (read when torch starts, so never in a process that imported it), and save it
    (``save_pretrained``) with ``recipe.json`` into ``target``; returns the recipe.

    Raises:
        subprocess.CalledProcessError: the training process failed (its traceback is on stderr).
    """
    job = {"target": str(target), "stages": [asdict(stage) for stage in stages], "seed": seed}
    subprocess.run(
        [sys.executable, "-c", f"from {__name__} import _train_job; _train_job()"],
        input=json.dumps(job),
        text=True,
        env={**os.environ, **NUMERICS},
        cwd=Path(__file__).resolve().parents[2],  # the checkout root, where `benchmarks` imports from
        check=True,
    )
    return dict(json.loads((target / "recipe.json").read_text()))


def _train_job() -> None:
    """The training process of :func:`train`: its arguments as JSON on stdin."""
    job = json.loads(sys.stdin.read())
    stages = tuple(Stage(**stage) for stage in job["stages"])
    _train(Path(job["target"]), stages=stages, seed=job["seed"])


def _train(target: Path, *, stages: tuple[Stage, ...], seed: int) -> dict[str, Any]:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from benchmarks.harness import Timer, pinned_threads, seeded
    from hf_ext.assets import build_progress

    sources = stdlib_sources()
    text = b"\n".join(sources["train"].values())
    data = torch.frombuffer(bytearray(text), dtype=torch.uint8).long()
    held_out = b"\n".join(sources["held_out"].values())
    with pinned_threads(THREADS), seeded(seed), Timer() as wall:
        config = LlamaConfig(**ARCH)
        config._attn_implementation = "sdpa"
        lm = LlamaForCausalLM(config)
        generator = torch.Generator().manual_seed(seed)
        losses = []
        lm.train()
        bar = build_progress(f"training {NAME} (once)", total=sum(stage.steps for stage in stages))
        for k, stage in enumerate(stages):
            opt = _optimizer(lm)
            for step in range(stage.steps):
                if k == 0 and step < COPY_STEPS:
                    x = _copy_batch(generator, stage.batch, stage.seq)
                else:
                    x = _batch(data, generator, stage.batch, stage.seq)
                for group in opt.param_groups:
                    group["lr"] = stage.lr_at(step)
                logits = lm(input_ids=x[:, :-1]).logits
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), x[:, 1:].reshape(-1))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(lm.parameters(), 1.0)
                opt.step()
                losses.append(loss.item())
                bar.update()
                if step % 40 == 0:
                    lm.eval()
                    check = induction_check(lm, held_out)
                    lm.train()
                    logger.info(
                        "stage %d step %d loss %.3f induction %.3f", k, step, loss.item(), check["ratio"]
                    )
        bar.close()
        lm.eval()
        report = _evaluate(lm, held_out)
    recipe = {
        "recipe_sha256": recipe_sha256(stages, seed),
        "python": sys.version.split()[0],
        "seed": seed,
        "stages": [asdict(stage) for stage in stages],
        "tokens": sum(stage.steps * stage.batch * stage.seq for stage in stages),
        "threads": THREADS,
        "train_bytes": int(data.numel()),
        "train_sha256": hashlib.sha256(text).hexdigest(),
        "held_out_files": len(sources["held_out"]),
        "arch": ARCH,
        "numerics": NUMERICS,
        "wall_seconds": wall.seconds,
        "final_train_loss": sum(losses[-20:]) / 20,
        **report,
    }
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    lm.save_pretrained(staging)
    (staging / "recipe.json").write_text(json.dumps(recipe, indent=1))
    from hf_ext.assets import write_manifest

    write_manifest(staging)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return recipe


def other_training_text(target: Path) -> str | None:
    """Why this Python's standard library is not the text the build in ``target`` was trained on (its
    ``recipe.json`` records the text's SHA-256, or in older builds its length and held-out file count), or
    ``None``. The text is not part of the recipe hash: a build stays valid on any Python, but only the same
    text rebuilds the same bytes."""
    recipe = json.loads((target / "recipe.json").read_text())
    sources = stdlib_sources()
    text = b"\n".join(sources["train"].values())
    if "train_sha256" in recipe:
        if hashlib.sha256(text).hexdigest() != recipe["train_sha256"]:
            return "this standard library's training text has another SHA-256 than the build's"
        return None
    here = (len(text), len(sources["held_out"]))
    built = (recipe["train_bytes"], recipe["held_out_files"])
    if here != built:
        return (
            f"this standard library gives {here[0]} bytes of training text and {here[1]} held-out files; "
            f"the build was trained on {built[0]} and {built[1]}"
        )
    return None


def stale_recipe(target: Path) -> str | None:
    """Why the build in ``target`` is not this module's recipe (its ``recipe.json`` holds another recipe
    hash), or ``None``."""
    recipe = json.loads((target / "recipe.json").read_text())
    if recipe.get("recipe_sha256") != recipe_sha256():
        return "built from another recipe (recipe.json holds another recipe hash)"
    return None


def byte_llama_path() -> Path:
    """Folder of the trained model: the shipped build, checked against its manifest and this module's recipe.

    When the recipe has changed since the shipped build, the model is trained into the cache (about 13 minutes
    on two cores, with a progress bar) and that folder is returned.

    Raises:
        RuntimeError: a shipped file fails its SHA-256 check (a damaged checkout; restore it with
            ``git checkout benchmarks/vegas/byte_llama``).
    """
    from hf_ext.assets import build_lock, cache_dir, verify_manifest

    damaged = verify_manifest(SHIPPED)
    if damaged:
        raise RuntimeError(
            f"the shipped {NAME} at {SHIPPED} is damaged ({damaged}); "
            f"restore it with `git checkout {SHIPPED}`"
        )
    if stale_recipe(SHIPPED) is None:
        return SHIPPED
    target = cache_dir() / NAME
    with build_lock(NAME):
        problem = verify_manifest(target) if target.exists() else "not built yet"
        problem = problem or stale_recipe(target)
        if problem:
            logger.warning("training %s into %s (%s)", NAME, target, problem)
            train(target)
    return target


def byte_llama() -> tuple[Any, dict[str, Any]]:
    """``(LlamaForCausalLM in eval mode, fp32, recipe dict)`` of the model at :func:`byte_llama_path`."""
    from transformers import LlamaForCausalLM

    path = byte_llama_path()
    lm = LlamaForCausalLM.from_pretrained(path).eval()
    return lm, json.loads((path / "recipe.json").read_text())
