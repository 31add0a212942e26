"""A run's own cost beside its queries': `playbooks/tpch.yml` as a user repeats it (the database loaded, the tiers
up), end to end, against the time its queries took.

Under a tierlab root of its own, one first run brings up the tiers and loads TPC-H; then --repeats runs of the
same layout and queries, each timed from the command's start to its end. For each repeat: the wall time, the
queries' own time (the sum of their elapsed seconds, cold restarts and cache drops not included), the run's
phases as its manifest records them (tiers, engine, data, load, run, and collect with the analysis), the roles'
seconds as Ansible's profile_roles prints them, and the overhead: the wall time minus the queries' time. Target
(issue 40): at most 60 s of overhead for a repeat `make tpch`, and at most 15 s per point of a study of tiny runs.
Needs root; removes the root after.

    .venv/bin/python benchmarks/run_overhead.py --repeats 3
"""

import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import time
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale-factor", default="0.01")
    parser.add_argument("--queries", default="1,3,6")
    args = parser.parse_args()
    results = Path(BENCH_ROOT) / "results"
    variables = {"tierlab_root": BENCH_ROOT, "results_dir": str(results), "layout": "C+O",
                 "scale_factor": args.scale_factor, "queries": args.queries}
    rows = []
    try:
        first_s, _ = playbook("tpch.yml", variables)
        for _ in range(args.repeats):
            wall_s, out = playbook("tpch.yml", variables)
            run_dir = newest_run(results)
            with open(run_dir / "tables" / "queries.csv") as f:
                query_s = sum(float(row["elapsed_s"]) for row in csv.DictReader(f))
            phases = json.loads((run_dir / "manifest.json").read_text())["attempts"][-1]["phase_s"]
            roles = {name: float(seconds) for name, seconds in ROLE_LINE.findall(out)}
            rows.append({"wall_s": wall_s, "query_s": query_s, "phases": phases, "roles": roles})
    finally:
        # teardown purges the root's directories, and refuses while anything is still mounted in them
        playbook("teardown.yml", {"tierlab_root": BENCH_ROOT, "purge": True})
        subprocess.run(["rm", "-rf", "--one-file-system", BENCH_ROOT], check=True)
    print(f"\nTPC-H SF {args.scale_factor}, queries {args.queries}, layout C+O: first run (tiers, data, load) "
          f"{first_s:.0f} s; then {args.repeats} repeats")
    print(f"{'repeat':>6} {'wall s':>7} {'queries s':>9} {'overhead s':>10}  phases (s)")
    for number, row in enumerate(rows, 1):
        phases = ", ".join(f"{name} {seconds:.1f}" for name, seconds in row["phases"].items())
        print(f"{number:>6} {row['wall_s']:>7.1f} {row['query_s']:>9.1f} {row['wall_s'] - row['query_s']:>10.1f}  {phases}")
    overhead = statistics.median(row["wall_s"] - row["query_s"] for row in rows)
    print(f"\nmedian overhead per repeat: {overhead:.1f} s (target: at most 60 s for a repeat make tpch, "
          "15 s per point of a study of tiny runs)")
    print("\nroles, median seconds over the repeats (profile_roles)")
    names = sorted({name for row in rows for name in row["roles"]},
                   key=lambda name: -statistics.median(row["roles"].get(name, 0.0) for row in rows))
    for name in names:
        if name != "total":
            print(f"  {name:<32} {statistics.median(row['roles'].get(name, 0.0) for row in rows):>7.1f}")


if __name__ == "__main__":
    main()
