"""SCM-GRPO's rule math, standard library only: label sets, the graph parser, depth and the reward terms.

SCM-GRPO [paper] asks the model for an explicit directed dependency graph from evidence to claim
("SCM-inspired constructive structural reasoning", without interventions or counterfactuals) and trains it
with GRPO on a rule-based reward that trades structural depth against conciseness. The output contract, the
checks, the depth definition and the reward shape below are [reconstructed] (only the abstract and the
introduction were available)::

    <graph>
    E1: <atomic fact taken from the evidence>
    E2: <atomic fact>
    C: <the claim>
    E1 -> E2
    E2 -> C
    </graph>
    <answer>SUPPORTED</answer>

Everything here is pure Python and never raises on a malformed completion: problems land in
:attr:`SCMGraph.errors`, one ``"<kind>"`` or ``"<kind>: <detail>"`` entry each (kinds in :data:`ERROR_KINDS`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from dataclasses import dataclass, field

from hf_ext._registry import paper

HOVER = ("SUPPORTED", "NOT_SUPPORTED")
EXFEVER = ("SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO")
LABEL_SETS = {"hover": HOVER, "exfever": EXFEVER}
ALIASES = {  # [reconstructed] normalised alias -> label; applies only when the label is in the active set
    "SUPPORTS": "SUPPORTED",
    "SUPPORT": "SUPPORTED",
    "TRUE": "SUPPORTED",
    "UNSUPPORTED": "NOT_SUPPORTED",
    "REFUTES": "REFUTED",
    "REFUTE": "REFUTED",
    "NEI": "NOT_ENOUGH_INFO",
}
DEPTH_MODES = ("longest_path", "num_evidence")
# Error kind -> the format check it fails (r_fmt with ``partial=True`` is the fraction of checks passed).
ERROR_KINDS = {
    "missing_graph": "tags",
    "unclosed_graph": "tags",
    "duplicate_graph": "tags",
    "missing_answer": "tags",
    "unclosed_answer": "tags",
    "duplicate_answer": "tags",
    "answer_before_graph": "tags",
    "bad_line": "tags",
    "no_evidence": "evidence",
    "missing_claim": "claim",
    "duplicate_claim": "claim",
    "duplicate_node": "unique_ids",
    "undeclared_node": "declared",
    "self_loop": "no_self_loop",
    "cycle": "acyclic",
    "claim_unreachable": "reachable",
    "bad_label": "label",
}
CHECKS = tuple(dict.fromkeys(ERROR_KINDS.values()))  # the nine checks, in order
_STRUCTURAL = {"evidence", "claim", "unique_ids", "declared", "no_self_loop", "acyclic", "reachable"}

_NODE = re.compile(r"^(E\d+|C)\s*:\s*(.+)$")
_EDGE = re.compile(r"^(E\d+|C)\s*(?:->|→)\s*(E\d+|C)$")
_TAG = re.compile(r"<(/?)(graph|answer)>")


def resolve_label_set(label_set: str | Collection[str]) -> tuple[str, ...]:
    """``"hover"``, ``"exfever"`` or a non-empty collection of label strings -> the canonical labels.

    >>> resolve_label_set("hover")
    ('SUPPORTED', 'NOT_SUPPORTED')
    """
    if isinstance(label_set, str):
        if label_set in LABEL_SETS:
            return LABEL_SETS[label_set]
    elif (
        isinstance(label_set, Collection)
        and len(label_set) > 0
        and all(isinstance(x, str) and x.strip() for x in label_set)
    ):
        return tuple(dict.fromkeys(_key(x) for x in label_set))
    raise ValueError(
        "`label_set` must be 'hover', 'exfever' or a non-empty collection of label strings, "
        f"got {label_set!r}."
    )


def _key(text: str) -> str:
    return re.sub(r"[\s\-_]+", "_", text.strip().strip(".").strip().upper()).strip("_")


def normalize_label(text: object, label_set: str | Collection[str] = "hover") -> str | None:
    """The canonical label ``text`` names in ``label_set``, or ``None``.

    Case-insensitive; spaces and hyphens equal ``"_"``; a trailing period is ignored; aliases
    (``"supports"``, ``"nei"``, ...) apply only when their label is in the set.

    >>> normalize_label("not supported"), normalize_label("Refutes", "exfever"), normalize_label("refutes")
    ('NOT_SUPPORTED', 'REFUTED', None)
    """
    if not isinstance(text, str):
        return None
    labels = resolve_label_set(label_set)
    key = _key(text)
    key = key if key in labels else ALIASES.get(key, "")
    return key if key in labels else None


@dataclass
class SCMGraph:
    """A parsed completion: the dependency graph, the answer and what is wrong with them.

    Attributes:
        nodes: Node id (``"E1"``, ..., ``"C"``) -> its text, in declaration order (first declaration kept).
        edges: ``(source, target)`` pairs in order of appearance.
        label: The normalised answer, or ``None`` when missing or outside the label set.
        answer: The raw text inside ``<answer>``, or ``None``.
        errors: One ``"<kind>"`` / ``"<kind>: <detail>"`` entry per problem; empty for a valid completion.
    """

    _paper = paper("scm_grpo")

    nodes: dict[str, str] = field(default_factory=dict)
    edges: list[tuple[str, str]] = field(default_factory=list)
    label: str | None = None
    answer: str | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def error_kinds(self) -> set[str]:
        return {e.partition(":")[0] for e in self.errors}

    @property
    def is_valid(self) -> bool:
        """Every format check passes (r_fmt = 1 at the defaults)."""
        return not self.errors

    @property
    def structure_ok(self) -> bool:
        """The ``<graph>`` block parsed into a DAG with one claim reachable from evidence (answer aside)."""
        kinds = self.error_kinds
        return not kinds & {"missing_graph", "unclosed_graph", "duplicate_graph", "bad_line"} and not any(
            ERROR_KINDS[k] in _STRUCTURAL for k in kinds
        )

    @property
    def num_evidence(self) -> int:
        """Number of declared evidence (``E``) nodes."""
        return sum(n.startswith("E") for n in self.nodes)

    @property
    def depth(self) -> int | None:
        """Edges on the longest path ending at ``C``; ``None`` unless :attr:`structure_ok`."""
        return graph_depth(self, "longest_path")

    def reaching_evidence(self) -> list[str]:
        """Evidence nodes with a path to ``C`` (in declaration order)."""
        ancestors = _ancestors(self.edges, "C")
        return [n for n in self.nodes if n.startswith("E") and n in ancestors]

    def to_networkx(self):  # type: ignore[no-untyped-def]  # networkx is an optional, untyped dependency
        """A ``networkx.DiGraph`` of the nodes (attribute ``text``) and edges."""
        import networkx as nx

        graph = nx.DiGraph()
        graph.add_nodes_from((n, {"text": t}) for n, t in self.nodes.items())
        graph.add_edges_from(self.edges)
        return graph


def _ancestors(edges: list[tuple[str, str]], node: str) -> set[str]:
    parents: dict[str, list[str]] = {}
    for u, v in edges:
        parents.setdefault(v, []).append(u)
    seen: set[str] = set()
    stack = [node]
    while stack:
        for u in parents.get(stack.pop(), ()):
            if u not in seen:
                seen.add(u)
                stack.append(u)
    return seen


def _topological_order(nodes: list[str], edges: list[tuple[str, str]]) -> list[str] | None:
    """Kahn's algorithm: a topological order of ``nodes``, or ``None`` when ``edges`` hold a cycle."""
    indegree = dict.fromkeys(nodes, 0)
    children: dict[str, list[str]] = {n: [] for n in nodes}
    for u, v in edges:
        children[u].append(v)
        indegree[v] += 1
    queue = [n for n in nodes if indegree[n] == 0]
    order = []
    while queue:
        u = queue.pop()
        order.append(u)
        for v in children[u]:
            indegree[v] -= 1
            if indegree[v] == 0:
                queue.append(v)
    return order if len(order) == len(nodes) else None


def graph_depth(graph: SCMGraph, mode: str = "longest_path") -> int | None:
    """Structural depth ``d`` of a graph whose structure is valid, else ``None`` [reconstructed].

    ``"longest_path"``: edges on the longest path ending at ``C`` (a chain of ``n`` facts into ``C`` has
    ``d = n``; a diamond ``E1->E2, E1->E3, E2->C, E3->C`` has ``d = 2``). ``"num_evidence"``: the number of
    evidence nodes that reach ``C``.
    """
    if mode not in DEPTH_MODES:
        raise ValueError(f"`depth` must be one of {DEPTH_MODES}, got {mode!r}.")
    if not graph.structure_ok:
        return None
    if mode == "num_evidence":
        return len(graph.reaching_evidence())
    order = _topological_order(list(graph.nodes), graph.edges)
    assert order is not None  # structure_ok implies acyclic
    longest = dict.fromkeys(order, 0)
    parents: dict[str, list[str]] = {}
    for u, v in graph.edges:
        parents.setdefault(v, []).append(u)
    for v in order:
        longest[v] = max((longest[u] + 1 for u in parents.get(v, ())), default=0)
    return longest["C"]


def _tags(text: str, graph: SCMGraph) -> tuple[str | None, str | None]:
    """The ``<graph>`` body and ``<answer>`` body, recording tag errors in ``graph``."""
    found: dict[tuple[str, str], list[re.Match[str]]] = {}
    for m in _TAG.finditer(text):
        found.setdefault((m.group(2), m.group(1)), []).append(m)
    bodies: dict[str, str | None] = {}
    for tag in ("graph", "answer"):
        opens, closes = found.get((tag, ""), []), found.get((tag, "/"), [])
        bodies[tag] = None
        if not opens:
            graph.errors.append(f"missing_{tag}")
        elif len(opens) > 1 or len(closes) > 1:
            graph.errors.append(f"duplicate_{tag}")
        elif not closes or closes[0].start() < opens[0].end():
            graph.errors.append(f"unclosed_{tag}")
        else:
            bodies[tag] = text[opens[0].end() : closes[0].start()]
    g_close, a_open = found.get(("graph", "/")), found.get(("answer", ""))
    if g_close and a_open and a_open[0].start() < g_close[-1].end():
        graph.errors.append("answer_before_graph")
    return bodies["graph"], bodies["answer"]


def parse_scm_graph(text: str, label_set: str | Collection[str] = "hover") -> SCMGraph:
    """Parse one completion into an :class:`SCMGraph`; malformed input fills ``errors`` and never raises.

    Rules [reconstructed]: exactly one ``<graph>...</graph>`` then one ``<answer>...</answer>`` (text before
    ``<graph>``, e.g. a ``<think>`` block, is allowed); inside the graph, blank lines are ignored, node lines
    match ``^(E\\d+|C)\\s*:\\s*(.+)$``, edge lines ``^(E\\d+|C)\\s*(->|→)\\s*(E\\d+|C)$``, and any other line
    is a ``bad_line``. The graph needs at least one ``E`` node and exactly one ``C``, unique ids, declared
    edge endpoints, no self-loops, no cycle (Kahn's algorithm), and a path from some ``E`` to ``C``; the
    answer must name a label of ``label_set``.

    >>> g = parse_scm_graph("<graph>\\nE1: a\\nC: b\\nE1 -> C\\n</graph><answer>supported</answer>")
    >>> g.is_valid, g.depth, g.label
    (True, 1, 'SUPPORTED')
    """
    labels = resolve_label_set(label_set)
    graph = SCMGraph()
    if not isinstance(text, str):
        graph.errors.append(f"missing_graph: not a string ({type(text).__name__})")
        graph.errors.append("bad_label")
        return graph
    body, answer = _tags(text, graph)
    if answer is not None:
        graph.answer = answer.strip()
        graph.label = normalize_label(graph.answer, labels)
    if graph.label is None:
        graph.errors.append("bad_label" + (f": {graph.answer!r}" if graph.answer is not None else ""))
    if body is None:
        return graph
    claims = 0
    for line in body.splitlines():
        line = line.strip()
        if not line:
            continue
        if node := _NODE.match(line):
            name = node.group(1)
            if name == "C":
                claims += 1
                if claims == 2:
                    graph.errors.append("duplicate_claim")
            elif name in graph.nodes:
                graph.errors.append(f"duplicate_node: {name}")
            graph.nodes.setdefault(name, node.group(2).strip())
        elif edge := _EDGE.match(line):
            graph.edges.append((edge.group(1), edge.group(2)))
        else:
            graph.errors.append(f"bad_line: {line[:40]!r}")
    _check_structure(graph, claims)
    return graph


def _check_structure(graph: SCMGraph, claims: int) -> None:
    if graph.num_evidence == 0:
        graph.errors.append("no_evidence")
    if claims == 0:
        graph.errors.append("missing_claim")
    undeclared = sorted({n for e in graph.edges for n in e if n not in graph.nodes})
    if undeclared:
        graph.errors.append(f"undeclared_node: {', '.join(undeclared)}")
    loops = sorted({u for u, v in graph.edges if u == v})
    if loops:
        graph.errors.append(f"self_loop: {', '.join(loops)}")
    edges = [(u, v) for u, v in graph.edges if u != v and u in graph.nodes and v in graph.nodes]
    if _topological_order(list(graph.nodes), edges) is None:
        graph.errors.append("cycle")
    if claims and not any(n.startswith("E") for n in _ancestors(edges, "C")):
        graph.errors.append("claim_unreachable")


def format_score(graph: SCMGraph, *, require_all_connected: bool = False, partial: bool = False) -> float:
    """r_fmt in [0, 1] [reconstructed]: 1 iff every check passes; ``partial`` gives the fraction passed.

    ``require_all_connected`` adds a tenth check: every evidence node reaches ``C``.
    """
    failed = {ERROR_KINDS[k] for k in graph.error_kinds}
    total = len(CHECKS)
    if require_all_connected:
        total += 1
        if not graph.structure_ok or len(graph.reaching_evidence()) < graph.num_evidence:
            failed.add("connected")
    if partial:
        return (total - len(failed)) / total
    return 0.0 if failed else 1.0


def structure_score(depth: int | None, target: float, sigma: float = 1.0) -> float:
    """f(d) = exp(-(d - d*)^2 / (2 sigma^2)) [reconstructed: an inverted U peaking at the target depth]; 0 for
    ``depth=None``.

    >>> round(structure_score(2, 3), 5), round(structure_score(5, 3), 5)
    (0.60653, 0.13534)
    """
    if depth is None:
        return 0.0
    return math.exp(-((depth - target) ** 2) / (2 * sigma**2))
