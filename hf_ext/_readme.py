"""The registry-driven sections of ``README.md`` and ``docs/index.md`` (``make readme`` rewrites them)."""

from __future__ import annotations

from pathlib import Path

from hf_ext._registry import methods

MARKERS = ("<!-- {}:start", "<!-- {}:end -->")


def feature_table(docs_prefix: str = "docs/") -> str:
    """The feature table, one row per registered method, generated from the registry.

    Args:
        docs_prefix: Path from the page holding the table to the ``docs`` folder (``""`` inside the docs).
    """
    lines = [
        "| id | method | paper | host component | public names | reconstructed parts |",
        "|---|---|---|---|---|---|",
    ]
    for m in methods().values():
        paper = f"[{m.title}](https://arxiv.org/abs/{m.arxiv})" if m.arxiv else m.title
        names = ", ".join(f"`{n}`" for n in m.public)
        recon = "; ".join(m.reconstructed) or "none"
        link = f"[`{m.id}`]({docs_prefix}methods/{m.id}.md)"
        lines.append(f"| {link} | {m.name} | {paper} ({m.venue}) | {m.host} | {names} | {recon} |")
    return "\n".join(lines)


def citations() -> str:
    """BibTeX of every registered method, as one fenced block."""
    return "```bibtex\n" + "\n\n".join(m.citation.strip() for m in methods().values()) + "\n```"


GENERATED = {
    "README.md": {"feature-table": lambda: feature_table("docs/"), "citations": citations},
    "docs/index.md": {"feature-table": lambda: feature_table("")},
}


def generated_sections(page: str) -> dict[str, str]:
    """The generated sections of ``page`` (a key of ``GENERATED``), by marker name."""
    return {name: make() for name, make in GENERATED[page].items()}


def replace_section(text: str, name: str, body: str) -> str:
    """Replace what lies between the ``name`` markers of ``text`` (the start marker line is kept)."""
    start, end = (m.format(name) for m in MARKERS)
    head, found, rest = text.partition(start)
    if not found:
        raise ValueError(f"no `{start}` marker in the page")
    marker_line, _, rest = rest.partition("\n")
    _, _, tail = rest.partition(end)
    return f"{head}{start}{marker_line}\n{body}\n{end}{tail}"


def update_readme(root: Path = Path(".")) -> None:
    """Regenerate the registry-driven sections of ``README.md`` and ``docs/index.md``."""
    for page in GENERATED:
        path = root / page
        text = path.read_text()
        for name, body in generated_sections(page).items():
            text = replace_section(text, name, body)
        path.write_text(text)
