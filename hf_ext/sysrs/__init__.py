"""SySRs (ICML 2026, arXiv 2606.07726): budgeted best-model identification with paired (synchronised) queries.

Ask/tell schedulers (``SySRs``, ``SuccessiveRejects``, ``SequentialHalving``, ``UniformAllocation``), the
offline simulator ``simulate`` and the selector ``BestModelIdentifier``; names resolve on first use.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
