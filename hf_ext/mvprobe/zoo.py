"""``make_model_zoo``: a zoo of small networks fine-tuned from one ancestor on sklearn's digits (offline).

All members of a block train at once: their parameters are stacked, and one batched forward (``bmm``,
convolutions as im2col) and one Adam step update every member per iteration (each member with its own batch,
learning rate and step count), so a zoo of a few hundred MLPs builds in seconds on a CPU. Blocks
(``block_size``) draw their batches from their own seeded streams, so they train in parallel over joblib
workers (``n_jobs``) with the same result as one after the other.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from hf_ext._validation import check_n_jobs
from hf_ext.mvprobe.config import ModelZooConfig

LAYERS = {"mlp": "2.weight", "cnn": "3.weight"}
HEADS = {"mlp": "4", "cnn": "7"}


def build_member(arch: str) -> Any:
    """A fresh zoo network: ``"mlp"`` 64-64-64-10 or ``"cnn"`` (conv 1-8-16 on 8x8 images, linear 256-10)."""
    from torch import nn

    if arch == "mlp":
        return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    return nn.Sequential(
        nn.Unflatten(1, (1, 8, 8)),
        nn.Conv2d(1, 8, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(256, 10),
    )


def _digits(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    order = np.random.RandomState(seed).permutation(len(X))
    X, y = (X[order] / 16.0).astype(np.float32), y[order]
    cut = int(0.75 * len(X))
    return X[:cut], y[:cut], X[cut:], y[cut:]


def _forward(arch: str, p: dict[str, Any], x: Any) -> Any:
    """Logits ``(M, B, 10)`` of ``M`` stacked members on their own inputs ``x`` ``(M, B, 64)``; the same
    network as :func:`build_member`, batched over members (``bmm``, convolutions as im2col + ``bmm``)."""
    import torch
    from torch.nn import functional as F

    if arch == "mlp":
        h = torch.relu(torch.baddbmm(p["0.bias"][:, None], x, p["0.weight"].transpose(1, 2)))
        h = torch.relu(torch.baddbmm(p["2.bias"][:, None], h, p["2.weight"].transpose(1, 2)))
        return torch.baddbmm(p["4.bias"][:, None], h, p["4.weight"].transpose(1, 2))
    m, b = x.shape[:2]
    h = x.reshape(m * b, 1, 8, 8)
    for name in ("1", "3"):  # convolution as im2col + bmm, one weight per member
        w = p[f"{name}.weight"]  # (M, C_out, C_in, 3, 3)
        cols = (
            F.unfold(h, 3, padding=1).view(m, b, -1, 64).permute(0, 2, 1, 3).flatten(2)
        )  # (M, C_in*9, B*64)
        out = torch.baddbmm(p[f"{name}.bias"][:, :, None], w.flatten(2), cols)  # (M, C_out, B*64)
        h = F.relu(out.view(m, -1, b, 64).transpose(1, 2).reshape(m * b, -1, 8, 8))
    h = F.max_pool2d(h, 2).reshape(m, b, -1)  # (M, B, 16*4*4), channel-major per member
    return torch.baddbmm(p["7.bias"][:, None], h, p["7.weight"].transpose(1, 2))


def _train(
    arch: str, params: dict[str, Any], X: Any, y: Any, allowed: Any, lr: Any, steps: Any, batch: int, gen: Any
) -> dict[str, Any]:
    """Adam on stacked parameters ``(M, ...)``; member ``m`` samples rows where ``allowed[m]`` and stops
    after ``steps[m]`` updates (members are visited longest-first, so each step trains a prefix)."""
    import torch
    from torch.nn import functional as F

    order = torch.argsort(steps, descending=True, stable=True)
    params = {k: v[order].detach().clone() for k, v in params.items()}
    allowed, lr, steps = allowed[order], lr[order], steps[order]
    m1 = {k: torch.zeros_like(v) for k, v in params.items()}
    m2 = {k: torch.zeros_like(v) for k, v in params.items()}
    b1, b2, eps = 0.9, 0.999, 1e-8
    for t in range(1, int(steps.max()) + 1 if len(steps) else 1):
        k_t = int((steps >= t).sum())
        sub = {k: v[:k_t].detach().requires_grad_(True) for k, v in params.items()}
        idx = torch.multinomial(allowed[:k_t], batch, replacement=True, generator=gen)  # (k_t, batch)
        logits = _forward(arch, sub, X[idx])
        loss = F.cross_entropy(logits.flatten(0, 1), y[idx].flatten(), reduction="sum") / batch
        grads = torch.autograd.grad(loss, list(sub.values()))
        with torch.no_grad():
            for k, g in zip(sub, grads, strict=True):
                mk1, mk2 = m1[k][:k_t], m2[k][:k_t]
                mk1.mul_(b1).add_((1 - b1) * g)
                mk2.mul_(b2).add_((1 - b2) * g * g)
                update = (mk1 / (1 - b1**t)) / ((mk2 / (1 - b2**t)).sqrt() + eps)
                params[k][:k_t] -= lr[:k_t].view((-1,) + (1,) * (g.dim() - 1)) * update
    inverse = torch.argsort(order)
    return {k: v[inverse] for k, v in params.items()}


def _train_block(
    state: Any,
    arch: str,
    params: dict[str, Any],
    X: Any,
    y: Any,
    allowed: Any,
    lr: Any,
    steps: Any,
    batch: int,
) -> dict[str, Any]:
    """:func:`_train` on one block of members, sampling from a generator restored from ``state``."""
    import torch

    gen = torch.Generator()
    gen.set_state(state)
    return _train(arch, params, X, y, allowed, lr, steps, batch, gen)


def _build(cfg: ModelZooConfig, n_jobs: int | None) -> dict[str, np.ndarray]:
    import torch
    from joblib import Parallel, delayed

    Xtr, ytr, Xte, yte = _digits(cfg.random_state)
    rng = np.random.RandomState(cfg.random_state)
    n = cfg.n_models
    subsets = np.stack([np.sort(rng.choice(10, cfg.classes_per_model, replace=False)) for _ in range(n)])
    lo, hi = np.log(cfg.lr_range)
    lr = np.exp(rng.uniform(float(lo), float(hi), size=n))
    steps = rng.randint(cfg.finetune_steps[0], cfg.finetune_steps[1] + 1, size=n)
    gen = torch.Generator().manual_seed(cfg.random_state)
    X, y = torch.from_numpy(Xtr), torch.from_numpy(ytr).long()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.random_state)
        net = build_member(cfg.arch)
        ancestor = {k: v.detach()[None] for k, v in net.named_parameters()}
        every = torch.ones(1, len(X))
        ancestor = _train(
            cfg.arch,
            ancestor,
            X,
            y,
            every,
            torch.tensor([1e-3]),
            torch.tensor([cfg.ancestor_steps]),
            cfg.batch_size,
            gen,
        )
        params = {k: v.expand(n, *v.shape[1:]).clone() for k, v in ancestor.items()}
        head = HEADS[cfg.arch]
        for m in range(n):  # a freshly initialised head per member
            fresh = torch.nn.Linear(params[f"{head}.weight"].shape[2], 10)
            params[f"{head}.weight"][m], params[f"{head}.bias"][m] = (
                fresh.weight.detach(),
                fresh.bias.detach(),
            )
    allowed = torch.from_numpy((subsets[:, :, None] == ytr[None, None, :]).any(axis=1)).float()
    lr_t, steps_t = torch.from_numpy(lr).float(), torch.from_numpy(steps)
    blocks = [slice(i, i + (cfg.block_size or n)) for i in range(0, n, cfg.block_size or n)]
    if len(blocks) == 1:  # one block continues the ancestor's stream
        states = [gen.get_state()]
    else:
        seeds = np.random.SeedSequence(cfg.random_state).spawn(len(blocks))
        states = [torch.Generator().manual_seed(int(s.generate_state(1)[0])).get_state() for s in seeds]
    jobs = (
        delayed(_train_block)(
            state,
            cfg.arch,
            {k: v[b] for k, v in params.items()},
            X,
            y,
            allowed[b],
            lr_t[b],
            steps_t[b],
            cfg.batch_size,
        )
        for b, state in zip(blocks, states, strict=True)
    )
    trained = Parallel(n_jobs=n_jobs)(jobs)
    params = {k: torch.cat([t[k] for t in trained]) for k in params}
    with torch.no_grad():
        logits = _forward(cfg.arch, params, torch.from_numpy(Xte)[None].expand(n, -1, -1))  # (n, N_te, 10)
    pred = logits.argmax(-1).numpy()
    in_subset = (subsets[:, :, None] == yte[None, None, :]).any(axis=1)
    accuracy = np.array([np.mean(pred[m][in_subset[m]] == yte[in_subset[m]]) for m in range(n)])
    out = {f"param.{k}": v.detach().numpy() for k, v in params.items()}
    out.update({f"ancestor.{k}": v[0].detach().numpy() for k, v in ancestor.items()})
    out.update(subsets=subsets, lr=lr, steps=steps, accuracy=accuracy)
    return out


def make_model_zoo(
    n_models: int = 300,
    *,
    arch: str = "mlp",
    dataset: str = "digits",
    task: str = "subset",
    classes_per_model: int = 5,
    finetune_steps: tuple[int, int] = (100, 300),
    lr_range: tuple[float, float] = (3e-4, 3e-3),
    ancestor_steps: int = 400,
    block_size: int | None = None,
    cache_dir: str | Path | None = None,
    random_state: int = 0,
    n_jobs: int | None = None,
) -> Any:
    """Train (or load from ``cache_dir``) a zoo of networks sharing one ancestor (``make_*`` style).

    Args:
        n_models: Number of members; the other settings are those of
            :class:`~hf_ext.mvprobe.config.ModelZooConfig`.
        arch: ``"mlp"`` or ``"cnn"``.
        dataset: ``"digits"``.
        task: ``"subset"``, ``"accuracy"`` or ``"lr"`` (what ``targets`` holds).
        classes_per_model: Digits per fine-tuning subset.
        finetune_steps: Inclusive range of fine-tuning steps.
        lr_range: Log-uniform range of fine-tuning learning rates.
        ancestor_steps: Adam steps of the ancestor.
        block_size: Members per training block, each with its own batch stream; ``None`` = one block.
        random_state: Seed of the whole zoo.
        n_jobs: joblib workers over the blocks (``None`` = one, ``-1`` = every core); the zoo does not
            depend on it.
        cache_dir: Folder for a ``.npz`` keyed by the settings (``hf_ext.assets.cache_dir() / "mvprobe"``);
            ``None`` builds without caching.

    Returns:
        A ``Bunch`` with ``weights`` ``(n, d_H, d_W)`` float32 (the probed layer, conv kernels flattened to
        ``(out, in*k*k)``), ``targets`` (``(n, 10)`` multi-hot for ``"subset"``, ``(n,)`` floats otherwise),
        ``subsets`` ``(n, classes_per_model)``, ``hparams`` (``lr``, ``steps``, ``accuracy``), ``layer``,
        ``ancestor_state_dict``, ``state_dicts`` (one dict of tensors per member, usable as ``X`` with
        ``layer``) and ``config``.

    >>> zoo = make_model_zoo(n_models=4, finetune_steps=(2, 3), ancestor_steps=5)
    >>> zoo.weights.shape, zoo.targets.shape, zoo.layer
    ((4, 64, 64), (4, 10), '2.weight')
    """
    import torch
    from sklearn.utils import Bunch

    cfg = ModelZooConfig(
        n_models,
        arch,
        dataset,
        task,
        classes_per_model,
        finetune_steps,
        lr_range,
        ancestor_steps,
        random_state=random_state,
        block_size=block_size,
    )
    n_jobs = check_n_jobs("n_jobs", n_jobs)
    # what the zoo depends on; one block is the zoo of earlier releases, whose cached files stay valid
    key = {k: v for k, v in asdict(cfg).items() if k != "task" and not (k == "block_size" and v is None)}
    path = None
    if cache_dir is not None:
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
        path = Path(cache_dir) / f"zoo_{arch}_{n_models}_{digest}.npz"
    if path is not None and path.exists():
        with np.load(path) as f:
            data = dict(f)
    else:
        data = _build(cfg, n_jobs)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp.npz")
            np.savez(tmp, **data)  # type: ignore[arg-type]
            tmp.replace(path)
    layer = LAYERS[arch]
    names = [k[len("param.") :] for k in data if k.startswith("param.")]
    weights = data[f"param.{layer}"].reshape(n_models, data[f"param.{layer}"].shape[1], -1)
    multi_hot = np.zeros((n_models, 10), dtype=int)
    np.put_along_axis(multi_hot, data["subsets"], 1, axis=1)
    targets = {"subset": multi_hot, "accuracy": data["accuracy"], "lr": np.log10(data["lr"])}[task]
    return Bunch(
        weights=np.ascontiguousarray(weights),
        targets=targets,
        subsets=data["subsets"],
        hparams={"lr": data["lr"], "steps": data["steps"], "accuracy": data["accuracy"]},
        layer=layer,
        ancestor_state_dict={k: torch.from_numpy(data[f"ancestor.{k}"]) for k in names},
        state_dicts=[{k: torch.from_numpy(data[f"param.{k}"][m]) for k in names} for m in range(n_models)],
        config=cfg,
    )
