"""Education MAFE-style environment, PettingZoo versioned module ``education_mafe_v0``.

``raw_env`` is the ``ParallelEnv`` class, ``parallel_env(**kw)`` builds it and ``env(**kw)`` gives the AEC
form, ``vector_env(num_envs, **kw)`` many seeded copies at once; the class lives in
:mod:`hf_ext.mafe.env_education`.
"""

from hf_ext.mafe.env_education import EducationMAFE, env, parallel_env, raw_env, vector_env

__all__ = ["EducationMAFE", "env", "parallel_env", "raw_env", "vector_env"]
