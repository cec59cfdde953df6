"""Dem-HEC: entropy-guided robust fine-tuning as a timm training task."""

from hf_ext.timm.dem_hec.config import DemHECConfig
from hf_ext.timm.dem_hec.core import entropy_pgd
from hf_ext.timm.dem_hec.task import DemHECTask

__all__ = ["DemHECConfig", "DemHECTask", "entropy_pgd"]
