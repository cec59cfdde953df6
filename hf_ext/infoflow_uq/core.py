"""Information-flow style confidence scores for retrieval-augmented generation: pure torch.

The paper [paper] traces, through every layer, how much each context token contributes to the answer, and
derives two confidence signals: *simulatability* (the contributions line up with the tokens' relevance to the
query) and *concentration* (the answer rests on a small set of tokens). It ranks them by AUROC against
answer correctness. The paper's exact definitions are not public; every formula below is [reconstructed]:

1. Per layer ``l``, the contribution of token ``j`` to answer position ``t`` (:func:`contribution_rows`):
   ``"attention_value_norm"`` ``sum_h a_h[t, j] * ||W_O^h v_j||`` (norm-based attribution, Kobayashi et al.
   2020), ``"attention"`` the head mean of ``a_h[t, j]``, or ``"rollout"`` (Abnar & Zuidema 2020, see
   :func:`rollout_step`).
2. Attention sinks: the rows are restricted to the context tokens and renormalised onto the simplex
   (:func:`restrict_to_context`), so mass parked on BOS or on the question does not enter the scores.
   Trace ``C`` is ``[L, n_ctx]``, rows averaged over the answer positions.
3. :func:`flow_concentration`: mean over layers of ``1 - H(c_l) / log n_ctx`` (or Gini, or top-k mass).
4. :func:`flow_simulatability`: mean over layers of ``Pearson(c_l, r)`` for a relevance vector ``r`` (or
   Spearman, or the relevance mass ``sum_j c_l[j] r_j``).
5. Context mass: renormalising onto the context throws away how much the answer reads the context at all.
   With ``context_mass`` (each layer's share on the context before renormalising), both scores weight
   layer ``l``'s value by ``m_l`` before the layer mean, so the shape and the amount enter together.
6. :func:`rank_average`: the default combination of the two scores over a set of examples.

Baselines from the same forward pass: :func:`max_probability`, :func:`predictive_entropy` and
:func:`claim_conditioned_probability` of the next-token distribution. Layers whose row holds no mass on the
context (a sliding-window layer that cannot see it) are NaN and skipped by the layer means.
"""

from __future__ import annotations

import math
import warnings

import torch
from torch import Tensor


def value_norms(values: Tensor, o_weight: Tensor, num_heads: int) -> Tensor:
    """``||W_O^h v_j||`` for every query head ``h`` and position ``j``.

    Args:
        values: ``v_proj`` outputs ``[B, T, KV * D]`` (``KV`` key-value heads of size ``D``).
        o_weight: ``o_proj.weight`` ``[hidden, H * D]``; head ``h`` owns columns ``h*D:(h+1)*D``.
        num_heads: Query heads ``H``; with grouped-query attention head ``h`` reads kv head ``h // (H / KV)``.

    Returns:
        ``[B, H, T]``, in the units of the residual stream.

    Example:
        >>> value_norms(torch.ones(1, 2, 2), torch.eye(2), num_heads=2)
        tensor([[[1., 1.],
                 [1., 1.]]])
    """
    batch, seq, width = values.shape
    head_dim = o_weight.shape[1] // num_heads
    kv_heads = width // head_dim
    v = values.reshape(batch, seq, kv_heads, head_dim).repeat_interleave(num_heads // kv_heads, dim=2)
    w = o_weight.reshape(o_weight.shape[0], num_heads, head_dim).permute(1, 2, 0)  # [H, D, hidden]
    return torch.einsum("bthd,hde->bhte", v.to(w.dtype), w).norm(dim=-1)


def contribution_rows(attn_rows: Tensor, rule: str, norms: Tensor | None = None) -> Tensor:
    """One layer's contribution rows for ``"attention"`` or ``"attention_value_norm"``.

    Args:
        attn_rows: Attention probabilities of the answer positions ``[B, H, A, T]``.
        rule: ``"attention"`` (head mean) or ``"attention_value_norm"`` (head sum weighted by ``norms``).
        norms: :func:`value_norms` ``[B, H, T]``, required by ``"attention_value_norm"``.

    Returns:
        ``[B, A, T]``, non-negative, not normalised.

    Example:
        >>> a = torch.tensor([[[[0.5, 0.5]], [[1.0, 0.0]]]])
        >>> contribution_rows(a, "attention")
        tensor([[[0.7500, 0.2500]]])
    """
    if rule == "attention":
        return attn_rows.mean(dim=1)
    if norms is None:
        raise ValueError("`norms` is required by rule='attention_value_norm'.")
    return (attn_rows * norms[:, :, None, :]).sum(dim=1)


def rollout_step(previous: Tensor, attn: Tensor, key_mask: Tensor | None = None) -> Tensor:
    """One step of attention rollout: ``R_l = A'_l R_{l-1}``, ``A'_l = rownorm(0.5 * mean_h A_l + 0.5 I)``.

    Args:
        previous: ``R_{l-1}`` ``[B, T, T]`` (the identity before the first layer).
        attn: Attention probabilities ``[B, H, T, T]``.
        key_mask: Optional ``[B, T]`` bool, False at padding; padded rows and columns are zeroed.

    Returns:
        ``R_l`` ``[B, T, T]``; row ``t`` is position ``t``'s share of every input token.

    Example:
        >>> eye = torch.eye(3).expand(1, 3, 3)
        >>> torch.equal(rollout_step(eye, eye[:, None]), eye)
        True
    """
    mean = torch.nan_to_num(attn.mean(dim=1).to(previous.dtype))
    eye = torch.eye(mean.shape[-1], dtype=mean.dtype, device=mean.device)
    if key_mask is not None:
        keep = key_mask.to(mean.dtype)
        mean = mean * keep[:, :, None] * keep[:, None, :]
        eye = eye * keep[:, :, None]
    mixed = 0.5 * mean + 0.5 * eye
    mixed = mixed / mixed.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(mixed.dtype).tiny)
    return mixed @ previous


def restrict_to_context(rows: Tensor, context_mask: Tensor) -> tuple[Tensor, Tensor]:
    """Keep the context columns of ``rows`` and renormalise each row onto the simplex.

    Args:
        rows: ``[..., T]`` non-negative contributions.
        context_mask: ``[T]`` bool, True at context tokens (``n_ctx`` of them).

    Returns:
        ``(c, mass)``: ``c`` ``[..., n_ctx]`` summing to 1 per row (NaN where the row holds no context mass)
        and ``mass`` ``[...]``, the row's share on the context before renormalising (what the sinks left).

    Example:
        >>> restrict_to_context(torch.tensor([0.5, 0.3, 0.2]), torch.tensor([False, True, True]))
        (tensor([0.6000, 0.4000]), tensor(0.5000))
    """
    ctx = rows[..., context_mask]
    total = rows.sum(dim=-1)
    mass = ctx.sum(dim=-1)
    c = ctx / mass.unsqueeze(-1)
    c = torch.where(mass.unsqueeze(-1) > 0, c, torch.full_like(c, math.nan))
    return c, mass / total.clamp_min(torch.finfo(rows.dtype).tiny)


def _layer_mean(values: Tensor, context_mass: Tensor | None = None) -> Tensor:
    """Mean over the finite layers (NaN when none is finite), each weighted by ``context_mass`` if given."""
    if context_mass is not None:
        if tuple(context_mass.shape) != tuple(values.shape):
            raise ValueError(
                f"`context_mass` must hold one share per layer, shape {tuple(values.shape)}, "
                f"got {tuple(context_mass.shape)}."
            )
        if not bool(((context_mass >= 0) & (context_mass <= 1)).all()):
            raise ValueError(f"`context_mass` must lie in [0, 1], got {context_mass.tolist()}.")
        values = values * context_mass.to(values.dtype)
    return torch.nanmean(values, dim=-1) if values.numel() else values.new_tensor(math.nan)


def flow_concentration(
    trace: Tensor, kind: str = "entropy", top_k: int = 5, context_mass: Tensor | None = None
) -> Tensor:
    """How focused the flow is, averaged over layers; 0 for uniform rows, 1 for one-hot rows.

    Args:
        trace: ``[L, n_ctx]`` rows on the simplex (NaN rows are skipped).
        kind: ``"entropy"`` (``1 - H(c_l) / log n_ctx``), ``"gini"`` (Gini coefficient scaled by
            ``n / (n - 1)``) or ``"topk_mass"`` (mass of the ``top_k`` largest entries; ``k / n`` when
            uniform).
        top_k: ``k`` of ``"topk_mass"``.
        context_mass: *optional* ``[L]`` share of each layer's raw row on the context, in ``[0, 1]``
            (:attr:`FlowTrace.context_mass`); each layer's value is multiplied by it before the mean
            [reconstructed], so the score also says how much the answer reads the context.

    Returns:
        0-d tensor in ``[0, 1]``.

    Example:
        >>> flow_concentration(torch.tensor([[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0]]))
        tensor(0.5000)
    """
    n = trace.shape[-1]
    if kind == "topk_mass":
        per_layer = trace.topk(min(top_k, n), dim=-1).values.sum(dim=-1)
    elif n == 1:
        per_layer = torch.where(trace[:, 0].isnan(), trace[:, 0], torch.ones_like(trace[:, 0]))
    elif kind == "entropy":
        entropy = -torch.special.xlogy(trace, trace).sum(dim=-1)
        per_layer = 1.0 - entropy / math.log(n)
    else:  # gini over ascending values: (2 sum_i i x_(i)) / (n sum x) - (n + 1) / n, then scaled to [0, 1]
        ranked = trace.sort(dim=-1).values
        i = torch.arange(1, n + 1, dtype=trace.dtype, device=trace.device)
        gini = 2 * (ranked * i).sum(dim=-1) / (n * ranked.sum(dim=-1)) - (n + 1) / n
        per_layer = gini * n / (n - 1)
    return _layer_mean(per_layer, context_mass)


def _ranks(x: Tensor) -> Tensor:
    """Average ranks (1-based, ties share their mean rank) along the last dimension."""
    order = x.argsort(dim=-1, stable=True)
    sorted_x = x.gather(-1, order)
    n = x.shape[-1]
    ranks = torch.empty_like(x)
    base = torch.arange(1, n + 1, dtype=x.dtype, device=x.device).expand_as(x).contiguous()
    new_group = torch.ones_like(sorted_x, dtype=torch.bool)
    new_group[..., 1:] = sorted_x[..., 1:] != sorted_x[..., :-1]
    group = new_group.cumsum(dim=-1) - 1
    sums = torch.zeros_like(x).scatter_add_(-1, group, base)
    counts = torch.zeros_like(x).scatter_add_(-1, group, torch.ones_like(base))
    ranks.scatter_(-1, order, (sums / counts.clamp_min(1)).gather(-1, group))
    return ranks


def _pearson(c: Tensor, r: Tensor) -> Tensor:
    """Row-wise Pearson correlation of ``c`` ``[L, n]`` with ``r`` ``[n]`` (NaN for a constant row)."""
    cc = c - c.mean(dim=-1, keepdim=True)
    rc = r - r.mean()
    denom = cc.norm(dim=-1) * rc.norm()
    return torch.where(denom > 0, (cc * rc).sum(dim=-1) / denom, torch.full_like(denom, math.nan))


def check_relevance(relevance: Tensor, n_ctx: int) -> Tensor:
    """Validate a relevance vector: ``[n_ctx]``, finite, non-negative."""
    if relevance.ndim != 1 or relevance.shape[0] != n_ctx:
        raise ValueError(
            f"`relevance` must have shape ({n_ctx},), one value per context token, "
            f"got {tuple(relevance.shape)}."
        )
    if not torch.isfinite(relevance).all() or (relevance < 0).any():
        raise ValueError(
            f"`relevance` must hold finite values >= 0, got minimum {relevance.min().item()!r}. "
            "Pass relevance in [0, 1] per context token."
        )
    return relevance


def flow_simulatability(
    trace: Tensor, relevance: Tensor, kind: str = "pearson", context_mass: Tensor | None = None
) -> Tensor:
    """How well the flow agrees with the context tokens' relevance to the query, averaged over layers.

    Args:
        trace: ``[L, n_ctx]`` rows on the simplex (NaN rows are skipped).
        relevance: ``[n_ctx]`` values in ``[0, 1]`` (binary gold-span labels give the point-biserial r).
        kind: ``"pearson"``, ``"spearman"`` (Pearson on average ranks) or ``"relevance_mass"``
            (``sum_j c_l[j] r_j``).
        context_mass: *optional* ``[L]`` share of each layer's raw row on the context, in ``[0, 1]``; each
            layer's value is multiplied by it before the mean [reconstructed]. With ``"relevance_mass"`` this
            is the layer-mean raw flow into the relevant tokens.

    Returns:
        0-d tensor: in ``[-1, 1]`` for correlations, ``[0, max r]`` for the mass. NaN, with a warning, when
        ``relevance`` is all zero or constant.

    Example:
        >>> c = torch.tensor([[0.1, 0.2, 0.7]])
        >>> flow_simulatability(c, torch.tensor([1.0, 2.0, 7.0]))
        tensor(1.)
    """
    r = check_relevance(relevance.to(trace.dtype), trace.shape[-1])
    if bool((r == r[0]).all()):
        warnings.warn(
            "`relevance` is constant (or all zero); simulatability is undefined and returned as NaN.",
            RuntimeWarning,
            stacklevel=2,
        )
        return trace.new_tensor(math.nan)
    if kind == "relevance_mass":
        per_layer = trace @ r
    elif kind == "spearman":
        per_layer = _pearson(_ranks(trace), _ranks(r))
    else:
        per_layer = _pearson(trace, r)
    return _layer_mean(per_layer, context_mass)


def rank_average(*scores: Tensor) -> Tensor:
    """Mean of each score's fractional rank (in ``(0, 1]``, ties averaged) over ``N`` examples.

    Args:
        *scores: ``[N]`` tensors, higher meaning more confident. NaN scores are left out of their
            score's ranking and leave that example NaN.

    Returns:
        ``[N]`` combined confidence.

    Example:
        >>> rank_average(torch.tensor([0.1, 0.9, 0.5]), torch.tensor([3.0, 2.0, 1.0]))
        tensor([0.6667, 0.8333, 0.5000])
    """
    stacked = torch.stack([s.to(torch.float64) for s in scores])
    ranks = torch.full_like(stacked, math.nan)
    for i, row in enumerate(stacked):
        finite = ~row.isnan()
        ranks[i, finite] = _ranks(row[finite]) / int(finite.sum())
    out = ranks.mean(dim=0)
    return out.to(scores[0].dtype)


def max_probability(logits: Tensor) -> Tensor:
    """Baseline: probability of the most likely next token, ``[..., V] -> [...]``."""
    return logits.float().softmax(dim=-1).amax(dim=-1)


def predictive_entropy(logits: Tensor) -> Tensor:
    """Baseline: entropy (nats) of the next-token distribution, ``[..., V] -> [...]``; lower = more sure."""
    logp = logits.float().log_softmax(dim=-1)
    return -(logp.exp() * logp).sum(dim=-1)


def claim_conditioned_probability(probabilities: Tensor, equivalence: Tensor) -> Tensor:
    """Baseline: claim-conditioned probability (CCP) of an answer token, in the style of LM-Polygraph.

    Among the next-token alternatives, the probability of those that state the greedy token's claim over
    that of those that state the same claim or another one; alternatives that state no claim (punctuation,
    a newline) are left out. [reconstructed] LM-Polygraph decides equivalence with an NLI model; here the
    caller passes it (:func:`alternative_equivalence` decides it from the alternatives' words).

    Args:
        probabilities: ``[..., K]`` probabilities of the ``K`` alternatives, the greedy token first.
        equivalence: ``[..., K]`` integers: ``1`` same claim as the greedy token, ``-1`` another claim,
            ``0`` no claim. ``equivalence[..., 0]`` must be 1.

    Returns:
        ``[...]`` in ``[0, 1]``.

    Example:
        >>> claim_conditioned_probability(torch.tensor([0.5, 0.2, 0.2, 0.1]), torch.tensor([1, 1, 0, -1]))
        tensor(0.8750)
    """
    if probabilities.shape != equivalence.shape or probabilities.ndim == 0 or probabilities.shape[-1] == 0:
        raise ValueError(
            f"`probabilities` and `equivalence` must have the same shape [..., K] with K >= 1, got "
            f"{tuple(probabilities.shape)} and {tuple(equivalence.shape)}."
        )
    if not bool(torch.isin(equivalence, equivalence.new_tensor([-1, 0, 1])).all()):
        raise ValueError(f"`equivalence` must hold -1, 0 or 1, got {equivalence.unique().tolist()}.")
    if not bool((equivalence[..., 0] == 1).all()):
        raise ValueError("`equivalence[..., 0]` must be 1: the greedy token states its own claim.")
    if not bool(torch.isfinite(probabilities).all()) or bool((probabilities < 0).any()):
        raise ValueError(
            f"`probabilities` must be finite and >= 0, got minimum {probabilities.min().item()!r}."
        )
    same = (probabilities * (equivalence == 1)).sum(dim=-1)
    other = (probabilities * (equivalence == -1)).sum(dim=-1)
    return same / (same + other).clamp_min(torch.finfo(probabilities.dtype).tiny)


def alternative_equivalence(words: list[str]) -> Tensor:
    """Label-free equivalence of next-token alternatives with the first (greedy) one, from their words.

    [reconstructed] stand-in for LM-Polygraph's NLI check on a one-word answer: a word is its letters and
    digits, lower-cased; an alternative with no such characters states no claim (0); one whose word is a
    prefix of the greedy word or extends it states the same claim (1, e.g. ``" Rome"``, ``"Rome"``,
    ``" Ro"``); any other word is another claim (-1).

    Args:
        words: The ``K`` alternatives' decoded strings, the greedy one first.

    Returns:
        ``[K]`` long tensor of 1, 0, -1 (the first is always 1).

    Example:
        >>> alternative_equivalence([" Rome", "Rome", "\\n", " Paris"])
        tensor([ 1,  1,  0, -1])
    """
    if not words:
        raise ValueError("`words` must hold at least the greedy alternative, got [].")
    norm = ["".join(ch for ch in w.lower() if ch.isalnum()) for w in words]
    greedy = norm[0]
    labels = [1]
    for w in norm[1:]:
        if not w:
            labels.append(0)
        elif greedy and (w.startswith(greedy) or greedy.startswith(w)):
            labels.append(1)
        else:
            labels.append(-1)
    return torch.tensor(labels, dtype=torch.long)


def lexical_relevance(context_ids: Tensor, query_ids: Tensor, ignore_ids: Tensor | None = None) -> Tensor:
    """A label-free relevance proxy: 1 for context tokens whose id occurs in the query, else 0.

    Args:
        context_ids: ``[n_ctx]`` token ids of the context.
        query_ids: ``[m]`` token ids of the question.
        ignore_ids: Optional ids never counted (punctuation, function words).

    Returns:
        ``[n_ctx]`` float tensor of 0/1.

    Example:
        >>> lexical_relevance(torch.tensor([5, 6, 7, 6]), torch.tensor([6, 9]))
        tensor([0., 1., 0., 1.])
    """
    hit = torch.isin(context_ids, query_ids)
    if ignore_ids is not None:
        hit &= ~torch.isin(context_ids, ignore_ids)
    return hit.float()
