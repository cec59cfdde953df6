"""Shared code of the MAFE-style environments: the simulation core, configs, scripted policies,
wrappers, the F-MACEM trainer and the benchmark.

All dynamics here are an hf-ext reconstruction in the formalism of MAFE (Lazri et al., ICML 2026,
arXiv 2502.18534); the paper's appendix equations and calibrations are not reproduced and no numerical
parity with the paper is claimed.
"""
