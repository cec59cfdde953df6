"""Learning-augmented online covering: classical online algorithms, request predictions, robustification.

Problems: set cover (:class:`OnlineSetCover`), facility location (:class:`MeyersonFacilityLocation`),
parking permit (:class:`ParkingPermit`) and Steiner tree (:class:`GreedySteinerTree`). Any of them can be
wrapped by :class:`WithPredictions` (up-front or lazy use of a predicted request multiset) and combined
with the plain algorithm by :class:`Robustify`. Exact offline optima live in
:mod:`hf_ext.online_covering.offline`, instance generators in :mod:`hf_ext.online_covering.instances`.
Needs scikit-learn and scipy (``pip install hf-ext[sklearn]``).
"""

from __future__ import annotations

from hf_ext.online_covering.base import OnlineCoveringAlgorithm
from hf_ext.online_covering.facility_location import MeyersonFacilityLocation
from hf_ext.online_covering.offline import OfflineResult
from hf_ext.online_covering.parking_permit import ParkingPermit
from hf_ext.online_covering.predictions import WithPredictions, prediction_error
from hf_ext.online_covering.robust import Robustify
from hf_ext.online_covering.set_cover import OnlineSetCover
from hf_ext.online_covering.steiner import GreedySteinerTree

__all__ = [
    "GreedySteinerTree",
    "MeyersonFacilityLocation",
    "OfflineResult",
    "OnlineCoveringAlgorithm",
    "OnlineSetCover",
    "ParkingPermit",
    "Robustify",
    "WithPredictions",
    "prediction_error",
]
