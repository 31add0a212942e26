"""The tierlab command: arguments in, text out.

Commands: variables, analyze, compare, study, advise, validate, recommend, trace-stats, planner-costs, doctor, devices,
manifest, tiers check. pandas, the compiled metrics and matplotlib are imported by the commands that use them (about a
second and a half in all): `tierlab manifest`, which every run calls twice, `tierlab doctor` and `tierlab tiers check`
need none.
"""

import argparse
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

from .catalog.analysis import FORMATS, RANDOM_PCT_THRESHOLD, REPEAT_THRESHOLD, SCAN_REQUEST_BYTES, STREAM_WINDOW
from .catalog.values import figure, parse_bytes
from .errors import InputError, TierlabError
from .runs import manifest
from .runs.doctor import doctor, format_report
from .runs.tiers_check import format_check, run_check


def _defined(value):
    """value with every figure that is not a finite number (NaN: undefined; infinite) as None, numpy's numbers as
    Python's."""
    if isinstance(value, dict):
        return {key: _defined(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_defined(item) for item in value]
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def json_text(value) -> str:
    """JSON as RFC 8259 has it (no NaN or Infinity, which strict parsers refuse): undefined figures are null."""
    return json.dumps(_defined(value), indent=1, allow_nan=False)


def _progress():
    """A progress callback for reading traces: each input as it starts, with the time left from the pace so far."""
    started = time.monotonic()

    def show(done: int, total: int, label: str) -> None:
        spent = time.monotonic() - started
        left = f"; about {spent / (done - 1) * (total - done + 1):.0f} s left" if done > 1 else ""
        print(f"[{done}/{total}] reading {label}{left}", file=sys.stderr, flush=True)
    return show


def _follow_windows(args) -> None:
    """`tierlab analyze --follow`: each window of a run still going on as the query loop says its try ended."""
    from .runs.analyze import analyze_window
    from .runs.results import load_run

    run = load_run(Path(args.run_dir))
    for line in sys.stdin:
        label = line.strip()
        try:
            print(analyze_window(run, label, args.stream_window, args.random_threshold, args.repeat_threshold,
                                 args.tolerate_errors), flush=True)
        except TierlabError as error:
            # the analysis of the whole run reads this window from its trace again, and says what is wrong there
            print(f"warning: {label} is left to the analysis of the whole run: {error}", file=sys.stderr, flush=True)


def _analyze(args) -> None:
    if args.follow:
        _follow_windows(args)
        return
    import pandas as pd

    from .placement.traced import device_profiles
    from .report.run import write_run_report
    from .runs import window_store
    from .runs.analyze import analyze
    from .runs.results import cut_traces, load_run, write_tables
    from .traces.stats import suspect

    run_dir = Path(args.run_dir)
    run = load_run(run_dir)
    requests_path = run_dir / "tables" / "requests.parquet"
    requests_path.parent.mkdir(exist_ok=True)
    profiles = device_profiles(args.profiles, [], Path()) if args.profiles else None
    tables = analyze(run, args.stream_window, args.random_threshold, args.repeat_threshold, args.tolerate_errors,
                     _progress(), requests_path, profiles)
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
    # the windows analysed during the run are in requests.parquet and the tables now
    shutil.rmtree(run_dir / window_store.DIRECTORY, ignore_errors=True)
    print(queries.to_string(index=False, columns=["query", "try", "status", "elapsed_s", "io_time_s", "rows"]))


def _manifest(args) -> None:
    phases = json.loads(args.phases) if args.phases else None
    written = manifest.write(Path(args.run_dir), args.status, args.error, phases)
    print(f"{args.run_dir}/manifest.json: status {written['status']}")


def _compare(args) -> None:
    from .report.compare import compare_runs

    _print_comparison(*compare_runs([Path(run_dir) for run_dir in args.run_dirs], Path(args.out) if args.out else None))


def _print_comparison(paths: list[Path], warnings: list[str]) -> None:
    for path in paths:
        print(path)
    for warning in warnings:
        print(f"warning: {warning}")


def _extra_vars(text: str) -> dict:
    try:
        extra = json.loads(text)
    except ValueError as error:
        raise InputError(f"--extra-vars {text!r} is not JSON ({error})") from None
    if not isinstance(extra, dict):
        raise InputError(f"--extra-vars {text!r}: give a JSON object, " """e.g. '{"tierlab_root": "/srv/tierlab"}'""")
    return extra


def _assignment(option: str, text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not equals or not name:
        raise InputError(f"{option} {text!r}: give NAME=VALUE, e.g. scale_factor=0.1")
    return name, value


DURATION_UNITS = {"s": 1, "m": 60, "h": 3600}


def _duration(text: str) -> float:
    """Seconds of a duration written as a number with s, m or h (2h, 90m, 600s)."""
    number, unit = text[:-1], text[-1:]
    try:
        seconds = float(number) * DURATION_UNITS[unit]
    except (KeyError, ValueError):
        seconds = None
    if seconds is None or not 0 < seconds < 30 * 86400:
        raise InputError(f"--stop-after {text!r}: give a positive duration under 30 days with its unit s, m or h, "
                         "e.g. 2h or 90m")
    return seconds


def _point_numbers(option: str, text: str) -> frozenset[int]:
    """The point numbers of --again or --points, written as 8,16 or 29-42, or both (1,5-8)."""
    numbers = set()
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        if not (first.isdigit() and int(first) > 0 and (not last or last.isdigit() and int(last) >= int(first))):
            raise InputError(f"{option} {text!r}: give the numbers of the points, as study.json and the study's output "
                             "number them, joined by commas, a range as its first and last, e.g. 8,16 or 29-42")
        numbers.update(range(int(first), int(last or first) + 1))
    return frozenset(numbers)


def _study(args) -> None:
    import pandas as pd

    from .report.compare import compare_runs
    from .studies.study import fastest, new_study_dir, points, read_study, read_study_record, run_study

    overrides = dict(_assignment("--set", text) for text in args.set)
    if args.resume and not args.file and (overrides or args.repetitions is not None):
        raise InputError("--set and --repetitions change a study file: give the file the study was started with "
                         "and the same options, beside --resume")
    if args.resume:
        study_dir = Path(args.resume)
        record = read_study_record(study_dir)
        study = read_study(args.file, overrides, args.repetitions) if args.file else record["study"]
    elif args.file:
        study = read_study(args.file, overrides, args.repetitions)
        study_dir = Path(args.study_dir) if args.study_dir else new_study_dir(Path(args.results_dir), study)
    else:
        raise InputError("give a study file (tierlab study FILE), or a study to resume (--resume results/<study_id>)")
    extra = _extra_vars(args.extra_vars)
    stop_after = _duration(args.stop_after) if args.stop_after else None
    again = _point_numbers("--again", args.again) if args.again else frozenset()
    only = _point_numbers("--points", args.points) if args.points else None
    if again and not args.resume:
        raise InputError("--again runs points of a study that ran: give it with --resume results/<study_id>")
    print(f"study {study_dir}", flush=True)
    record = run_study(study, study_dir, extra, inventory=Path(args.inventory) if args.inventory else None,
                       stop_after=stop_after, again=again, only=only)
    ok = [study_dir / point["run_id"] for point in record["points"] if point["status"] == "ok"]
    if len(ok) > 1:
        _print_comparison(*compare_runs(ok, study_dir / "compare"))
        best = fastest(study, record, pd.read_csv(study_dir / "compare" / "compare.csv"))
        best.to_csv(study_dir / "fastest.csv", index=False, float_format="%.6g")
        print(f"{study_dir / 'fastest.csv'}:\n{best.to_string(index=False, float_format=figure)}")
    total = len(points(study))
    left = total - len(ok)
    if left:
        sys.exit(f"tierlab study: {left} of {total} points have no ok run (study.json says why, where one ran); "
                 f"run them with: tierlab study --resume {study_dir}")


def _advise(args) -> None:
    from .report.advice import write_advice_report
    from .studies.advise import advise_study
    from .studies.study import read_study_record

    study_dir = Path(args.study_dir)
    record = read_study_record(study_dir)
    advice, lines = advise_study(study_dir, record)
    out = Path(args.out) if args.out else study_dir / "advice"
    out.mkdir(parents=True, exist_ok=True)
    advice.to_csv(out / "advice.csv", index=False, float_format="%.6g")
    for path in (out / "advice.csv", *write_advice_report(out, record["study"], advice, lines)):
        print(path)
    print("\n".join(lines))


def _findings(args) -> None:
    from .report.findings import write_findings_page
    from .studies.findings import gather, write_gathered
    from .studies.published import carry_published

    out = Path(args.out)
    # every study read before any is written: a study that cannot be read leaves the published ones as they were
    gathered = [carry_published(gather(Path(study_dir)), out / "findings") for study_dir in args.study_dirs]
    for tables in gathered:
        print(write_gathered(tables, out / "findings"), flush=True)
    for path in write_findings_page(out / "findings", out):
        print(path)


def _recommend(args) -> None:
    from .placement.recommend import format_summary, recommend

    result, tables = recommend(args.run_dirs, parse_bytes("--fast-capacity", args.fast_capacity), args.profiles,
                               args.weights, args.from_layout, _progress(), args.fast_location)
    text = format_summary(result)
    if args.out:
        from .report.placement import write_recommend_report

        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "recommend.json").write_text(json_text(result))
        for name, script in result["migration"]["plan"].get("files", {}).items():
            (out / name).write_text(script)
        for name, table in tables.items():
            table.to_csv(out / f"{name}.csv", index=False, float_format="%.6g")
        write_recommend_report(out, result, text)
    print(json_text(result) if args.json else text)


def _devices(args) -> None:
    from .report.devices import write_devices_report
    from .runs.devices import fit_suite

    run_dir = Path(args.run_dir)
    result, fitted, written = fit_suite(run_dir)
    for path in written:
        if path.suffix == ".toml":
            print(f"{path}: " + ", ".join(f"{k} {v}" for k, v in fitted[path.stem].items()))
    print(write_devices_report(run_dir, result, fitted))


def _validate(args) -> None:
    from .placement.validate import validate
    from .report.placement import write_validation_report
    from .studies.study import read_study_record

    study_dir = Path(args.study_dir)
    record = read_study_record(study_dir)
    tables = validate(study_dir, record, args.profiles)
    for name, table in tables.items():
        path = study_dir / f"{name}.csv"
        table.to_csv(path, index=False, float_format="%.6g")
        shown = table.drop(columns="run_id", errors="ignore").to_string(index=False, float_format=figure)
        print(f"{path}:\n{shown}")
    print(write_validation_report(study_dir, record["study"], tables.get("validation"), tables.get("validation_layouts"),
                                  tables.get("cache_validation")))


def _trace_stats(args) -> None:
    from .traces.stats import suspect, trace_stats

    stats = trace_stats(args.paths, args.format, args.tolerate_errors, args.page_size, _progress())
    for problem in suspect(stats["counts"]):
        print(f"warning: the trace has {problem}", file=sys.stderr)
    if args.json:
        print(json_text(stats))
        return
    for key, value in stats.items():
        print(f"{key:>26}  {value}")


def _planner_costs(args) -> None:
    from .placement import planner_costs
    from .placement.traced import device_profiles

    profiles = device_profiles(args.profiles, [], Path())
    tiers = planner_costs.planner_costs(profiles, args.page_size, args.scan_request_size)
    print(json_text(tiers) if args.json else
          planner_costs.format_costs(tiers, args.page_size, args.scan_request_size))


def _variables(args) -> None:
    from .catalog.reference import markdown

    print(markdown(), end="")


def _doctor(args) -> None:
    report = doctor(args.extra_vars, Path(args.inventory) if args.inventory else None, args.host, args.root)
    print(json_text(report) if args.json else format_report(report))
    if any(item["verdict"] == "missing" for item in report["items"]):
        sys.exit(1)


def _tiers_check(args) -> None:
    result = run_check(Path(args.root), args.runtime_s)
    print(json_text(result) if args.json else format_check(result))


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
REQUEST_SIZE_ARG = _checked(int, "a multiple of 512 bytes from 512 to 16777216",
                            lambda v: 512 <= v <= 16 << 20 and v % 512 == 0)
STREAM_WINDOW_ARG = _checked(int, "a whole number from 1 to 1024", lambda v: 1 <= v <= 1024)
RANDOM_THRESHOLD_ARG = _checked(float, "a percentage from 0 to 100", lambda v: 0 <= v <= 100)
REPEAT_THRESHOLD_ARG = _checked(float, "a rate of at least 1 (1.0: no page read twice)", lambda v: 1 <= v < float("inf"))


def _run_commands(sub) -> None:
    """The commands of one run: variables, analyze, compare, manifest."""
    p = sub.add_parser("variables", help="the variables a run takes (-e name=value): defaults, what each allows and "
                                         "means, as Markdown (docs/variables.md)")
    p.set_defaults(func=_variables)
    p = sub.add_parser("analyze", help="write tables/ of a results directory from its raw traces")
    p.add_argument("run_dir")
    p.add_argument("--profiles", metavar="fast=P,capacity=P",
                   help="device profiles (names or .toml files) that the contract judges each tier by, e.g. a real "
                        "device's fitted by playbooks/devices.yml; default: the emulated tiers' models")
    p.add_argument("--tolerate-errors", action="store_true",
                   help="skip (and count) unparseable trace lines instead of stopping at the first")
    p.add_argument("--stream-window", type=STREAM_WINDOW_ARG, default=STREAM_WINDOW,
                   help=f"recent requests per device a sequential read may continue (default {STREAM_WINDOW})")
    p.add_argument("--random-threshold", type=RANDOM_THRESHOLD_ARG, default=RANDOM_PCT_THRESHOLD,
                   help=f"a query is random above this %% of random read pages (default {RANDOM_PCT_THRESHOLD:g})")
    p.add_argument("--repeat-threshold", type=REPEAT_THRESHOLD_ARG, default=REPEAT_THRESHOLD,
                   help=f"a query is repeated above this repeat access rate (default {REPEAT_THRESHOLD:g})")
    p.add_argument("--follow", action="store_true",
                   help="for a run still going on: read the labels of its traced tries (e.g. q03_try1) from standard "
                        "input, a line each as each ends, and sum up each window, kept in tables/windows/ for the "
                        "analysis of the whole run to take, until the input ends")
    p.set_defaults(func=_analyze)
    p = sub.add_parser("compare", help="put analyzed runs side by side (e.g. the layouts of the same queries)")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    p.add_argument("--out", help="directory for report.html, summary.md and compare.csv")
    p.set_defaults(func=_compare)
    p = sub.add_parser("manifest", help="(re)write a run's manifest.json")
    p.add_argument("run_dir")
    p.add_argument("--status", choices=("auto", *manifest.STATUSES), default="auto",
                   help="auto: ok when every query try has a row, else partial")
    p.add_argument("--error", default="")
    p.add_argument("--phases", default="", help="JSON {phase: finish time}, with 'started' first")
    p.set_defaults(func=_manifest)


def _study_commands(sub) -> None:
    """The commands of many runs: study, advise, validate."""
    p = sub.add_parser("study", help="run a study: one workload over a matrix of variables, a run per point, "
                                    "resumable; then compare the runs")
    p.add_argument("file", nargs="?", help="the study file (YAML; docs/user-guide.md: Studies of many runs)")
    p.add_argument("--resume", metavar="STUDY_DIR", help="run the points of results/<study_id> that have no ok run yet")
    p.add_argument("--results-dir", default="results", help="where the study's directory is made (default: results)")
    p.add_argument("--study-dir", metavar="DIR", help="the study's directory instead of a new one under --results-dir; "
                                                      "the study resumes there if it ran there before")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="give a variable of the study file another value in every run (e.g. scale_factor=0.1 for a "
                        "first look); study.json records the study as it ran")
    p.add_argument("--repetitions", type=int, metavar="N", help="runs of each point, instead of the study file's")
    p.add_argument("--extra-vars", default="{}", metavar="JSON",
                   help="host variables for every run, as ansible-playbook -e takes them (e.g. tierlab_root, "
                        "tiers_dilation); study.json keeps them for --resume")
    p.add_argument("-i", "--inventory", metavar="INVENTORY",
                   help="the hosts to run on (default: ansible.cfg's, this host); with several, the points are "
                        "spread over them, one at a time on each")
    p.add_argument("--stop-after", metavar="DURATION",
                   help="start no point after this long (e.g. 2h): a long study in chunks, each ended by --resume")
    p.add_argument("--again", metavar="POINTS",
                   help="with --resume: run these points (e.g. 8,16) again though they have an ok run; the new run "
                        "takes each one's place, the earlier stays in the directory, listed as superseded")
    p.add_argument("--points", metavar="POINTS",
                   help="run these points only (e.g. 29-42): a study spread over sessions or hosts, whose other points "
                        "are published (tierlab findings carries them) or left for a later --resume")
    p.set_defaults(func=_study)
    p = sub.add_parser("advise", help="what a study says of the page size, buffer pool, compression and threads "
                                     "it varies: the best value, the knee, the cost, where scaling stops; with evidence")
    p.add_argument("study_dir", metavar="STUDY_DIR")
    p.add_argument("--out", metavar="DIR", help="where advice.csv, summary.md and report.html go (default: "
                                                "STUDY_DIR/advice)")
    p.set_defaults(func=_advise)
    p = sub.add_parser("findings", help="the study's experiments as findings: each study's summary tables under "
                                       "OUT/findings/<study>/, and OUT/findings.md and .html written from all of them")
    p.add_argument("study_dirs", nargs="*", metavar="STUDY_DIR",
                   help="studies to (re)summarise, and a device suite's results/devices_<time>_<host> as E6's; none: "
                        "write the page again from the tables already there")
    p.add_argument("--out", default="docs", help="where findings/, findings.md and findings.html go (default: docs)")
    p.set_defaults(func=_findings)
    p = sub.add_parser("validate", help="a study's layouts, or caches, as measured against what recommend predicts "
                                       "for them from each of its runs: Spearman's rank correlation and the regret "
                                       "(beside repeat_spearman, the measured ranking's own reproducibility); the "
                                       "cache's time and hit share")
    p.add_argument("study_dir", metavar="STUDY_DIR")
    p.add_argument("--profiles", help="device profiles of the tiers, fast=P,capacity=P (default: the runs' own)")
    p.set_defaults(func=_validate)


def _placement_commands(sub) -> None:
    """The commands that say where objects belong: recommend, planner-costs."""
    p = sub.add_parser("recommend", help="the best layout for a fast-tier capacity, the capacity curve, and the fast "
                                         "tier as a block cache instead, predicted from traced runs")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="analyzed runs of one engine and workload")
    p.add_argument("--fast-capacity", required=True, metavar="SIZE", help="the fast tier's capacity, e.g. 2G or 512M")
    p.add_argument("--profiles", metavar="fast=P,capacity=P",
                   help="device profiles (names or .toml files) to predict with; default: the traced tiers' models")
    p.add_argument("--weights", metavar="q03=2,q10=1", help="the queries to optimise for and their weights "
                                                              "(default: every traced query, weight 1)")
    p.add_argument("--from-layout", metavar="LAYOUT", help="the layout to migrate from (default: the traced run's); "
                   "for runs placed by object, their units joined by + (or None)")
    p.add_argument("--fast-location", metavar="DIR", help="an observed instance's: the directory on the fast device, on "
                                                          "its host, where its migration makes the fast tablespace "
                                                          "(PostgreSQL) or rebuilds the tables (MariaDB, MySQL)")
    p.add_argument("--out", metavar="DIR", help="also write recommend.json, the layouts and curves as CSV, and the "
                                                "migration's scripts with their undo (migration.sql or .sh) here")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_recommend)
    p = sub.add_parser("planner-costs", help="PostgreSQL's seq_page_cost, random_page_cost and "
                                             "effective_io_concurrency per tablespace, from the tiers' device models")
    p.add_argument("--profiles", metavar="fast=P,capacity=P", default="fast=optane,capacity=nand",
                   help="device profiles (names or .toml files); default: fast=optane,capacity=nand")
    p.add_argument("--page-size", type=PAGE_SIZE, default=8192, help="the block size in bytes (default 8192)")
    p.add_argument("--scan-request-size", type=REQUEST_SIZE_ARG, default=SCAN_REQUEST_BYTES,
                   help="the requests a sequential scan becomes, in bytes: the device's read-ahead (default "
                        f"{SCAN_REQUEST_BYTES}); a run's request sizes show it")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_planner_costs)


def _trace_commands(sub) -> None:
    """The commands on any block trace: trace-stats."""
    p = sub.add_parser("trace-stats", help="access-pattern statistics of any block trace (no run directory needed)")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="a blkparse-style prefix, a per-CPU or merged binary file, blkparse text, or ftrace text")
    p.add_argument("--format", choices=FORMATS, default="auto")
    p.add_argument("--page-size", type=PAGE_SIZE, default=16384, help="page size in bytes; pages are device-aligned")
    p.add_argument("--json", action="store_true")
    p.add_argument("--tolerate-errors", action="store_true",
                   help="keep the good part of truncated or corrupt input, with the problems counted")
    p.set_defaults(func=_trace_stats)


def _device_commands(sub) -> None:
    """The commands on the host, its devices and tiers: doctor, devices, tiers check."""
    p = sub.add_parser("devices", help="fit a device profile to each tier of playbooks/devices.yml's measurements, "
                                       "with the curves and a report")
    p.add_argument("run_dir", metavar="DEVICES_DIR", help="results/devices_<time>_<host>, with raw/devices.json")
    p.set_defaults(func=_devices)
    p = sub.add_parser("doctor", help="what a run with these variables needs of this host, what the host has and "
                                      "lacks, and the fix: the checks every playbook run starts with")
    p.add_argument("-e", "--extra-vars", action="append", default=[], metavar="NAME=VALUE",
                   help="a run's or its tiers' variable, as the playbooks take it (docs/variables.md), e.g. "
                        "-e engine=postgresql -e scale_factor=1")
    p.add_argument("-i", "--inventory", metavar="INVENTORY",
                   help="the inventory whose host's tiers and tierlab_root to check for (default: ansible.cfg's, "
                        "this host)")
    p.add_argument("--host", help="that host (default: the inventory's first); probed where it is: locally, or over "
                                   "Ansible (playbooks/doctor.yml)")
    p.add_argument("--root", help="the tierlab root (default: the host's tierlab_root, /var/lib/tierlab)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_doctor)
    p = sub.add_parser("tiers", help="the host's tiers")
    tiers_sub = p.add_subparsers(dest="tiers_command", required=True)
    p = tiers_sub.add_parser("check", help="measure each tier of this host again (read-only jobs): IOPS and latency percentiles "
                                           "against the device models' targets, and the tiers' fidelity")
    p.add_argument("--root", default="/var/lib/tierlab", help="the tierlab root the tiers were brought up under")
    p.add_argument("--runtime-s", type=float, default=1.0,
                   help="seconds per job (10 per tier: 5 on the device, 5 through the file system)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_tiers_check)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tierlab", description="Study database workloads on tiered storage.")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_run_commands, _study_commands, _placement_commands, _trace_commands, _device_commands):
        add(sub)
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except TierlabError as exc:
        sys.exit(f"tierlab {args.command}: {exc}")


def entry() -> None:
    """The `tierlab` command: main, then out at once. Python's teardown of numba's and pandas' modules takes
    half a second here, as long as a small command's work (a tenth of trace-stats' on 10^7 requests); by
    then every file is closed and every thread and child process has ended."""
    main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
