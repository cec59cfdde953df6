"""Build and load the C kernels of ``hf_ext/kernels/csrc`` (CPU paths where ATen has no fast op).

:func:`load` compiles ``csrc/<name>.c`` on first use with the system C compiler (``$CC``, else ``cc``) and
OpenMP, tuned for this CPU (``-march=native``), into ``<hf_ext cache>/kernels/<name>-<key>.so``; the key
hashes the source and the shared headers (``csrc/*.h``), the flags, the compiler's version and the CPU's
feature flags, so a cache shared between machines never hands one machine another's instructions. Where no
compiler is found or the build fails, it logs why once and returns ``None``: callers fall back to their
PyTorch reference.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

SOURCES = Path(__file__).with_name("csrc")
# gnu11, not c11: ISO mode keeps a * b + c from becoming one FMA. The kernels read vector lanes as floats.
FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=gnu11", "-fno-strict-aliasing")


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return ""


def _compiler_version(cc: str) -> str:
    out = subprocess.run([cc, "--version"], capture_output=True, text=True, check=True, timeout=30)
    return out.stdout.splitlines()[0] if out.stdout else ""


@functools.cache
def load(name: str) -> ctypes.CDLL | None:
    """The compiled ``csrc/<name>.c`` as a ``ctypes.CDLL`` (built once per machine), or ``None``."""
    from hf_ext._cache import cache_dir

    cc = os.environ.get("CC") or "cc"
    source = b"\0".join(path.read_bytes() for path in [SOURCES / f"{name}.c", *sorted(SOURCES.glob("*.h"))])
    try:
        if shutil.which(cc) is None:
            raise FileNotFoundError(f"no C compiler {cc!r} on PATH")
        key = hashlib.sha256(
            b"\0".join(
                [source, " ".join(FLAGS).encode(), _compiler_version(cc).encode(), _cpu_flags().encode()]
            )
        ).hexdigest()[:16]
        target = cache_dir() / "kernels" / f"{name}-{key}.so"
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
                built = Path(tmp) / target.name
                cmd = [cc, *FLAGS, "-o", str(built), str(SOURCES / f"{name}.c"), "-lm"]
                subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=300)
                os.replace(built, target)  # atomic: concurrent builders leave one complete file
        return ctypes.CDLL(str(target))
    except (OSError, subprocess.SubprocessError) as err:
        detail = getattr(err, "stderr", "") or err
        logger.warning("hf_ext kernel %r not built (%s); using the PyTorch reference.", name, detail)
        return None


def call(fn: Any, *args: Any) -> int:
    """Call a function of a compiled kernel: a tensor passes its data pointer (the caller keeps it alive for
    the call), an int or bool passes as int64, a float as float32. Returns the C function's int result."""

    def convert(a: Any) -> Any:
        if isinstance(a, bool | int):
            return ctypes.c_int64(int(a))
        if isinstance(a, float):
            return ctypes.c_float(a)
        return ctypes.c_void_p(a.data_ptr())

    return int(fn(*(convert(a) for a in args)))
