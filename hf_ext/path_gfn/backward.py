"""Backward policies ``p_B(s_t | s_{t+1})`` that stay valid on non-tree DAGs [reconstructed].

Validity: run backward from ``x``, ``p_B`` must be a normalised distribution over the complete
trajectories ending at ``x`` (``sum_{tau -> x} prod_t p_B = 1``). A fixed rule
(:class:`UniformBackward`), any learned function of ``s_{t+1}`` alone (:class:`MarkovBackward`, aliased
features included) and a memory unrolled backward from ``x`` (:class:`SuffixMemoryBackward`, TB only)
satisfy it. Conditioning on the *forward* memory ``W_t`` does not: ``W_t`` is a function of the prefix,
which the backward process has not generated yet.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from hf_ext._registry import paper
from hf_ext._validation import check_int
from hf_ext.path_gfn.core import masked_log_softmax, step_mask
from hf_ext.path_gfn.envs import DiscreteEnv
from hf_ext.path_gfn.memory import GRUMemory
from hf_ext.path_gfn.sampling import Trajectories

__all__ = ["UniformBackward", "MarkovBackward", "SuffixMemoryBackward", "check_backward"]


def _children(traj: Trajectories) -> Tensor:
    """``s_{t+1}`` for every transition: ``[B, T, state_dim]``."""
    return traj.states[:, 1:]


class UniformBackward(nn.Module):
    """``log p_B(s_t | s_{t+1}) = -log |Par(s_{t+1})|``.

    Args:
        env: The environment (kept for symmetry with the learned backward policies).
    """

    _paper = paper("path_gfn")

    def __init__(self, env: DiscreteEnv | None = None) -> None:
        super().__init__()
        self.env = env

    def log_prob(self, env: DiscreteEnv, traj: Trajectories) -> Tensor:
        """``[B, T]``, 0 at padded steps."""
        child = _children(traj)
        n = env.n_parents(child.flatten(0, 1)).view(child.shape[:2]).clamp(min=1)
        return torch.where(step_mask(traj.lengths, n.shape[1]), -n.float().log(), 0.0)


class MarkovBackward(nn.Module):
    """A learned ``p_B(. | s_{t+1})``: an MLP on ``psi(s_{t+1})`` over the valid backward actions.

    Args:
        feature_dim: Width of the environment's features.
        n_actions: Number of (backward) actions.
        hidden: Width of the 2-hidden-layer ReLU MLP.
    """

    _paper = paper("path_gfn")

    def __init__(self, feature_dim: int, n_actions: int, hidden: int = 64) -> None:
        super().__init__()
        self.feature_dim = check_int("feature_dim", feature_dim, low=1)
        self.n_actions = check_int("n_actions", n_actions, low=1)
        hidden = check_int("hidden", hidden, low=1)
        self.net = nn.Sequential(
            nn.Linear(self.feature_dim, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, self.n_actions),
        )

    def log_prob(self, env: DiscreteEnv, traj: Trajectories) -> Tensor:
        """``[B, T]``, 0 at padded steps."""
        child = _children(traj).flatten(0, 1)
        logits = self.net(env.features(child)).view(*traj.actions.shape, -1)
        mask = env.backward_mask(child).view_as(logits)
        valid = step_mask(traj.lengths, traj.actions.shape[1])
        mask = mask | ~valid[..., None]
        logp = masked_log_softmax(logits, mask).gather(2, traj.actions.clamp(min=0)[..., None])[..., 0]
        return torch.where(valid, logp, 0.0)


class SuffixMemoryBackward(nn.Module):
    """A backward policy with its own memory, unrolled backward from ``x`` (for TB only).

    The step from ``s_{t+1}`` to ``s_t`` reads a GRU carry built over ``x = s_T, s_{T-1}, ..., s_{t+1}``
    and the backward actions taken so far, i.e. only what the backward process has generated
    [reconstructed]. DB and SubTB reject it: with a suffix memory a zero-loss flow may not exist.

    Args:
        feature_dim: Width of the environment's features.
        n_actions: Number of (backward) actions.
        hidden: GRU width and head width.
    """

    _paper = paper("path_gfn")

    def __init__(self, feature_dim: int, n_actions: int, hidden: int = 64) -> None:
        super().__init__()
        self.feature_dim = check_int("feature_dim", feature_dim, low=1)
        self.n_actions = check_int("n_actions", n_actions, low=1)
        self.hidden = check_int("hidden", hidden, low=1)
        self.action_emb = nn.Embedding(self.n_actions + 1, 16)
        self.memory = GRUMemory(self.hidden)
        self.memory.bind(self.feature_dim + 16)
        self.head = nn.Sequential(
            nn.Linear(self.hidden + self.feature_dim, self.hidden),
            nn.ReLU(),
            nn.Linear(self.hidden, self.n_actions),
        )

    def log_prob(self, env: DiscreteEnv, traj: Trajectories) -> Tensor:
        """``[B, T]``, 0 at padded steps; unrolled from each trajectory's own end."""
        batch, max_len = traj.actions.shape
        child = _children(traj)
        feats = env.features(child.flatten(0, 1)).view(batch, max_len, -1)
        masks = env.backward_mask(child.flatten(0, 1)).view(batch, max_len, -1)
        valid = step_mask(traj.lengths, max_len)
        carry = self.memory.init_carry(batch)
        prev = torch.full((batch,), self.n_actions, dtype=torch.long)
        out = torch.zeros(batch, max_len)
        rows = torch.arange(batch)
        for k in range(max_len):  # k-th backward step: from s_{T-k} to s_{T-k-1}
            live = k < traj.lengths
            t = (traj.lengths - 1 - k).clamp(min=0)
            f = feats[rows, t]
            y, new_carry = self.memory(torch.cat([f, self.action_emb(prev)], -1), carry)
            logits = self.head(torch.cat([y, f], -1))
            mask = masks[rows, t] | ~live[:, None]
            a = traj.actions[rows, t].clamp(min=0)
            lp = masked_log_softmax(logits, mask).gather(1, a[:, None])[:, 0]
            out = out.index_put((rows, t), torch.where(live, lp, out[rows, t]))
            carry = torch.where(live[:, None], new_carry, carry)
            prev = torch.where(live, a, prev)
        return torch.where(valid, out, 0.0)


BACKWARD_TYPES = (UniformBackward, MarkovBackward, SuffixMemoryBackward)


def check_backward(pb: object, *, allow_suffix: bool) -> None:
    """Raise ``ValueError`` unless ``pb`` is ``None``, uniform, Markov or (with ``allow_suffix``) a
    suffix-memory backward policy; a module conditioned on the forward memory is named as such."""
    from hf_ext.path_gfn.policy import LiftedPolicy

    if isinstance(pb, LiftedPolicy) or hasattr(pb, "init_carry"):
        raise ValueError(
            "`pb` must not condition on the forward memory W_t (a forward-lifted module was passed): W_t "
            "depends on the prefix, which a backward pass from x has not generated, so p_B would not be "
            "normalised. Pass None (tree DAGs), UniformBackward(env) or MarkovBackward(...)."
        )
    allowed = BACKWARD_TYPES if allow_suffix else (UniformBackward, MarkovBackward)
    if pb is not None and not isinstance(pb, allowed):
        names = ", ".join(["None", *(c.__name__ for c in allowed)])
        raise ValueError(f"`pb` must be one of {names}; got {type(pb).__name__}.")
