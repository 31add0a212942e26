"""The tierlab command: analyze and manifest (more subcommands come with later issues)."""

import argparse
import json
import sys
from pathlib import Path

from . import manifest
from .errors import TierlabError
from .run_io import analyze, load_run, write_tables


def _analyze(args) -> None:
    run_dir = Path(args.run_dir)
    tables = analyze(load_run(run_dir, args.tolerate_errors))
    for path in write_tables(run_dir, tables):
        print(path)
    queries = tables["queries"]
    print(queries.to_string(index=False, columns=["query", "try", "status", "elapsed_s", "io_time_s", "rows"]))


def _manifest(args) -> None:
    phases = json.loads(args.phases) if args.phases else None
    written = manifest.write(Path(args.run_dir), args.status, args.error, phases)
    print(f"{args.run_dir}/manifest.json: status {written['status']}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tierlab", description="Analyze tierlab runs.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("analyze", help="write tables/ of a results directory from its raw traces")
    p.add_argument("run_dir")
    p.add_argument("--tolerate-errors", action="store_true",
                   help="skip (and count) unparseable trace lines instead of stopping at the first")
    p.set_defaults(func=_analyze)
    p = sub.add_parser("manifest", help="(re)write a run's manifest.json")
    p.add_argument("run_dir")
    p.add_argument("--status", choices=("auto", *manifest.STATUSES), default="auto",
                   help="auto: ok when every query try has a row, else partial")
    p.add_argument("--error", default="")
    p.add_argument("--phases", default="", help="JSON {phase: finish time}, with 'started' first")
    p.set_defaults(func=_manifest)
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except TierlabError as exc:
        sys.exit(f"tierlab {args.command}: {exc}")
