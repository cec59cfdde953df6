"""The ``hf-ext`` command line: ``list``, ``tour``, ``bench``, ``assets`` and the methods' own commands.

This is the only module that prints; the library itself only logs.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hf_ext._registry import MethodInfo, get, methods

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
        lines.append(
            f"| [`{m.id}`]({docs_prefix}methods/{m.id}.md) | {m.name} | {paper} ({m.venue}) | {m.host} | {names} | {recon} |"
        )
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


def _load(target: str) -> Callable[..., Any]:
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)


def run_bench(info: MethodInfo, *, quick: bool, seed: int, tour: bool = False) -> Any:
    """Run a method's benchmark (or its tour entry) and return its ``BenchReport``."""
    for extra in info.extras:
        from hf_ext._availability import require

        require(extra, f"`hf-ext bench {info.id}`")
    target = info.tour if tour and info.tour else info.bench
    return _load(target)(quick=quick or tour, seed=seed)


def _headline_text(report: Any) -> str:
    h = report.headline
    arrow = "higher" if h.higher_is_better else "lower"
    return (
        f"{h.figure}: {h.method:.4g} vs {h.best_baseline:.4g} ({h.best_baseline_system}), "
        f"ratio {h.ratio:.3g}, {arrow} is better"
    )


def cmd_list(args: argparse.Namespace) -> int:
    from hf_ext.benchmarking import format_table

    if args.markdown:
        print(feature_table())
        return 0
    if args.ids:
        print(" ".join(methods()))
        return 0
    rows = [
        {
            "id": m.id,
            "method": m.name,
            "venue": m.venue,
            "arXiv": m.arxiv or "-",
            "host": m.host,
            "public names": ", ".join(m.public),
        }
        for m in methods().values()
    ]
    print(format_table(rows))
    return 0


def _progress(done: int, total: int, label: str) -> None:
    width = 24
    filled = int(width * done / max(total, 1))
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label:<40}")
    sys.stderr.flush()
    if done == total:
        sys.stderr.write("\n")


def cmd_tour(args: argparse.Namespace) -> int:
    from hf_ext.benchmarking import Timer, format_table

    chosen = [get(i) for i in args.only] if args.only else list(methods().values())
    rows, failed = [], 0
    for i, info in enumerate(chosen):
        _progress(i, len(chosen), info.id)
        with Timer() as timer:
            try:
                report = run_bench(info, quick=True, seed=args.seed, tour=True)
                ran, headline = report.what, _headline_text(report)
            except Exception as err:  # a failing method is reported and the tour goes on
                failed += 1
                ran, headline = "FAILED", f"{type(err).__name__}: {err}".splitlines()[0][:160]
                logging.getLogger("hf_ext.cli").debug("tour entry %s failed", info.id, exc_info=True)
                if args.verbose:
                    traceback.print_exc()
        rows.append(
            {
                "method": info.id,
                "host component": info.host,
                "what ran": ran,
                "headline": headline,
                "seconds": round(timer.seconds, 1),
            }
        )
    _progress(len(chosen), len(chosen), "done")
    print(format_table(rows))
    if failed:
        print(f"\n{failed} of {len(chosen)} tour entries failed.", file=sys.stderr)
    return 1 if failed else 0


def cmd_bench(args: argparse.Namespace) -> int:
    from hf_ext.benchmarking import Timer, format_table

    try:
        info = get(args.name)
    except KeyError as err:
        print(f"hf-ext bench: {err.args[0]}", file=sys.stderr)
        return 2
    try:
        with Timer() as timer:
            report = run_bench(info, quick=args.quick, seed=args.seed)
    except ImportError as err:
        print(f"hf-ext bench: {err}", file=sys.stderr)
        return 2
    seconds = timer.seconds
    mode = "quick" if args.quick else "full"
    print(f"hf-ext bench {info.id} ({mode}, seed {args.seed}): {report.what}")
    print(format_table(report.rows))
    print(f"\nheadline  {_headline_text(report)}")
    for note in report.notes:
        print(f"note      {note}")
    for name, path in report.files.items():
        print(f"file      {name}: {path}")
    if args.plot:
        plot = getattr(importlib.import_module(info.bench.partition(":")[0]), "plot", None)
        if plot is None:
            print(f"file      (no plot: `hf-ext bench {info.id}` draws none)")
        else:
            for name, path in plot(report, Path(args.plot)).items():
                print(f"file      {name}: {path}")
    print(f"seconds   {seconds:.1f}")
    if args.json:
        doc = report.to_json(method=info.id, quick=args.quick, seed=args.seed)
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(doc, indent=2))
        print(f"json      {args.json}")
    return 0


def all_assets() -> dict[str, str]:
    """Asset name -> ``"module:function"``: the built-in real models, then every method's own assets."""
    from hf_ext.assets import BUILTIN_ASSETS

    table = dict(BUILTIN_ASSETS)
    for info in methods().values():
        table.update(info.assets)
    return table


def cmd_assets(args: argparse.Namespace) -> int:
    table = all_assets()
    if args.list:
        print("\n".join(table))
        return 0
    names = args.names or list(table)
    for name in names:
        from hf_ext.benchmarking import Timer

        print(f"asset     {name} ...", flush=True)
        with Timer() as timer:
            _load(table[name])()
        print(f"asset     {name}: ready ({timer.seconds:.1f} s)")
    return 0


def method_commands() -> dict[str, str]:
    """``hf-ext <name>`` commands that methods add (``MethodInfo.commands``)."""
    return {name: target for info in methods().values() for name, target in info.commands.items()}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hf-ext", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="show library logs and tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="the method registry as a table")
    p.add_argument("--markdown", action="store_true", help="print the README feature table")
    p.add_argument("--ids", action="store_true", help="print the method ids only")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("tour", help="run every method end to end on built-in defaults")
    p.add_argument("--only", nargs="+", metavar="ID", help="run only these methods")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_tour)

    p = sub.add_parser("bench", help="run a method and its baselines side by side")
    p.add_argument("name", help="method id (see `hf-ext list`)")
    p.add_argument("--quick", action="store_true", help="small settings, under a minute")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plot", metavar="DIR", help="also draw the benchmark's figures as PNG files in DIR")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("assets", help="build and cache the real models and trained assets (offline)")
    p.add_argument("names", nargs="*", metavar="NAME", help="assets to build (default: all)")
    p.add_argument("--list", action="store_true", help="print the asset names")
    p.set_defaults(func=cmd_assets)

    for name, target in method_commands().items():
        sub.add_parser(name, help=f"see `hf-ext {name} --help` ({target.partition(':')[0]})", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = method_commands()
    if argv and argv[0] in commands:
        _quiet_hosts()
        return int(_load(commands[argv[0]])(argv[1:]))
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(name)s: %(message)s"
    )
    if not args.verbose:
        _quiet_hosts()
    return int(args.func(args))


def _quiet_hosts() -> None:
    """Silence host progress bars, info logs and deprecation notices so the CLI's own table stays readable."""
    import os
    import warnings

    for category in (FutureWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=category)

    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


if __name__ == "__main__":
    sys.exit(main())
