"""docs/scaling.md's recipes: the shipped accelerate configs load, and torchrun runs the example script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hf_ext.testing import requires

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "examples" / "accelerate").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_accelerate_config_loads(path):
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(path))
    assert config.num_processes >= 1
    ds_file = (config.deepspeed_config or {}).get("deepspeed_config_file")
    if ds_file:
        assert json.loads((ROOT / ds_file).read_text())["zero_optimization"]["stage"] == 2


def test_every_documented_config_ships():
    text = (ROOT / "docs" / "scaling.md").read_text()
    assert CONFIGS and all(f"examples/accelerate/{p.name}" in text for p in CONFIGS)


@pytest.mark.slow
@requires("trl")
@pytest.mark.distributed
def test_torchrun_runs_the_example_on_two_cpu_processes(tmp_path):
    torchrun = Path(sys.executable).with_name("torchrun")
    cmd = [str(torchrun), "--nproc-per-node", "2", str(ROOT / "examples" / "train_camp.py")]
    cmd += ["--max-steps", "2", "--output-dir", str(tmp_path / "out")]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "world size 2" in run.stdout
