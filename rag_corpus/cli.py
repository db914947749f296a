"""`rag build | ingest | query | eval`: the guidance store from the command line.

The StitchCUDA CLI calls `add_rag_commands(subparsers)` and then `args.func(args)`; running
`python -m rag_corpus.cli rag ...` does the same on its own.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from rag_corpus.errors import RagError

DEFAULT_MIN_RECALL = 0.9
Command = Callable[[argparse.Namespace], int]


def _store_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--store",
        default=None,
        help="store directory (default: $STITCHCUDA_RAG_DIR or ~/.cache/stitchcuda/rag)",
    )
    options.add_argument(
        "--embedder",
        default=None,
        help="'hash' (offline default) or a local sentence-transformers model folder",
    )
    return options


def cmd_build(args: argparse.Namespace) -> int:
    from rag_corpus.store import build_store

    report = build_store(args.store, args.embedder, force=args.force)
    state = "built" if report.rebuilt else "already current"
    print(f"{state}: {report.notes} notes in collection {report.collection} at {report.store_dir}")
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    from rag_corpus.store import ingest

    report = ingest(args.path, args.store, args.embedder)
    print(f"ingested {report.chunks} chunks from {len(report.files)} file(s)")
    for name in report.files:
        print(f"  {name}")
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    from rag_corpus.store import retrieve

    where = {"kind": "note"} if args.notes_only else None
    hits = retrieve(args.text, k=args.k, where=where, store_dir=args.store, embedder=args.embedder)
    if not hits:
        print("no hits")
    for rank, hit in enumerate(hits, start=1):
        print(f"{rank}. [{hit.score:.3f}] {hit.title}  ({hit.id})")
        print(f"   source: {hit.source}  section: {hit.section}")
        if args.show_text:
            print("   " + hit.text.replace("\n", "\n   ") + "\n")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from rag_corpus.evaluation import evaluate

    report = evaluate(args.k, store_dir=args.store, embedder=args.embedder)
    print(f"recall@{report.k}: {report.recall:.3f} over {report.queries} queries")
    print(f"mean fraction of expected notes in top {report.k}: {report.mean_fraction:.3f}")
    for miss in report.misses:
        print(f"miss: {miss.query}\n  expected {', '.join(miss.expected)}; got {', '.join(miss.retrieved)}")
    return 0 if report.recall >= args.min_recall else 1


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_rag_commands(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `rag` with its four subcommands; each sets `func(args) -> exit code`."""
    options = _store_options()
    rag = subparsers.add_parser("rag", help="the NVIDIA guidance store (Chroma)")
    commands = rag.add_subparsers(dest="rag_command", metavar="{build,ingest,query,eval}", required=True)

    build = commands.add_parser("build", parents=[options], help="build or refresh the notes collection")
    build.add_argument("--force", action="store_true", help="rebuild even when the notes did not change")
    build.set_defaults(func=_guarded(cmd_build))

    ingest = commands.add_parser(
        "ingest", parents=[options], help="add your own NVIDIA docs (Markdown, HTML, PDF)"
    )
    ingest.add_argument("path", help="a file or a directory")
    ingest.set_defaults(func=_guarded(cmd_ingest))

    query = commands.add_parser(
        "query", parents=[options], help="print the guidance nearest to a diagnosis text"
    )
    query.add_argument("text", help="diagnosis text: bottleneck, symptoms, metric names")
    query.add_argument("-k", type=_positive_int, default=3, help="number of hits (default 3)")
    query.add_argument("--notes-only", action="store_true", help="leave ingested documents out")
    query.add_argument("--show-text", action="store_true", help="also print each hit's text")
    query.set_defaults(func=_guarded(cmd_query))

    evaluation = commands.add_parser("eval", parents=[options], help="recall@k of the evaluation queries")
    evaluation.add_argument("-k", type=_positive_int, default=3, help="cut-off rank (default 3)")
    evaluation.add_argument(
        "--min-recall", type=float, default=DEFAULT_MIN_RECALL, help="exit 1 below this recall (default 0.9)"
    )
    evaluation.set_defaults(func=_guarded(cmd_eval))
    return rag


def _guarded(command: Command) -> Command:
    """Turn a RagError into one line on stderr and exit code 2."""

    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except RagError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2

    run.__name__ = command.__name__
    run.__doc__ = command.__doc__
    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rag_corpus.cli")
    add_rag_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
