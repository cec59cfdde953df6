"""Multi-agent environments as PettingZoo ``ParallelEnv`` classes, in PettingZoo's versioned modules.

- :mod:`hf_ext.marl.loan_mafe_v0`, :mod:`hf_ext.marl.healthcare_mafe_v0`,
  :mod:`hf_ext.marl.education_mafe_v0`:
  MAFE-style fair multi-agent environments (reconstructed dynamics; see :mod:`hf_ext.marl.mafe`).

Each module exposes ``raw_env`` (the ParallelEnv class), ``parallel_env(**kw)`` and ``env(**kw)`` (AEC form).
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
