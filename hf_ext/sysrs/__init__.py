"""SySRs (ICML 2026, arXiv 2606.07726): budgeted best-model identification with paired (synchronised) queries.

Pure numpy; ``hf_ext.estimators.BestModelIdentifier`` is the scikit-learn-style front end.
"""

from hf_ext.sysrs.core import (
    ALGORITHMS,
    Batch,
    BestArmScheduler,
    SequentialHalving,
    SuccessiveRejects,
    SynchronizedSuccessiveRejects,
    SySRs,
    UniformAllocation,
    identify_best_model,
    make_scheduler,
    sh_schedule,
    sr_schedule,
)
from hf_ext.sysrs.simulate import simulate

__all__ = [
    "ALGORITHMS",
    "Batch",
    "BestArmScheduler",
    "SequentialHalving",
    "SuccessiveRejects",
    "SySRs",
    "SynchronizedSuccessiveRejects",
    "UniformAllocation",
    "identify_best_model",
    "make_scheduler",
    "sh_schedule",
    "simulate",
    "sr_schedule",
]
