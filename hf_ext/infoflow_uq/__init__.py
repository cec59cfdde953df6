"""Information-flow uncertainty for retrieval-augmented generation (``hf-ext bench infoflow_uq``).

``from hf_ext.infoflow_uq import InformationFlowScorer`` imports transformers on first use only.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
