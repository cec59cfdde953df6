"""Simulation core shared by the MAFE-style environments: numpy arrays over a batch of ``B`` environment
copies and their individuals, with no Python loop over agents or individuals.

**[reconstructed]** The population model, observation layout, component keys and the regulator agent are
hf-ext choices in the formalism of the paper's Fair Dec-POMDP
``<N, S, {A_n}, {O_n}, T, gamma, {c_R}, {c_F}>``: ``N`` = ``possible_agents``, ``A_n``/``O_n`` = the spaces,
``S`` = ``state()``, ``T`` = ``step``, ``c_R``/``c_F`` = ``infos[agent]["reward_components"]`` /
``["fairness_components"]``; gamma is the learner's.

Fairness components (per step, every agent; float, never NaN):

- ``rate/<g>``: positive decisions / sampled members of group ``g``; ``tpr/<g>``: the same among the
  qualified; ``mean_level/<g>``: population mean level of ``g``;
- ``dp_gap``, ``eo_gap``, ``level_gap``: max - min of the above over non-empty groups (0.0 with < 2);
- ``own/rate/<g>``, ``own/dp_gap``, ``own/eo_gap``: the same over the agent's own decisions (a bank's own
  applicants, a hospital's own patients, ...), for agents that decide about individuals.

Groups with no sampled member report rate 0.0, are left out of the gaps and listed in
``infos[agent]["empty_groups"]``; a group with members but no qualified member is left out of ``eo_gap``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from hf_ext.metrics.functional.fairness import _group_gap_compute, _group_rate_compute, _group_stats_update

REGULATOR = "regulator_0"
INTENSITIES = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
GAP_SOURCES = {"dp_gap": "rate/", "eo_gap": "tpr/", "level_gap": "mean_level/"}


def rank_within(bucket: np.ndarray, priority: np.ndarray, n_buckets: int) -> np.ndarray:
    """Rank of each element inside its bucket by descending ``priority`` (ties: lower index first).

    Args:
        bucket: ``(m,)`` int bucket ids in ``[0, n_buckets)``.
        priority: ``(m,)`` numeric priority.

    Returns:
        ``(m,)`` int ranks (0 = highest priority of its bucket). Permutation-equivariant up to ties.
    """
    order = np.lexsort((-priority, bucket))
    sorted_bucket = bucket[order]
    starts = np.searchsorted(sorted_bucket, np.arange(n_buckets))
    ranks = np.empty(len(bucket), dtype=np.int64)
    ranks[order] = np.arange(len(bucket)) - starts[sorted_bucket]
    return ranks


def apply_quota(
    decisions: np.ndarray, groups: np.ndarray, score: np.ndarray, min_rate: np.ndarray, num_groups: int
) -> np.ndarray:
    """Raise every group's positive rate to at least ``min_rate`` by adding its top-``score`` negatives.

    Args:
        decisions: ``(B, n)`` bool decisions.
        groups: ``(B, n)`` group ids.
        score: ``(B, n)`` priority of the negatives.
        min_rate: ``(B,)`` minimum positive rate per group, one value per environment copy.
        num_groups: ``G``.

    Returns:
        ``(B, n)`` bool decisions (a superset of ``decisions``).
    """
    b, n = decisions.shape
    key = (np.arange(b)[:, None] * num_groups + groups).ravel()
    counts = np.bincount(key, minlength=b * num_groups)
    pos = np.bincount(key, weights=decisions.ravel(), minlength=b * num_groups)
    need = np.maximum(np.ceil(np.repeat(min_rate, num_groups) * counts - 1e-9) - pos, 0)
    cand = ~decisions.ravel()
    ranks = rank_within(key[cand], score.ravel()[cand], b * num_groups)
    out = decisions.ravel().copy()
    out[np.flatnonzero(cand)[ranks < need[key[cand]]]] = True
    return out.reshape(b, n)


def select_by_capacity(
    eligible: np.ndarray, bucket: np.ndarray, priority: np.ndarray, capacity: np.ndarray
) -> np.ndarray:
    """Pick eligible individuals by descending ``priority`` up to ``capacity[b, bucket]`` per bucket.

    Args:
        eligible: ``(B, n)`` bool.
        bucket: ``(B, n)`` int bucket ids in ``[0, K)`` (a hospital, a group, ...).
        priority: ``(B, n)`` numeric priority.
        capacity: ``(B, K)`` places per bucket.

    Returns:
        ``(B, n)`` bool selection.
    """
    b, k = capacity.shape
    key = (np.arange(b)[:, None] * k + bucket).ravel()
    idx = np.flatnonzero(eligible.ravel())
    ranks = rank_within(key[idx], priority.ravel()[idx], b * k)
    out = np.zeros(eligible.size, dtype=bool)
    out[idx[ranks < capacity.ravel()[key[idx]]]] = True
    return out.reshape(eligible.shape)


def pick(table: np.ndarray, *index: np.ndarray) -> np.ndarray:
    """``table[rows, *index]`` with the batch row broadcast: ``table`` ``(B, ...)``, each index ``(B, n)``."""
    return table[(np.arange(len(table))[:, None], *index)]


class Sample(NamedTuple):
    """The individuals sampled in one step of ``B`` copies, each field ``(B, n)`` (``rows`` is ``(B, 1)``).

    Attributes:
        idx: Their index in the population.
        rows: ``arange(B)[:, None]``, so that ``level[rows, idx]`` reads their levels.
        groups: Their group.
        levels: Their level before the step.
        disadvantaged: Whether they belong to the group interventions target.
    """

    idx: np.ndarray
    rows: np.ndarray
    groups: np.ndarray
    levels: np.ndarray
    disadvantaged: np.ndarray


@dataclass
class StepOutcome:
    """What an environment's dynamics return for one step of ``B`` copies (sampled individuals only).

    Attributes:
        reward_components: agent -> {component: ``(B,)`` array}.
        groups: ``(B, n)`` group of each sampled individual.
        decisions: ``(B, n)`` bool primary positive decision (approval, care access, hiring).
        qualified: ``(B, n)`` bool qualification for ``tpr``.
        own: Own-decision sets, each ``(agents, bucket, decisions, qualified)``: ``bucket`` ``(B, n)`` int
            gives the index into ``agents`` deciding about each sampled individual (-1: none of them), or is
            ``None`` when the single agent of ``agents`` decides about everyone.
    """

    reward_components: dict[str, dict[str, np.ndarray]]
    groups: np.ndarray
    decisions: np.ndarray
    qualified: np.ndarray
    own: Sequence[tuple[list[str], np.ndarray | None, np.ndarray, np.ndarray]]


def fairness_stats(
    out: StepOutcome, level_sums: np.ndarray, level_counts: np.ndarray
) -> tuple[list[str | None], np.ndarray, np.ndarray, np.ndarray]:
    """Per-group means and gaps of all fairness components of one step, in one batch.

    Rows: ``[rate_0 .. rate_{S-1}, tpr_0 .. tpr_{S-1}, mean_level]``; set 0 is the global decision set and
    set ``s >= 1`` belongs to ``owners[s]`` (its own decisions). Uses the same ``_group_stats_update`` /
    ``_group_rate_compute`` / ``_group_gap_compute`` as :mod:`hf_ext.metrics.functional.fairness`, with
    composite ids ``(copy * S + set) * G + group``.

    Args:
        out: The step's outcome.
        level_sums, level_counts: ``(B, G)`` population level sums and group sizes.

    Returns:
        ``(owners, means (B, 2S+1, G), counts (B, 2S+1, G), gaps (B, 2S+1))``.
    """
    b = len(out.groups)
    g = level_sums.shape[1]
    owners: list[str | None] = [None]
    for agents, *_ in out.own:
        owners.extend(agents)
    s_ = len(owners)
    base = np.arange(b)[:, None] * s_
    keys, dec, qual = [(base * g + out.groups).ravel()], [out.decisions.ravel()], [out.qualified.ravel()]
    first = 1
    for agents, bucket, d, q in out.own:
        if bucket is None:
            keys.append(((base + first) * g + out.groups).ravel())
            dec.append(d.ravel())
            qual.append(q.ravel())
        else:
            valid = bucket >= 0
            keys.append(((base + first + bucket) * g + out.groups)[valid])
            dec.append(d[valid])
            qual.append(q[valid])
        first += len(agents)
    key, d_all, q_all = np.concatenate(keys), np.concatenate(dec), np.concatenate(qual)
    rs, rc = _group_stats_update(d_all, key, b * s_ * g)
    ts, tc = _group_stats_update(d_all, key, b * s_ * g, q_all)
    sums = np.concatenate([rs.reshape(b, s_, g), ts.reshape(b, s_, g), level_sums[:, None]], 1)
    counts = np.concatenate([rc.reshape(b, s_, g), tc.reshape(b, s_, g), level_counts[:, None]], 1)
    return owners, _group_rate_compute(sums, counts), counts, _group_gap_compute(sums, counts)


@dataclass
class Batch:
    """State of ``B`` lock-step copies of one environment.

    Attributes:
        rngs: One generator per copy (all randomness of copy ``b`` comes from ``rngs[b]``).
        level: ``(B, N)`` level of every individual.
        hist: ``(B, G, K)`` level histogram per group.
        rates: ``(B, G)`` last step's positive rate per group.
        intensity: ``(B,)`` last intervention intensity in ``[0, 1]``.
        feats: ``(B, F)`` agent-specific observation terms, agents in ``possible_agents`` order.
        t: Steps taken.
        extra: Environment-specific state arrays with a leading ``B`` axis.
    """

    rngs: list[np.random.Generator]
    level: np.ndarray
    hist: np.ndarray
    rates: np.ndarray
    intensity: np.ndarray
    feats: np.ndarray
    t: int = 0
    extra: dict[str, np.ndarray] = field(default_factory=dict)


def draw_levels(rngs: Sequence[np.random.Generator], probs: np.ndarray) -> np.ndarray:
    """Initial levels: ``(B, N)`` draws from ``probs`` ``(N, K)`` (each individual's group distribution)."""
    cdf = np.cumsum(probs, axis=1)
    u = np.stack([rng.random(len(probs)) for rng in rngs])
    return np.minimum((u[:, :, None] > cdf[None]).sum(2), probs.shape[1] - 1)


def draw_step(
    rngs: Sequence[np.random.Generator], population: int, n: int, n_uniform: int, n_normal: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One step's randomness per copy: who is sampled (without replacement) and the noise of the dynamics.

    Returns:
        ``idx (B, n)``, uniforms ``(n_uniform, B, n)`` and standard normals ``(n_normal, B, n)``.
    """
    b = len(rngs)
    idx = np.empty((b, n), dtype=np.int64)
    u, z = np.empty((n_uniform, b, n)), np.empty((n_normal, b, n))
    for i, rng in enumerate(rngs):
        idx[i] = rng.choice(population, n, replace=False, shuffle=False)
        u[:, i] = rng.random((n_uniform, n))
        if n_normal:
            z[:, i] = rng.standard_normal((n_normal, n))
    return idx, u, z


def update_histograms(hist: np.ndarray, groups: np.ndarray, before: np.ndarray, after: np.ndarray) -> None:
    """Move the sampled individuals ``(B, n)`` from their ``before`` to their ``after`` bins, in place."""
    b, g, k = hist.shape
    base = (np.arange(b)[:, None] * g + groups) * k
    delta = np.bincount((base + after).ravel(), minlength=b * g * k) - np.bincount(
        (base + before).ravel(), minlength=b * g * k
    )
    hist += delta.reshape(b, g, k)


def fairness_dicts(
    keys: dict[str, list[str]], owners: list[str | None], means: Any, gaps: Any
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The ``fairness_components`` dicts from one copy's ``means[r][g]``, ``gaps[r]`` (nested lists of floats)
    or from all copies' (then each value is a ``(B,)`` array): the global dict and one dict per owner."""
    s_ = len(owners)
    common = dict(zip(keys["mean_level"], means[-1]))
    common["level_gap"] = gaps[-1]
    common.update(zip(keys["rate"], means[0]))
    common.update(zip(keys["tpr"], means[s_]))
    common["dp_gap"], common["eo_gap"] = gaps[0], gaps[s_]
    own: dict[str, dict[str, Any]] = {}
    for s, agent in enumerate(owners[1:], start=1):
        d = dict(zip(keys["own"], means[s]))
        d["own/dp_gap"], d["own/eo_gap"] = gaps[s], gaps[s_ + s]
        own[str(agent)] = d
    return common, own


def episode_gap(values: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Gap between the groups' episode means: ``max_g - min_g`` of each group's mean over the steps where it
    was present, over the groups present at least once (0.0 with fewer than 2).

    Per-step gaps are biased upwards by sampling noise (two groups with the same policy still differ in a
    finite sample); the gap of episode means is not, so it is the fair comparison across policies.

    Args:
        values: ``(T, ..., G)`` per-step per-group values (``rate/<g>`` for ``dp_gap``, ...).
        present: ``(T, ..., G)`` bool, whether the group had members in that step.

    Returns:
        ``(...)`` gaps.
    """
    counts = present.sum(0)
    means = np.where(present, values, 0.0).sum(0) / np.maximum(counts, 1)
    return _group_gap_compute(means * counts, counts.astype(np.float64))
