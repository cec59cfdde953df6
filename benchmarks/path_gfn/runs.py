"""One training run of the benchmark per spec: build the task and policy, train, evaluate exactly."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from typing import Any

import torch

from benchmarks.harness import Timer, pinned_threads, progress, seeded
from hf_ext.path_gfn.backward import UniformBackward
from hf_ext.path_gfn.envs import BitSequence, DiscreteEnv, HyperGrid
from hf_ext.path_gfn.eval import exact_terminal_distribution, l1_to_target, modes_found
from hf_ext.path_gfn.losses import DetailedBalance, SubTrajectoryBalance, TrajectoryBalance
from hf_ext.path_gfn.memory import RSRWM, GRUMemory, MarkovMemory, Memory
from hf_ext.path_gfn.policy import LiftedPolicy
from hf_ext.path_gfn.trainer import GFNTrainer

SYSTEMS = {"markov": "Markov MLP", "gru": "PD-GRU", "rsrwm": "PD-RSRWM"}
LOSSES = {"TB": TrajectoryBalance, "DB": DetailedBalance, "SubTB": SubTrajectoryBalance}
RSRWM_DIM = 32  # d x d = 1024 carried values; d = 64 is 4x the cost per step on two cores


@dataclass(frozen=True)
class RunSpec:
    """One run: ``task`` is ``"bits"`` (length ``size``) or ``"grid"`` (height ``size``, 2-D)."""

    task: str
    size: int
    features: str  # "aliased" or "full"
    policy: str  # "markov", "gru", "rsrwm"
    loss: str  # "TB", "DB", "SubTB"
    steps: int
    evals: tuple[int, ...]
    seed: int


def make_env(task: str, size: int, features: str) -> DiscreteEnv:
    if task == "bits":
        half = size // 2  # for L != 8: two modes with equal counts of ones (aliased)
        modes = None if size == 8 else ("1" * half + "0" * (size - half), "0" * (size - half) + "1" * half)
        return BitSequence(length=size, modes=modes, features=features)
    return HyperGrid(height=size, ndim=2, features="coarse" if features == "aliased" else "full", coarsen=2)


def make_memory(policy: str) -> Memory:
    if policy == "rsrwm":
        return RSRWM(dim=RSRWM_DIM)
    return GRUMemory() if policy == "gru" else MarkovMemory()


def run_one(spec: RunSpec) -> dict[str, Any]:
    """Train one policy and return its figures (exact L1 at each of ``spec.evals``)."""
    env = make_env(spec.task, spec.size, spec.features)
    with pinned_threads(1), seeded(spec.seed):
        pf = LiftedPolicy(env.feature_dim, env.n_actions, make_memory(spec.policy))
        pb = None if env.is_tree else UniformBackward(env)
        loss = LOSSES[spec.loss](pf, pb=pb)
        trainer = GFNTrainer(env, loss, seed=spec.seed)
        out: dict[str, Any] = {**asdict(spec), "params": sum(p.numel() for p in pf.parameters())}
        train_s, done = 0.0, 0
        for k in spec.evals:
            with Timer() as t:
                trainer.train(k - done, progress_bar=False)
            train_s, done = train_s + t.seconds, k
            p = exact_terminal_distribution(env, pf)
            out[f"L1@{k}"] = l1_to_target(p, env.target())
        found, total = modes_found(p, env)
    out.update(
        logZ=float(loss.logZ.detach()),
        true_logZ=env.true_log_Z(),
        modes=found,
        n_modes=total,
        seconds=train_s,
        s_per_step=train_s / spec.steps,
    )
    return out


def uniform_l1(task: str, size: int) -> float:
    """L1 of the uniform-action policy (an untrained trivial sampler) to the target."""
    env = make_env(task, size, "full")
    pf = LiftedPolicy(env.feature_dim, env.n_actions)
    with torch.no_grad():
        for p in pf.parameters():
            p.zero_()
    return l1_to_target(exact_terminal_distribution(env, pf), env.target())


def run_all(specs: list[RunSpec], workers: int) -> list[dict[str, Any]]:
    """Every spec, longest first, on ``workers`` single-threaded processes (in this one when 1)."""
    order = sorted(specs, key=lambda s: -s.steps * (3 if s.policy != "markov" else 1) * s.size)
    if workers <= 1:
        return [run_one(s) for s in progress(order, desc="path_gfn runs", unit="run")]
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        return list(progress(pool.map(run_one, order), total=len(order), desc="path_gfn runs", unit="run"))
