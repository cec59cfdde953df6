"""The registry-driven sections of ``README.md`` and the docs pages (``make readme`` rewrites them).

The README's methods table has one short row per method: id (linking its docs page), name, host slot, one
line of use, and the last full run's verdict, read from the page's ``**Last full run:**`` line. Public names
and reconstructed parts stand in a generated section of each method's docs page.
"""

from __future__ import annotations

from pathlib import Path

from hf_ext._registry import MethodInfo, methods

MARKERS = ("<!-- {}:start", "<!-- {}:end -->")
ROOT = Path(__file__).resolve().parents[1]
STATUS_PREFIX = "**Last full run:**"
ROW_LIMIT = 160


def last_full_run(method_id: str, root: Path = ROOT) -> str:
    """The verdict of the method's last full benchmark run, from its docs page (``"see docs"`` without one).

    The page states it on one line, ``**Last full run:** claim met (1.19x the best other draft, 32k x 8)``.
    """
    page = root / "docs" / "methods" / f"{method_id}.md"
    if page.is_file():
        for line in page.read_text().splitlines():
            if line.strip().startswith(STATUS_PREFIX):
                return line.strip().removeprefix(STATUS_PREFIX).strip()
    return "see docs"


def feature_table(docs_prefix: str = "docs/", root: Path = ROOT) -> str:
    """The methods table, one row per registered method of at most 160 characters.

    Args:
        docs_prefix: Path from the page holding the table to the ``docs`` folder (``""`` inside the docs).
        root: The checkout whose docs pages hold the status lines.
    """
    lines = ["| id (docs) | method | host slot | use | last full run |", "|---|---|---|---|---|"]
    for m in methods().values():
        lines.append(f"| [{m.id}] | {m.name} | {m.slot} | `{m.use}` | {last_full_run(m.id, root)} |")
    lines.append("")
    lines += [f"[{m.id}]: {docs_prefix}methods/{m.id}.md" for m in methods().values()]
    return "\n".join(lines)


def method_reference(info: MethodInfo) -> str:
    """The docs page section listing the method's paper, public names, extras and reconstructed parts."""
    paper = f"[{info.title}](https://arxiv.org/abs/{info.arxiv})" if info.arxiv else info.title
    lines = [
        f"- **Paper:** {paper} ({info.venue})",
        f"- **Host component:** {info.host}",
        f"- **Extras:** {', '.join(f'`{e}`' for e in info.extras) or 'none (core install)'}",
        f"- **Public names:** {', '.join(f'`{n}`' for n in info.public)}",
        "- **Reconstructed parts** (our design where the paper's text was not available):",
    ]
    lines += [f"  - {part}" for part in info.reconstructed] or ["  - none"]
    return "\n".join(lines)


def citations() -> str:
    """BibTeX of every registered method, as one fenced block."""
    return "```bibtex\n" + "\n\n".join(m.citation.strip() for m in methods().values()) + "\n```"


def _generated() -> dict[str, dict[str, object]]:
    pages: dict[str, dict[str, object]] = {
        "README.md": {"feature-table": lambda: feature_table("docs/"), "citations": citations},
        "docs/index.md": {"feature-table": lambda: feature_table("")},
    }
    for info in methods().values():
        pages[f"docs/methods/{info.id}.md"] = {"reference": lambda info=info: method_reference(info)}
    return pages


GENERATED = _generated()


def generated_sections(page: str) -> dict[str, str]:
    """The generated sections of ``page`` (a key of ``GENERATED``), by marker name."""
    return {name: make() for name, make in GENERATED[page].items()}  # type: ignore[operator]


def replace_section(text: str, name: str, body: str) -> str:
    """Replace what lies between the ``name`` markers of ``text`` (the start marker line is kept)."""
    start, end = (m.format(name) for m in MARKERS)
    head, found, rest = text.partition(start)
    if not found:
        raise ValueError(f"no `{start}` marker in the page")
    marker_line, _, rest = rest.partition("\n")
    _, _, tail = rest.partition(end)
    return f"{head}{start}{marker_line}\n{body}\n{end}{tail}"


def update_readme(root: Path = ROOT) -> None:
    """Regenerate the registry-driven sections of ``README.md``, ``docs/index.md`` and the method pages."""
    for page in GENERATED:
        path = root / page
        text = path.read_text()
        for name, body in generated_sections(page).items():
            text = replace_section(text, name, body)
        path.write_text(text)
