"""Data for SCM-GRPO: HoVer / EX-FEVER loaders (local files, no download), a synthetic multi-hop world and
the dataset check the reward functions rely on.

Every loader returns plain rows ``{"id", "claim", "evidence": list[str], "label", "num_hops"}`` with the label
normalised into the dataset's label set, ready for ``datasets.Dataset.from_list`` and
:class:`hf_ext.scm_grpo.prompt.SCMPromptBuilder`.
"""

from __future__ import annotations

import ast
import csv
import json
import random
from collections import Counter
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from hf_ext._validation import check_int, check_probability
from hf_ext.scm_grpo.core import resolve_label_set
from hf_ext.scm_grpo.rewards import gold_label, target_depth


def _columns(dataset: Any) -> list[str]:
    names = getattr(dataset, "column_names", None)
    if names is not None:
        return list(names)
    rows = list(dataset)
    return sorted({k for row in rows for k in row}) if rows else []


def check_scm_dataset(
    dataset: Any,
    *,
    label_key: str = "label",
    target_key: str | None = "num_hops",
    label_set: str | Collection[str] = "hover",
    default_target: int | None = None,
) -> dict[str, Any]:
    """Check, before training, what the SCM rewards will read; return label and target counts.

    Raises the errors the rewards would raise at their first call: ``KeyError`` for a missing label column (or
    target column without ``default_target``), naming it and the columns seen; ``ValueError`` for a gold label
    outside ``label_set`` (listing the allowed labels) or a target that is not an int >= 1.

    Args:
        dataset: A ``datasets.Dataset`` or a list of row dicts.
        label_key: Column of the gold label.
        target_key: Column of the target depth (``None``: not checked).
        label_set: ``"hover"``, ``"exfever"`` or a collection of labels.
        default_target: Target for rows without one; the column may then be absent.

    Example:
        >>> check_scm_dataset([{"label": "supports", "num_hops": 2}])
        {'n': 1, 'labels': {'SUPPORTED': 1}, 'targets': {2: 1}}
    """
    labels = resolve_label_set(label_set)
    columns = _columns(dataset)
    for key, needed in ((label_key, True), (target_key, default_target is None)):
        if key is not None and needed and key not in columns:
            raise KeyError(
                f"the dataset lacks the column `{key}` the SCM rewards read; columns seen: {columns}."
            )
    gold = (
        [gold_label(v, labels, label_key) for v in dataset[label_key]]
        if hasattr(dataset, "column_names")
        else [gold_label(row[label_key], labels, label_key) for row in dataset]
    )
    targets: Counter[int] = Counter()
    if target_key is not None and target_key in columns:
        values = (
            dataset[target_key] if hasattr(dataset, "column_names") else [r.get(target_key) for r in dataset]
        )
        targets.update(target_depth(v, default_target, target_key) for v in values)
    elif default_target is not None:
        targets[check_int("default_target", default_target, low=1)] = len(gold)
    return {"n": len(gold), "labels": dict(Counter(gold)), "targets": dict(sorted(targets.items()))}


def _read_records(path: str | Path) -> list[dict[str, Any]]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"`path` must be an existing file, got {str(path)!r}.")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".csv":
        return list(csv.DictReader(text.splitlines(keepends=True)))
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    if not isinstance(data, list):
        raise ValueError(f"`path` must hold a JSON list of records, got a {type(data).__name__}.")
    return data


def load_hover(path: str | Path, *, wiki: Mapping[str, list[str]] | str | Path | None = None) -> list[dict]:
    """HoVer from its released JSON (``hover_{train,dev}_release_v1.1.json``), read from a local file.

    A HoVer record holds ``uid``, ``claim``, ``supporting_facts`` (``[title, sentence index]`` pairs),
    ``label`` (``SUPPORTED`` / ``NOT_SUPPORTED``) and ``num_hops``. The release carries no sentence text:
    pass ``wiki`` (title -> list of sentences, or a JSON file of that mapping, e.g. exported from HoVer's
    Wikipedia dump) to fill the evidence; without it each evidence entry reads ``"<title> [<index>]"``.
    """
    pages: Mapping[str, list[str]] = (
        json.loads(Path(wiki).read_text(encoding="utf-8")) if isinstance(wiki, str | Path) else wiki or {}
    )
    rows = []
    for i, rec in enumerate(_read_records(path)):
        evidence = []
        for title, index in rec.get("supporting_facts", []):
            sentences = pages.get(title, [])
            ok = 0 <= int(index) < len(sentences)
            evidence.append(sentences[int(index)] if ok else f"{title} [{index}]")
        rows.append(
            {
                "id": str(rec.get("uid", i)),
                "claim": rec["claim"],
                "evidence": evidence,
                "label": gold_label(rec["label"], resolve_label_set("hover"), "label"),
                "num_hops": target_depth(rec.get("num_hops"), None, "num_hops"),
            }
        )
    return rows


def load_exfever(path: str | Path) -> list[dict]:
    """EX-FEVER from a local file of its released records (``.csv`` as released, or ``.json`` / ``.jsonl``).

    A record holds ``claim``, ``explanation`` (the gold multi-hop explanation), ``label`` (``SUPPORT`` /
    ``REFUTE`` / ``NOT ENOUGH INFO``) and ``golden entity`` (the documents of the chain, a Python-literal
    list in the CSV). Evidence = the explanation's sentences; ``num_hops`` = the number of golden entities
    (2 or 3), or a ``num_hops`` / ``hop`` field when present.
    """
    labels = resolve_label_set("exfever")
    rows = []
    for i, rec in enumerate(_read_records(path)):
        entities = rec.get("golden entity", rec.get("golden_entity", []))
        if isinstance(entities, str):
            entities = ast.literal_eval(entities) if entities.strip() else []
        hops = rec.get("num_hops", rec.get("hop")) or len(entities) or None
        explanation = str(rec.get("explanation", "")).replace("?", " ")
        sentences = [s.strip() for s in explanation.split(". ") if s.strip(" .")]
        evidence = [s if s.endswith(".") else s + "." for s in sentences]
        rows.append(
            {
                "id": str(rec.get("id", i)),
                "claim": str(rec["claim"]).strip(),
                "evidence": evidence,
                "label": gold_label(rec["label"], labels, "label"),
                "num_hops": target_depth(int(hops) if hops else None, 2, "num_hops"),
            }
        )
    return rows


def make_synthetic_mhfv(
    seed: int,
    n: int,
    *,
    hops: tuple[int, ...] = (2, 3, 4),
    n_entities: int = 40,
    n_relations: int = 8,
    n_distractors: int = 3,
    max_pad: int = 0,
    p_supported: float = 0.5,
) -> list[dict[str, Any]]:
    """A synthetic multi-hop fact-verification world: entity chains, composed claims and gold graphs.

    Each row draws a chain ``x0 -q1-> x1 ... -qn-> xn`` of ``n`` hops (``n`` from ``hops``); the evidence is
    the ``n`` chain facts ``"x_{i-1} q_i x_i"`` with ``n_distractors`` unrelated facts inserted at random
    places; the claim composes the chain, ``"x0 q1 ... qn xn"``. A ``NOT_SUPPORTED`` claim corrupts the last
    hop: its end entity is one that appears nowhere in the evidence. ``graph`` is the gold completion in the
    SCM output contract: the chain facts in order into ``C`` (depth ``n = num_hops``), padded with
    ``pad`` (uniform in ``0..max_pad``) redundant distractor nodes spliced into the chain before its last fact
    (depth ``n + pad``).

    Returns:
        Rows ``{"id", "claim", "evidence", "label", "num_hops", "pad", "graph", "chain"}`` (``chain``: the
        node texts of ``graph`` in path order).

    Example:
        >>> row = make_synthetic_mhfv(0, 1, hops=(2,))[0]
        >>> row["num_hops"], len(row["evidence"]), row["graph"].count("->")
        (2, 5, 2)
    """
    n = check_int("n", n, low=0)
    if not hops or any(isinstance(h, bool) or not isinstance(h, int) or h < 1 for h in hops):
        raise ValueError(f"`hops` must be a non-empty tuple of ints >= 1, got {hops!r}.")
    n_relations = check_int("n_relations", n_relations, low=2)
    n_distractors = check_int("n_distractors", n_distractors, low=0)
    max_pad = check_int("max_pad", max_pad, low=0, high=n_distractors, hint="Padding reuses distractors.")
    need = max(hops) + 2 + 2 * n_distractors
    n_entities = check_int("n_entities", n_entities, low=need, hint=f"One row uses up to {need} entities.")
    p_supported = check_probability("p_supported", p_supported)
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        hop = rng.choice(hops)
        ents = [f"e{j}" for j in rng.sample(range(n_entities), hop + 2 + 2 * n_distractors)]
        chain, spare = ents[: hop + 1], ents[hop + 1 :]
        rels = [f"r{rng.randrange(n_relations)}" for _ in range(hop)]
        facts = [f"{chain[j]} {rels[j]} {chain[j + 1]}" for j in range(hop)]
        distractors = [
            f"{spare[2 * j]} r{rng.randrange(n_relations)} {spare[2 * j + 1]}" for j in range(n_distractors)
        ]
        evidence = list(facts)
        for d in distractors:
            evidence.insert(rng.randint(0, len(evidence)), d)
        supported = rng.random() < p_supported
        end = chain[-1] if supported else spare[-1]
        claim = " ".join([chain[0], *rels, end])
        path = list(facts)
        pad = rng.randint(0, max_pad)
        for d in rng.sample(distractors, pad):
            path.insert(rng.randint(0, len(path) - 1), d)
        label = "SUPPORTED" if supported else "NOT_SUPPORTED"
        rows.append(
            {
                "id": f"syn-{seed}-{i}",
                "claim": claim,
                "evidence": evidence,
                "label": label,
                "num_hops": hop,
                "pad": pad,
                "graph": gold_graph(path, claim, label),
                "chain": path,
            }
        )
    return rows


def gold_graph(path: list[str], claim: str, label: str) -> str:
    """The completion for a chain of facts ``path`` into the claim: ``E1 -> E2 -> ... -> C``."""
    lines = ["<graph>", *(f"E{i}: {f}" for i, f in enumerate(path, 1)), f"C: {claim}"]
    ids = [f"E{i}" for i in range(1, len(path) + 1)] + ["C"]
    lines += [f"{a} -> {b}" for a, b in zip(ids, ids[1:])]
    return "\n".join([*lines, "</graph>", f"<answer>{label}</answer>"])
