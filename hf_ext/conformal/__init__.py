"""Conditional-coverage diagnostics for conformal prediction: ERT (arXiv 2512.11779) and the earlier metrics.

Pure numpy math (``core``: ERT losses and cross-fitting; ``legacy``: CovGap/FSC/SSC/EOC/Pearson/HSIC; ``slab``:
worst-slab coverage; ``inputs``: conversion and coverage from prediction sets / intervals; ``classifiers``: coverage
classifiers), plus the ``hf-ext bench ert`` benchmark (``bench``, ``config``, ``shapes``). The host adapters live
in :mod:`hf_ext.metrics` (torchmetrics) and :mod:`hf_ext.estimators` (scikit-learn).
"""
