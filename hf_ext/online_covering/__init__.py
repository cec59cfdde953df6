"""Learning-augmented online covering: classical online algorithms, request predictions, robustification.

Problems: set cover (``OnlineSetCover``), facility location (``MeyersonFacilityLocation``), parking
permit (``ParkingPermit``) and Steiner tree (``GreedySteinerTree``). Any of them can be wrapped by
``WithPredictions`` (up-front or lazy use of a predicted request multiset) and combined with the plain
algorithm by ``Robustify``.
Exact offline optima live in :mod:`hf_ext.online_covering.offline` (the benchmark's instance generators are
in ``benchmarks/online_covering`` of the source repository). Names resolve on first use; they need
scikit-learn and scipy (``pip install hf-ext[sklearn]``).
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
