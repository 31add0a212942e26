"""A run's own cost beside its queries': `playbooks/tpch.yml` as a user repeats it (the database loaded, the tiers
up), end to end, against the time its queries took.

Under a tierlab root of its own, one first run brings up the tiers and loads TPC-H; then --repeats runs of the
same layout and queries, each timed from the command's start to its end. For each repeat: the wall time, the
queries' own time (the sum of their elapsed seconds, cold restarts and cache drops not included), the run's
phases as its manifest records them (tiers, engine, data, load, run, and collect with the analysis), the roles'
seconds as Ansible's profile_roles prints them, and the overhead: the wall time minus the queries' time. Target
(issue 40): at most 60 s of overhead for a repeat `make tpch`, and at most 15 s per point of a study of tiny runs.
With --analysis both, the repeats take turns with analyze_during_run true and false: each query's time under
each (does the window analysis beside the next query slow it?) and how long after the last query's end the
run's report was written (target: 5 s). Needs root; removes the root after.

    .venv/bin/python benchmarks/run_overhead.py --repeats 3
    .venv/bin/python benchmarks/run_overhead.py --repeats 6 --analysis both --scale-factor 0.1 --queries 3,9,10,12
"""

import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH_ROOT = "/var/lib/tierlab-bench-overhead"
ROLE_LINE = re.compile(r"^(\S+) -+ ([\d.]+)s$", re.M)
ENV = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
       "TIERLAB_STATE_DIR": f"{BENCH_ROOT}/state", "ANSIBLE_REMOTE_TMP": f"{BENCH_ROOT}/ansible-tmp"}


def playbook(name: str, variables: dict) -> tuple[float, str]:
    """The playbook run to its end: its wall seconds and its output."""
    started = time.monotonic()
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "ansible-playbook"), f"playbooks/{name}", "-e",
                           json.dumps(variables)], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"playbooks/{name} failed:\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}")
    return time.monotonic() - started, done.stdout


def newest_run(results: Path) -> Path:
    return max((p for p in results.iterdir() if p.is_dir()), key=lambda p: p.name)


def report_after_last_query_s(run_dir: Path) -> float:
    """Seconds from the end of the run's last query (its row's start and elapsed time) to its report's writing."""
    last = [json.loads(line) for line in (run_dir / "raw" / "queries.jsonl").read_text().splitlines()][-1]
    ended = datetime.fromisoformat(last["started_at"]).timestamp() + last["elapsed_s"]
    return (run_dir / "report" / "report.html").stat().st_mtime - ended


def print_analysis(rows: list[dict]) -> None:
    """Each query's seconds and the report's delay, by analyze_during_run."""
    by_setting = {setting: [row for row in rows if row["analysis"] == setting] for setting in ("true", "false")}
    print("\nanalyze_during_run: each query's seconds, median (least-most) over the repeats; the report's writing after "
          "the last query's end")
    for query in rows[0]["queries"]:
        cells = []
        for setting, taken in by_setting.items():
            seconds = [row["queries"][query] for row in taken]
            cells.append(f"{setting} {statistics.median(seconds):.2f} ({min(seconds):.2f}-{max(seconds):.2f})")
        print(f"  {query:<8} " + "   ".join(cells))
    for setting, taken in by_setting.items():
        delays = [row["report_after_s"] for row in taken]
        print(f"  report after the last query, {setting}: {statistics.median(delays):.1f} s "
              f"({min(delays):.1f}-{max(delays):.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale-factor", default="0.01")
    parser.add_argument("--queries", default="1,3,6")
    parser.add_argument("--analysis", choices=("true", "false", "both"), default="true",
                        help="analyze_during_run in the repeats; both: they take turns, true first")
    args = parser.parse_args()
    results = Path(BENCH_ROOT) / "results"
    variables = {"tierlab_root": BENCH_ROOT, "results_dir": str(results), "layout": "C+O",
                 "scale_factor": args.scale_factor, "queries": args.queries}
    settings = ["true", "false"] if args.analysis == "both" else [args.analysis]
    rows = []
    try:
        first_s, _ = playbook("tpch.yml", variables)
        for number in range(args.repeats):
            analysis = settings[number % len(settings)]
            wall_s, out = playbook("tpch.yml", {**variables, "analyze_during_run": analysis})
            run_dir = newest_run(results)
            with open(run_dir / "tables" / "queries.csv") as f:
                queries = {row["query"]: float(row["elapsed_s"]) for row in csv.DictReader(f)}
            phases = json.loads((run_dir / "manifest.json").read_text())["attempts"][-1]["phase_s"]
            roles = {name: float(seconds) for name, seconds in ROLE_LINE.findall(out)}
            rows.append({"wall_s": wall_s, "query_s": sum(queries.values()), "phases": phases, "roles": roles,
                         "analysis": analysis, "queries": queries, "report_after_s": report_after_last_query_s(run_dir)})
    finally:
        # teardown purges the root's directories, and refuses while anything is still mounted in them
        playbook("teardown.yml", {"tierlab_root": BENCH_ROOT, "purge": True})
        subprocess.run(["rm", "-rf", "--one-file-system", BENCH_ROOT], check=True)
    print(f"\nTPC-H SF {args.scale_factor}, queries {args.queries}, layout C+O: first run (tiers, data, load) "
          f"{first_s:.0f} s; then {args.repeats} repeats")
    print(f"{'repeat':>6} {'analysis':>8} {'wall s':>7} {'queries s':>9} {'overhead s':>10}  phases (s)")
    for number, row in enumerate(rows, 1):
        phases = ", ".join(f"{name} {seconds:.1f}" for name, seconds in row["phases"].items())
        print(f"{number:>6} {row['analysis']:>8} {row['wall_s']:>7.1f} {row['query_s']:>9.1f} "
              f"{row['wall_s'] - row['query_s']:>10.1f}  {phases}")
    overhead = statistics.median(row["wall_s"] - row["query_s"] for row in rows)
    print(f"\nmedian overhead per repeat: {overhead:.1f} s (target: at most 60 s for a repeat make tpch, "
          "15 s per point of a study of tiny runs)")
    print("\nroles, median seconds over the repeats (profile_roles)")
    names = sorted({name for row in rows for name in row["roles"]},
                   key=lambda name: -statistics.median(row["roles"].get(name, 0.0) for row in rows))
    for name in names:
        if name != "total":
            print(f"  {name:<32} {statistics.median(row['roles'].get(name, 0.0) for row in rows):>7.1f}")
    if len(settings) == 2:
        print_analysis(rows)


if __name__ == "__main__":
    main()
