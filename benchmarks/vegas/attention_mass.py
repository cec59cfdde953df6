"""How much of the next draft's attention each selection keeps: the benchmark's count behind alpha.

A sparse draft is accepted when its output matches the full model's, which it does when the entries it reads
carry (nearly) all of each head's softmax mass. This module replays one Vegas iteration on real text with the
full model's own queries and keys: the verify chunk ``[b, y_1..y_gamma]`` occupies positions
``N-1 .. N-1+gamma`` (its first and last rows score the selection over ``[0, N)``), and the next draft's
queries sit at ``N+gamma .. N+2*gamma-1`` (all drafts accepted). For each draft query, head and row it
sums the full softmax weights that fall on the selection plus the dense tail ``[N, pos]``.

Selections, all at the Vegas budget ``k``:

* ``vegas``: top-``k`` of the verify rows' weights averaged over heads and rows [paper];
* ``vegas, per KV head``: the same scores, top-``k`` per KV head (a diagnostic variant, not the paper's);
* ``sink+window``: the first 16 positions plus the last ``W`` of ``[0, N)``;
* ``per-step top-k``: each draft query's own top-``k`` per head (what Quest's per-step page bound
  approximates; an upper bound for any selection of ``k`` entries).
"""

from __future__ import annotations

from typing import Any

import torch

from hf_ext.vegas.config import VegasConfig
from hf_ext.vegas.core import budget, streamingllm_indices, vegas_indices

CAPTURE_KEY = "hf_ext_vegas_capture"


def _capture(lm: Any, ids: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Post-RoPE ``(query [B, H_q, T, D], key [B, H_kv, T, D])`` of every layer, one forward over ``ids``."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from hf_ext.vegas.attention import attention_implementation

    store: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def capture(module: Any, query: torch.Tensor, key: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        store[module.layer_idx] = (query, key)
        return sdpa_attention_forward(module, query, key, *args, **kwargs)

    AttentionInterface.register(CAPTURE_KEY, capture)
    with attention_implementation(lm, CAPTURE_KEY), torch.no_grad():
        lm(ids, use_cache=False, logits_to_keep=1)
    return [store[i] for i in sorted(store)]


def attention_mass(
    lm: Any, prompt: torch.Tensor, config: VegasConfig | None = None
) -> dict[str, dict[str, float]]:
    """Mean softmax mass the next draft's queries keep under each selection (module docstring).

    Args:
        lm: A transformers causal LM of global attention layers.
        prompt: ``[B, N]`` token ids.
        config: Budget (``sparse_ratio``, ``min_tokens``), ``num_draft_tokens`` and the window's
            ``sink_tokens``/``page_size``; defaults to ``VegasConfig()``.

    Returns:
        Per selection: ``mean`` (over layers, draft steps, rows and query heads) and ``worst_head`` (the mean
        over layers, steps and rows of the smallest head's mass).
    """
    cfg = config or VegasConfig()
    g, (b, n) = cfg.num_draft_tokens, prompt.shape
    with torch.no_grad():
        seq = lm.generate(prompt, max_new_tokens=2 * g + 1, do_sample=False)
    k = budget(n + g, n, cfg.sparse_ratio, cfg.min_tokens, n + 2 * g + 1)
    window = streamingllm_indices(n, n + g, cfg.sparse_ratio, cfg.min_tokens, cfg.sink_tokens, cfg.page_size)
    masses: dict[str, list[torch.Tensor]] = {}
    for query, key in _capture(lm, seq[:, : n + 2 * g]):
        query, key, scale = query.float(), key.float(), query.shape[-1] ** -0.5
        h, rep = query.shape[1], query.shape[1] // key.shape[1]
        chunk = query[:, :, n - 1 : n + g]  # the verify's rows [b, y_1..y_gamma]
        shared = vegas_indices(chunk, key[:, :, : n + g], last=[g] * b, valid_len=[n] * b, budgets=[k] * b,
                               scale=scale, mode=cfg.score_mode, backend="torch")  # fmt: skip
        key = key.repeat_interleave(rep, dim=1)
        logits = chunk[:, :, [0, g]] @ key[:, :, : n + g].transpose(-1, -2) * scale
        logits[:, :, 0, n:] = float("-inf")  # the first row sees [0, N)
        w = torch.softmax(logits, dim=-1)[..., :n].mean(dim=2)  # [B, H_q, N]
        per_kv = w.view(b, -1, rep, n).mean(dim=2).topk(k, dim=-1).indices.repeat_interleave(rep, dim=1)
        selections = {
            "vegas": shared[:, None].expand(-1, h, -1),
            "vegas, per KV head": per_kv,
            "sink+window": window[None, None].expand(b, h, -1),
        }
        for step in range(g):
            pos = n + g + step
            p = torch.softmax(query[:, :, pos : pos + 1] @ key[:, :, : pos + 1].transpose(-1, -2) * scale, -1)
            p = p[:, :, 0]  # [B, H, pos + 1]
            tail = p[..., n:].sum(-1)
            kept = {name: p.gather(-1, idx).sum(-1) for name, idx in selections.items()}
            kept["per-step top-k"] = p[..., :n].topk(k, dim=-1).values.sum(-1)
            for name, m in kept.items():
                masses.setdefault(name, []).append(m + tail)
    out = {}
    for name, ms in masses.items():
        m = torch.stack(ms)  # [layers * steps, B, H]
        out[name] = {"mean": float(m.mean()), "worst_head": float(m.min(dim=-1).values.mean())}
    return out
