"""Cellular-automaton learnability: rules and k-step maps, exact Boolean analysis (Fourier spectrum, average
sensitivity, degree and junta profiles), a torch dataset and a learnability harness; names resolve lazily.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
