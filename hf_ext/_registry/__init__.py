"""The method registry: one entry per shipped method.

Each method owns one module in this package (``hf_ext/_registry/<id>.py``) that defines a single
``METHOD = MethodInfo(...)``. The registry is plain data: importing it imports no host library, so
``import hf_ext`` stays fast. Everything that lists methods (the lazy public names of ``hf_ext``,
``hf-ext list``, the tour, ``hf-ext bench``, the README table, ``hf_ext.papers()``) reads it from here.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from functools import cache


@dataclass(frozen=True)
class MethodInfo:
    """Everything hf-ext knows about one method.

    Attributes:
        id: Short name used by ``hf-ext bench <id>``, the docs page ``docs/methods/<id>.md`` and the tour.
        name: Display name, e.g. ``"CAMP"``.
        title: Paper title as published.
        venue: Venue string, e.g. ``"ICML 2026"``.
        arxiv: arXiv identifier, or ``None`` when none is known.
        host: The host extension point, e.g. ``"TRL DPOTrainer subclass"``.
        extras: The ``pip install hf-ext[...]`` extras the method needs.
        public: Public name exported from ``hf_ext`` -> module that defines it.
        public_extras: Public name -> the extras it needs, where they differ from ``extras`` (a metric of an
            environment method needs torchmetrics; the environment itself does not).
        slot: The host slot in a few words, for the README table (e.g. ``"TRL DPOTrainer"``).
        use: One line of use, for the README table (e.g. ``"CAMPTrainer(model, args=CAMPConfig())"``).
        citation: BibTeX entry.
        reconstructed: Parts of the method that are our reconstruction rather than the paper's.
        note: Free-text caveat shown in the docs and stored in ``_paper["note"]``.
        commands: Extra ``hf-ext <name>`` command -> ``"module:function"`` taking the remaining arguments
            (``fn(argv: list[str]) -> int``, an argparse front end of its own).
    """

    id: str
    name: str
    title: str
    venue: str
    arxiv: str | None
    host: str
    extras: tuple[str, ...]
    public: dict[str, str]
    citation: str
    slot: str = ""
    use: str = ""
    reconstructed: tuple[str, ...] = ()
    note: str = ""
    public_extras: dict[str, tuple[str, ...]] = field(default_factory=dict)
    commands: dict[str, str] = field(default_factory=dict)

    @property
    def paper(self) -> dict[str, object]:
        """The ``_paper`` metadata dict carried by public classes (keys read by TRL model cards)."""
        return {
            "title": self.title,
            "id": self.arxiv,
            "citation": self.citation,
            "venue": self.venue,
            "reconstructed": list(self.reconstructed),
            "note": self.note,
        }


@cache
def methods() -> dict[str, MethodInfo]:
    """All registered methods, keyed by id, in alphabetical order."""
    found: dict[str, MethodInfo] = {}
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        info = importlib.import_module(f"{__name__}.{mod.name}").METHOD
        if info.id != mod.name:
            raise RuntimeError(f"registry module {mod.name!r} declares id {info.id!r}; they must match")
        found[info.id] = info
    return found


def get(method_id: str) -> MethodInfo:
    """Return the entry for ``method_id`` or raise ``KeyError`` naming the known ids."""
    known = methods()
    if method_id not in known:
        import difflib

        close = difflib.get_close_matches(method_id, list(known), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise KeyError(f"unknown method {method_id!r}.{hint} Known methods: {', '.join(known)}.")
    return known[method_id]


def paper(method_id: str) -> dict[str, object]:
    """The ``_paper`` dict for ``method_id``; public classes set ``_paper = paper("<id>")``."""
    return get(method_id).paper
