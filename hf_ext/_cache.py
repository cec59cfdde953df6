"""The project's cache folder, shared by ``hf_ext.assets`` (built models, data) and the compiled kernels."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$HF_EXT_CACHE``, else ``$XDG_CACHE_HOME/hf_ext``, else ``~/.cache/hf_ext`` (created on demand)."""
    env = os.environ.get("HF_EXT_CACHE")
    root = Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hf_ext"
    root.mkdir(parents=True, exist_ok=True)
    return root
