"""The tierlab command: analyze, compare, trace-stats, manifest, tiers check."""

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

from . import manifest
from .errors import RunDirError, TierlabError
from .metrics import RANDOM_PCT_THRESHOLD, REPEAT_THRESHOLD, STREAM_WINDOW
from .run_io import analyze, cut_traces, load_run, read_manifest, read_tables, write_tables
from .tiers_check import format_check, run_check
from .trace_stats import FORMATS, read_traces, suspect, trace_stats


def _progress():
    """A progress callback for reading traces: each input as it starts, with the time left from the pace so far."""
    started = time.monotonic()

    def show(done: int, total: int, label: str) -> None:
        spent = time.monotonic() - started
        left = f"; about {spent / (done - 1) * (total - done + 1):.0f} s left" if done > 1 else ""
        print(f"[{done}/{total}] reading {label}{left}", file=sys.stderr, flush=True)
    return show


def _analyze(args) -> None:
    # the report draws with matplotlib, whose import costs most of a second that trace-stats need not pay
    from .report import write_run_report

    run_dir = Path(args.run_dir)
    run = load_run(run_dir)
    requests_path = run_dir / "tables" / "requests.parquet"
    requests_path.parent.mkdir(exist_ok=True)
    tables = analyze(run, args.stream_window, args.random_threshold, args.repeat_threshold, args.tolerate_errors,
                     _progress(), requests_path)
    queries = tables["queries"]
    for query, attempt in cut_traces(queries):
        print(f"warning: the trace of {query} try {attempt} has no end marker: it was cut short, and the "
              "query's requests after the cut are missing (trace_complete=False in tables/queries.csv)",
              file=sys.stderr)
    for row in tables["trace_counts"].to_dict("records"):
        for problem in suspect({key: value for key, value in row.items() if pd.notna(value)}):
            print(f"warning: the trace of {row['query']} try {row['try']} has {problem} (tables/trace_counts.csv)",
                  file=sys.stderr)
    context = manifest.build(run_dir, "auto", with_artifacts=False)
    for path in [requests_path, *write_tables(run_dir, tables), *write_run_report(run_dir / "report", context, tables)]:
        print(path)
    print(queries.to_string(index=False, columns=["query", "try", "status", "elapsed_s", "io_time_s", "rows"]))


def _manifest(args) -> None:
    phases = json.loads(args.phases) if args.phases else None
    written = manifest.write(Path(args.run_dir), args.status, args.error, phases)
    print(f"{args.run_dir}/manifest.json: status {written['status']}")


def _compare(args) -> None:
    from .report import write_comparison_report

    runs, dilations = {}, {}
    for run_dir in map(Path, args.run_dirs):
        run = read_manifest(run_dir)
        run_id = run["run_id"]
        if run_id in runs:
            raise RunDirError(f"run {run_id} is given twice ({run_dir} and an earlier argument); give each run once")
        runs[run_id] = read_tables(run_dir)
        dilations[run_id] = (run.get("tiers_fidelity") or {}).get("dilation") or 1.0
    if len(set(dilations.values())) > 1:
        each = ", ".join(f"{run_id} {k:g}x" for run_id, k in dilations.items())
        raise RunDirError(f"these runs' modelled time was dilated differently ({each}), so their times cannot be "
                          "compared; run them on tiers brought up with the same tiers_dilation")
    out = Path(args.out) if args.out else Path(args.run_dirs[0]).parent / ("compare_" + "__".join(runs))[:200]
    for path in write_comparison_report(out, runs):
        print(path)


def _trace_stats(args) -> None:
    stats = trace_stats(read_traces(args.paths, args.format, args.tolerate_errors, _progress()), args.page_size)
    for problem in suspect(stats["counts"]):
        print(f"warning: the trace has {problem}", file=sys.stderr)
    if args.json:
        print(json.dumps(stats, indent=1, default=float))
        return
    for key, value in stats.items():
        print(f"{key:>26}  {value}")


def _tiers_check(args) -> None:
    result = run_check(Path(args.root), args.runtime_s)
    print(json.dumps(result, indent=1) if args.json else format_check(result))


def _checked(convert, allowed: str, accept):
    """An argparse type: the value converted, and refused with what is allowed unless accept(value)."""
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not allowed; allowed: {allowed}") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not allowed; allowed: {allowed}")
        return value
    return parse


PAGE_SIZE = _checked(int, "a power of two from 512 to 65536 bytes", lambda v: 512 <= v <= 65536 and v & (v - 1) == 0)
STREAM_WINDOW_ARG = _checked(int, "a whole number from 1 to 1024", lambda v: 1 <= v <= 1024)
RANDOM_THRESHOLD_ARG = _checked(float, "a percentage from 0 to 100", lambda v: 0 <= v <= 100)
REPEAT_THRESHOLD_ARG = _checked(float, "a rate of at least 1 (1.0: no page read twice)", lambda v: 1 <= v < float("inf"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tierlab", description="Analyze tierlab runs.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("analyze", help="write tables/ of a results directory from its raw traces")
    p.add_argument("run_dir")
    p.add_argument("--tolerate-errors", action="store_true",
                   help="skip (and count) unparseable trace lines instead of stopping at the first")
    p.add_argument("--stream-window", type=STREAM_WINDOW_ARG, default=STREAM_WINDOW,
                   help=f"recent requests per device a sequential read may continue (default {STREAM_WINDOW})")
    p.add_argument("--random-threshold", type=RANDOM_THRESHOLD_ARG, default=RANDOM_PCT_THRESHOLD,
                   help=f"a query is random above this %% of random read pages (default {RANDOM_PCT_THRESHOLD:g})")
    p.add_argument("--repeat-threshold", type=REPEAT_THRESHOLD_ARG, default=REPEAT_THRESHOLD,
                   help=f"a query is repeated above this repeat access rate (default {REPEAT_THRESHOLD:g})")
    p.set_defaults(func=_analyze)
    p = sub.add_parser("compare", help="put analyzed runs side by side (e.g. the layouts of the same queries)")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    p.add_argument("--out", help="directory for report.html, summary.md and compare.csv")
    p.set_defaults(func=_compare)
    p = sub.add_parser("trace-stats", help="access-pattern statistics of any block trace (no run directory needed)")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="a blkparse-style prefix, a per-CPU or merged binary file, blkparse text, or ftrace text")
    p.add_argument("--format", choices=FORMATS, default="auto")
    p.add_argument("--page-size", type=PAGE_SIZE, default=16384, help="page size in bytes; pages are device-aligned")
    p.add_argument("--json", action="store_true")
    p.add_argument("--tolerate-errors", action="store_true",
                   help="keep the good part of truncated or corrupt input, with the problems counted")
    p.set_defaults(func=_trace_stats)
    p = sub.add_parser("manifest", help="(re)write a run's manifest.json")
    p.add_argument("run_dir")
    p.add_argument("--status", choices=("auto", *manifest.STATUSES), default="auto",
                   help="auto: ok when every query try has a row, else partial")
    p.add_argument("--error", default="")
    p.add_argument("--phases", default="", help="JSON {phase: finish time}, with 'started' first")
    p.set_defaults(func=_manifest)
    p = sub.add_parser("tiers", help="the host's tiers")
    tiers_sub = p.add_subparsers(dest="tiers_command", required=True)
    p = tiers_sub.add_parser("check", help="run fio on each tier of this host (read-only): IOPS and latency percentiles "
                                           "against the device models' targets, and the tiers' fidelity")
    p.add_argument("--root", default="/var/lib/tierlab", help="the tierlab root the tiers were brought up under")
    p.add_argument("--runtime-s", type=float, default=2.0,
                   help="seconds per fio job (13 per tier: 8 on the device, 5 through the file system)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_tiers_check)
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except TierlabError as exc:
        sys.exit(f"tierlab {args.command}: {exc}")
