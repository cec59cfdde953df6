"""hf-ext: recent ML research methods as native components of the libraries people already use.

Every public name is resolved lazily (PEP 562) from the method registry, so ``import hf_ext`` imports
neither torch nor any host library; ``from hf_ext import CAMPTrainer`` imports trl on first use.
"""

from __future__ import annotations

import logging

from hf_ext._lazy import lazy_package

__version__ = "0.1.0"

logging.getLogger("hf_ext").addHandler(logging.NullHandler())


def papers() -> list[dict[str, object]]:
    """The ``_paper`` metadata (title, arXiv id, citation, venue, reconstructed parts) of every method."""
    from hf_ext._registry import methods

    return [dict(info.paper, method=info.id) for info in methods().values()]


__getattr__, __dir__ = lazy_package(__name__)
