"""MAFE-style fair multi-agent environments: the simulation core, configs, scripted policies, wrappers and the
F-MACEM trainer.

All dynamics here are an hf-ext reconstruction in the formalism of MAFE (Lazri et al., ICML 2026,
arXiv 2502.18534); the paper's appendix equations and calibrations are not reproduced and no numerical
parity with the paper is claimed.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
