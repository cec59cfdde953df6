"""timm components: the Dem-HEC training task, the corruption suite and robustness evaluation.

Importing this package imports timm.
"""

from hf_ext.timm.corruptions import CORRUPTIONS, CorruptedDataset, CorruptionTransform, corrupt
from hf_ext.timm.dem_hec import DemHECConfig, DemHECTask, entropy_pgd
from hf_ext.timm.robust_eval import evaluate_corruptions, feature_entropy_profile

__all__ = [
    "CORRUPTIONS",
    "CorruptedDataset",
    "CorruptionTransform",
    "DemHECConfig",
    "DemHECTask",
    "corrupt",
    "entropy_pgd",
    "evaluate_corruptions",
    "feature_entropy_profile",
]
