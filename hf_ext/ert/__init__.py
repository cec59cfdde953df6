"""ERT: conditional-coverage diagnostics for conformal prediction (arXiv 2512.11779) and the earlier metrics.

Pure numpy math: ``core`` (ERT losses, cross-fitting, the held-out test), ``group_metrics``
(CovGap/FSC/SSC/EOC, Pearson/HSIC), ``slab`` (worst-slab coverage), ``inputs`` (coverage from prediction sets
or intervals, data checks), ``classifiers`` (coverage classifiers). The host adapters live in
:mod:`hf_ext.metrics` (torchmetrics) and :mod:`hf_ext.estimators` (scikit-learn).
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
