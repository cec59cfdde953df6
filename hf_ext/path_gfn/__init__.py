"""Path-dependent GFlowNet samplers: discrete environments with exact targets, Markov and lifted
(latent-memory) policies, trajectory/detailed/subtrajectory balance on lifted states and a trainer;
names resolve lazily.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
