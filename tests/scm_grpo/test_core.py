"""The parser, depth and reward math on hand-computed cases (standard library only)."""

from __future__ import annotations

import math
import random

import pytest

from hf_ext.scm_grpo.core import (
    CHECKS,
    format_score,
    graph_depth,
    normalize_label,
    parse_scm_graph,
    resolve_label_set,
    structure_score,
)


def completion(lines: str, answer: str = "SUPPORTED") -> str:
    body = "\n".join(line.strip() for line in lines.strip().splitlines())
    return f"<graph>\n{body}\n</graph>\n<answer>{answer}</answer>"


def chain(n: int) -> str:
    nodes = [f"E{i}: fact {i}" for i in range(1, n + 1)] + ["C: the claim"]
    ids = [f"E{i}" for i in range(1, n + 1)] + ["C"]
    return completion("\n".join(nodes + [f"{a} -> {b}" for a, b in zip(ids, ids[1:])]))


VALID = [
    (chain(1), 1),
    (chain(2), 2),
    (chain(3), 3),
    (chain(4), 4),
    (completion("E1: a\nE2: b\nE3: c\nC: d\nE1 -> E2\nE1 -> E3\nE2 -> C\nE3 -> C"), 2),  # diamond
    (completion("E1: a\nE2: b\nE3: c\nC: d\nE1 -> C\nE2 -> E3\nE3 -> C"), 2),  # fork
    (completion("E1: a\nE2: b\nC: d\nE1 → E2\nE2→C"), 2),  # unicode arrow
    (completion("  E1 :  a  \n\n   C:d\n  E1->C  "), 1),  # whitespace, blank lines
    ("<think>hmm E1 -> C</think>\n" + chain(2), 2),  # text before <graph>
    (completion("E1: a\nE2: b\nE3: c\nC: d\nE1 -> C\nE2 -> C\nE3 -> C"), 1),  # star
    (completion("E1: a\nE2: b\nC: d\nE1 -> C\nC -> E2"), 1),  # an edge out of C without a cycle
]


@pytest.mark.parametrize(("text", "depth"), VALID)
def test_valid_graphs_have_exact_depth(text: str, depth: int) -> None:
    graph = parse_scm_graph(text)
    assert graph.errors == [] and graph.is_valid and graph.label == "SUPPORTED"
    assert graph.depth == depth == graph_depth(graph, "longest_path")
    assert format_score(graph) == 1.0


def test_num_evidence_depth_counts_evidence_reaching_the_claim() -> None:
    graph = parse_scm_graph(completion("E1: a\nE2: b\nE3: c\nC: d\nE1 -> E2\nE2 -> C"))
    assert graph.num_evidence == 3 and graph_depth(graph, "num_evidence") == 2
    assert graph.reaching_evidence() == ["E1", "E2"]
    assert format_score(graph) == 1.0 and format_score(graph, require_all_connected=True) == 0.0
    assert format_score(graph, require_all_connected=True, partial=True) == pytest.approx(9 / 10)


INVALID = [
    (completion("E1: a\nE2: b\nC: c\nE1 -> E2\nE2 -> E1\nE2 -> C"), "cycle"),
    (completion("E1: a\nC: c\nE1 -> C\nC -> C"), "self_loop"),
    (completion("E1: a\nC: c\nE1 -> C\nE9 -> C"), "undeclared_node"),
    (completion("E1: a\nE1: b\nC: c\nE1 -> C"), "duplicate_node"),
    (completion("E1: a\nE2: b\nE1 -> E2"), "missing_claim"),
    (completion("E1: a\nC: c\nC: d\nE1 -> C"), "duplicate_claim"),
    (completion("E1: a\nE2: b\nC: c\nE1 -> E2\nE2 -> C\nC -> E1"), "cycle"),  # out of C into a cycle
    (completion("C: c"), "no_evidence"),
    (completion("E1: a\nE2: b\nC: c\nE1 -> E2"), "claim_unreachable"),
    (completion("E1: a\nC: c\nE1 -> C\nso the claim holds"), "bad_line"),
    ("<graph>\nE1: a\nC: c\nE1 -> C\n<answer>SUPPORTED</answer>", "unclosed_graph"),
    (chain(1) + "<answer>SUPPORTED</answer>", "duplicate_answer"),
    ("<answer>SUPPORTED</answer>\n<graph>\nE1: a\nC: c\nE1 -> C\n</graph>", "answer_before_graph"),
    (chain(1).replace("<graph>", "").replace("</graph>", ""), "missing_graph"),
    ("<graph>\nE1: a\nC: c\nE1 -> C\n</graph>", "missing_answer"),
    (completion("E1: a\nC: c\nE1 -> C", answer="maybe"), "bad_label"),
    (chain(1) + chain(1), "duplicate_graph"),
    ("", "missing_graph"),
]


@pytest.mark.parametrize(("text", "kind"), INVALID)
def test_malformed_completions_score_zero_with_the_expected_error(text: str, kind: str) -> None:
    graph = parse_scm_graph(text)
    assert kind in graph.error_kinds, graph.errors
    assert not graph.is_valid and format_score(graph) == 0.0
    assert 0.0 <= format_score(graph, partial=True) < 1.0


def test_partial_format_is_the_fraction_of_checks_passed() -> None:
    graph = parse_scm_graph(completion("E1: a\nC: c\nE1 -> C\nC -> C", answer="maybe"))
    assert graph.error_kinds == {"self_loop", "bad_label"}
    assert format_score(graph, partial=True) == pytest.approx((len(CHECKS) - 2) / len(CHECKS))


def test_depth_is_none_for_a_broken_structure() -> None:
    cyclic = parse_scm_graph(INVALID[0][0])
    assert cyclic.depth is None and graph_depth(cyclic, "num_evidence") is None
    wrong_label = parse_scm_graph(completion("E1: a\nC: c\nE1 -> C", answer="maybe"))
    assert wrong_label.depth == 1 and not wrong_label.is_valid  # depth needs the structure only


def test_structure_score_spot_values() -> None:
    assert structure_score(3, 3) == 1.0
    assert structure_score(2, 3) == structure_score(4, 3) == pytest.approx(math.exp(-0.5))
    assert structure_score(2, 3) == pytest.approx(0.60653, abs=1e-5)
    assert structure_score(5, 3) == pytest.approx(0.13534, abs=1e-5)
    assert structure_score(5, 3, sigma=2.0) == pytest.approx(math.exp(-0.5))
    assert structure_score(None, 3) == 0.0


LABELS = [
    ("hover", "SUPPORTED", "SUPPORTED"),
    ("hover", "supported", "SUPPORTED"),
    ("hover", " Supports. ", "SUPPORTED"),
    ("hover", "support", "SUPPORTED"),
    ("hover", "true", "SUPPORTED"),
    ("hover", "NOT SUPPORTED", "NOT_SUPPORTED"),
    ("hover", "not-supported", "NOT_SUPPORTED"),
    ("hover", "not_supported", "NOT_SUPPORTED"),
    ("hover", "unsupported", "NOT_SUPPORTED"),
    ("hover", "REFUTED", None),
    ("hover", "refutes", None),
    ("hover", "nei", None),
    ("exfever", "REFUTES", "REFUTED"),
    ("exfever", "refute", "REFUTED"),
    ("exfever", "Not Enough Info", "NOT_ENOUGH_INFO"),
    ("exfever", "nei", "NOT_ENOUGH_INFO"),
    ("exfever", "SUPPORT", "SUPPORTED"),
    ("exfever", "not supported", None),
    ("exfever", "", None),
    (("yes", "no"), "YES", "YES"),
    (("yes", "no"), "true", None),
]


@pytest.mark.parametrize(("label_set", "text", "expected"), LABELS)
def test_label_normalisation(label_set: object, text: str, expected: str | None) -> None:
    assert normalize_label(text, label_set) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["fever", "", (), ["ok", 3], [" "], 5, None])
def test_bad_label_set_raises_naming_it(bad: object) -> None:
    with pytest.raises(ValueError, match="`label_set`"):
        resolve_label_set(bad)  # type: ignore[arg-type]


def test_bad_depth_mode_raises() -> None:
    with pytest.raises(ValueError, match="`depth`"):
        graph_depth(parse_scm_graph(chain(1)), "width")


def test_depth_matches_networkx_on_random_dags() -> None:
    nx = pytest.importorskip("networkx")
    from benchmarks.scm_grpo.bench import random_dag

    rng = random.Random(0)
    for _ in range(1000):
        text, edges, _ = random_dag(rng)
        graph = nx.DiGraph(edges)
        ref = nx.dag_longest_path_length(graph.subgraph(nx.ancestors(graph, "C") | {"C"}))
        parsed = parse_scm_graph(text)
        assert parsed.is_valid and parsed.depth == ref
        assert nx.is_isomorphic(parsed.to_networkx().subgraph(graph.nodes), graph)
