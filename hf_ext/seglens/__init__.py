"""Med-SegLens: sparse autoencoders on segmentation-model activations, latent alignment between models
and cohorts, model-diff reports and error-preserving latent interventions; names resolve lazily.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
