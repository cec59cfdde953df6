"""Grounding IDs: visual-cue overlays (partition lines + symbols) and a cue-adding processor wrapper for
vision-language models, with the binding analyses (alignment, modality gap, attention mass, swap test), a
tiny LLaVA built from config and a synthetic binding task; names resolve lazily.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
