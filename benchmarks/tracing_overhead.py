"""Tracing overhead: the same queries with and without block tracing, in one session.

Runs playbooks/tpch.yml twice per round (trace=true, then trace=false; rounds
alternate the order), each query cold, and prints per-query elapsed seconds
(median over rounds) and the overhead of tracing. Needs root and the default
inventory; results land in results/ as ordinary runs.

    .venv/bin/python benchmarks/tracing_overhead.py --scale-factor 0.1 --queries 1,3,6,10,14 --rounds 2
"""

import argparse
import json
import os
import statistics
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(args, trace: bool) -> Path:
    results = ROOT / "results"
    before = set(results.iterdir()) if results.exists() else set()
    cmd = [str(ROOT / ".venv/bin/ansible-playbook"), "playbooks/tpch.yml",
           "-e", f"layout={args.layout}", "-e", f"scale_factor={args.scale_factor}",
           "-e", f"queries={args.queries}", "-e", f"trace={str(trace).lower()}"]
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")}
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, env=env)
    (new,) = set(results.iterdir()) - before
    return new


def elapsed(run_dir: Path) -> dict[str, float]:
    rows = [json.loads(line) for line in (run_dir / "raw" / "queries.jsonl").read_text().splitlines()]
    return {row["query"]: row["elapsed_s"] for row in rows if row["status"] == "ok"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layout", default="C+O")
    parser.add_argument("--scale-factor", default="0.1")
    parser.add_argument("--queries", default="1,3,6,10,14")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    times: dict[bool, dict[str, list[float]]] = {True: {}, False: {}}
    for round_number in range(args.rounds):
        for trace in ((True, False) if round_number % 2 == 0 else (False, True)):
            run_dir = run(args, trace)
            print(f"round {round_number + 1} trace={trace}: {run_dir.name}", flush=True)
            for query, seconds in elapsed(run_dir).items():
                times[trace].setdefault(query, []).append(seconds)
    print(f"\n{'query':<6} {'traced_s':>9} {'untraced_s':>10} {'overhead':>9}")
    total = {True: 0.0, False: 0.0}
    for query in sorted(times[True]):
        traced, untraced = statistics.median(times[True][query]), statistics.median(times[False][query])
        total[True] += traced
        total[False] += untraced
        print(f"{query:<6} {traced:9.3f} {untraced:10.3f} {100 * (traced / untraced - 1):8.1f}%")
    print(f"{'all':<6} {total[True]:9.3f} {total[False]:10.3f} {100 * (total[True] / total[False] - 1):8.1f}%")


if __name__ == "__main__":
    main()
