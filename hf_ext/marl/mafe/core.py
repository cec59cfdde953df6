"""Simulation core shared by the MAFE-style environments (numpy-vectorised, no loop over individuals).

**[reconstructed]** The population model, observation layout, component keys and the regulator agent are
hf-ext choices in the formalism of the paper's Fair Dec-POMDP
``<N, S, {A_n}, {O_n}, T, gamma, {c_R}, {c_F}>``: ``N`` = ``possible_agents``, ``A_n``/``O_n`` = the spaces,
``S`` = ``state()``, ``T`` = ``step``,
``c_R``/``c_F`` = ``infos[agent]["reward_components"]`` / ``["fairness_components"]``; gamma is the learner's.

Fairness components (per step, every agent; float, never NaN):

- ``rate/<g>``: positive decisions / sampled members of group ``g``; ``tpr/<g>``: the same among the
  qualified; ``mean_level/<g>``: population mean level of ``g``;
- ``dp_gap``, ``eo_gap``, ``level_gap``: max - min of the above over non-empty groups (0.0 with < 2);
- ``own/rate/<g>``, ``own/dp_gap``, ``own/eo_gap``: the same over the agent's own decisions (a bank's own
  applicants, a hospital's own patients, ...), for agents that decide about individuals.

Groups with no sampled member report rate 0.0, are left out of the gaps and listed in
``infos[agent]["empty_groups"]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hf_ext.metrics.functional.fairness import _group_gap_compute, _group_rate_compute, _group_stats_update

REGULATOR = "regulator_0"
INTENSITIES = np.array([0.0, 0.25, 0.5, 0.75, 1.0])


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
    decisions: np.ndarray, groups: np.ndarray, score: np.ndarray, min_rate: float, num_groups: int
) -> np.ndarray:
    """Raise every group's positive rate to at least ``min_rate`` by adding its top-``score`` negatives.

    Returns:
        ``(n,)`` bool decisions (a superset of ``decisions``).
    """
    if min_rate <= 0:
        return decisions
    counts = np.bincount(groups, minlength=num_groups)
    pos = np.bincount(groups, weights=decisions, minlength=num_groups)
    need = np.maximum(np.ceil(min_rate * counts - 1e-9) - pos, 0)
    cand = ~decisions
    ranks = rank_within(groups[cand], score[cand], num_groups)
    out = decisions.copy()
    out[np.flatnonzero(cand)[ranks < need[groups[cand]]]] = True
    return out


def select_by_capacity(
    eligible: np.ndarray, bucket: np.ndarray, priority: np.ndarray, capacity: np.ndarray
) -> np.ndarray:
    """Pick eligible individuals by descending ``priority`` up to ``capacity[bucket]`` per bucket.

    Returns:
        ``(n,)`` bool selection.
    """
    idx = np.flatnonzero(eligible)
    ranks = rank_within(bucket[idx], priority[idx], len(capacity))
    out = np.zeros(len(eligible), dtype=bool)
    out[idx[ranks < capacity[bucket[idx]]]] = True
    return out


@dataclass
class StepOutcome:
    """What an environment's dynamics return for one step (sampled individuals only).

    Attributes:
        reward_components: agent -> {component: float}.
        groups: ``(n,)`` group of each sampled individual.
        decisions: ``(n,)`` bool primary positive decision (approval, care access, hiring).
        qualified: ``(n,)`` bool qualification for ``tpr``.
        own: Own-decision sets, each ``(agents, bucket, decisions, qualified)``: ``bucket`` ``(n,)`` int gives
            the index into ``agents`` deciding about each sampled individual (-1: none of them), or is
            ``None`` when the single agent of ``agents`` decides about everyone.
    """

    reward_components: dict[str, dict[str, float]]
    groups: np.ndarray
    decisions: np.ndarray
    qualified: np.ndarray
    own: list[tuple[list[str], np.ndarray | None, np.ndarray, np.ndarray]]


def fairness_stats(out: StepOutcome, level_sums: np.ndarray, level_counts: np.ndarray) -> tuple:
    """Per-group means and gaps of all fairness components of one step, in one batch.

    Rows: ``[rate_0 .. rate_{S-1}, tpr_0 .. tpr_{S-1}, mean_level]`` where set 0 is the global decision set
    and
    set ``s >= 1`` belongs to ``owners[s]`` (its own decisions). Uses the same ``_group_stats_update`` /
    ``_group_rate_compute`` / ``_group_gap_compute`` as :mod:`hf_ext.metrics.functional.fairness`, with
    composite ids ``set * G + group``.

    Args:
        out: The step's outcome.
        level_sums, level_counts: ``(G,)`` population level sums and group sizes.

    Returns:
        ``(owners, means (2S+1, G), counts (2S+1, G), gaps (2S+1,))``.
    """
    g = len(level_sums)
    owners: list[str | None] = [None]
    keys, dec, qual = [out.groups], [out.decisions], [out.qualified]
    for agents, bucket, d, q in out.own:
        if bucket is None:
            keys.append(len(owners) * g + out.groups)
            dec.append(d)
            qual.append(q)
        else:
            valid = bucket >= 0
            keys.append((len(owners) + bucket[valid]) * g + out.groups[valid])
            dec.append(d[valid])
            qual.append(q[valid])
        owners.extend(agents)
    n_sets = len(owners)
    k, d, q = np.concatenate(keys), np.concatenate(dec), np.concatenate(qual)
    rs, rc = _group_stats_update(d, k, n_sets * g)
    ts, tc = _group_stats_update(d, k, n_sets * g, q)
    sums = np.concatenate([rs, ts, level_sums]).reshape(2 * n_sets + 1, g)
    counts = np.concatenate([rc, tc, level_counts]).reshape(2 * n_sets + 1, g)
    return owners, _group_rate_compute(sums, counts), counts, _group_gap_compute(sums, counts)
