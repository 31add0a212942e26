"""An observation as a DBA runs one, end to end: a PostgreSQL cluster of its own (the observation tests' instance:
a 32 MiB index looked up at random by its traffic, in a memory group) observed by playbooks/observe.yml for a window
of intervals, every other one of the first half untraced. Prints what tracing cost the instance's own traffic
(each untraced interval against its traced neighbours, with the spread), the raw trace's bytes per hour of window,
the requests the trace holds against those the kernel counted on the disk (the reference), and the time analyze and
recommend took. Needs root; uses a tierlab root of its own and removes it, and the instance, after.

    .venv/bin/python benchmarks/observe_window.py --window-s 600 --interval-s 30
"""

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

import psycopg2  # noqa: E402
from own_instances import OwnPostgresql, PartitionedDisk, Traffic, own_dir, remove_own_dir  # noqa: E402

BENCH_ROOT = "/var/lib/tierlab-bench-observe"
PORT = 6790
KEYS = 1_500_000
LOAD = [f"CREATE TABLE hot (id int PRIMARY KEY, k int, pad text); INSERT INTO hot SELECT g, (g::bigint * 7919) % {KEYS}, "
        f"repeat('x', 20) FROM generate_series(1, {KEYS}) g; CREATE INDEX hot_k ON hot (k)", "VACUUM ANALYZE"]
ENV = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")}


def playbook(name: str, variables: dict) -> None:
    done = subprocess.run([str(ROOT / ".venv/bin/ansible-playbook"), f"playbooks/{name}", "-e", json.dumps(variables)],
                          cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=7200)
    if done.returncode != 0:
        sys.exit(f"playbooks/{name} failed:\n{done.stdout[-4000:]}")


def timed(cmd: list[str]) -> float:
    started = time.monotonic()
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, timeout=3600)
    return time.monotonic() - started


def overheads(intervals: list[dict]) -> list[float]:
    """Each untraced interval's work rate against the mean of its traced neighbours', as the tracing's cost (%)."""
    found = []
    for position, row in enumerate(intervals):
        if row["traced"] == "False":
            neighbours = [float(intervals[p]["work_per_s"]) for p in (position - 1, position + 1)
                          if 0 <= p < len(intervals) and intervals[p]["traced"] == "True"]
            if neighbours:
                found.append(100.0 * (1 - statistics.mean(neighbours) / float(row["work_per_s"])))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window-s", type=int, default=600)
    parser.add_argument("--interval-s", type=int, default=30)
    args = parser.parse_args()
    intervals_count = -(-args.window_s // args.interval_s)
    here = own_dir("bench-observe")
    results = Path(tempfile.mkdtemp(prefix="tierlab-bench-observe-"))
    disk = PartitionedDisk(here, 1 << 30)
    instance = None
    try:
        instance = OwnPostgresql(disk.mount / "data", PORT)
        instance.sql("CREATE DATABASE app")
        for sql in LOAD:
            instance.sql(sql, "app")
        instance.bound(48 << 20)
        conninfo = instance.account("observer", "observer-secret", here, "pg_read_all_settings")

        def connect():
            return psycopg2.connect(f"{instance.conninfo()} dbname=app password=postgres-secret")

        with Traffic(connect, "SELECT count(*) FROM hot WHERE k BETWEEN %s AND %s", KEYS, []):
            started = time.monotonic()
            playbook("observe.yml", {"tierlab_root": BENCH_ROOT, "results_dir": str(results), "engine": "postgresql",
                                     "conninfo": conninfo, "window_s": args.window_s, "interval_s": args.interval_s,
                                     "untraced_intervals": intervals_count // 4})
            playbook_s = time.monotonic() - started
        (run_dir,) = results.iterdir()
        with open(run_dir / "tables" / "intervals.csv") as f:
            rows = list(csv.DictReader(f))
        costs = overheads(rows)
        traced = [r for r in rows if r["traced"] == "True"]
        trace_bytes = sum(p.stat().st_size for p in (run_dir / "raw" / "traces").iterdir())
        traced_s = sum(float(r["elapsed_s"]) for r in traced)
        analyze_s = timed([str(ROOT / ".venv/bin/tierlab"), "analyze", str(run_dir)])
        recommend_s = timed([str(ROOT / ".venv/bin/tierlab"), "recommend", str(run_dir), "--fast-capacity", "40M",
                             "--profiles", "fast=optane,capacity=nand"])
        requests = sum(float(r["traced_requests"]) for r in traced)
        kernel = sum(float(r["kernel_requests"]) for r in traced)
        print(f"window: {len(rows)} intervals of {args.interval_s} s, {len(traced)} traced; playbook {playbook_s:.0f} s")
        print(f"tracing's cost to the instance's rate of work: median {statistics.median(costs):.1f}% over "
              f"{len(costs)} untraced intervals (min {min(costs):.1f}%, max {max(costs):.1f}%)")
        print(f"raw trace: {trace_bytes / 2**20:.1f} MiB for {traced_s:.0f} s traced: "
              f"{trace_bytes / traced_s * 3600 / 2**30:.2f} GiB per hour at {requests / traced_s:.0f} requests/s "
              f"({trace_bytes / max(requests, 1):.0f} bytes per request)")
        print(f"requests traced {requests:.0f}, counted by the kernel {kernel:.0f} ({100 * requests / kernel:.1f}%)")
        print(f"tierlab analyze {analyze_s:.1f} s, tierlab recommend {recommend_s:.1f} s")
    finally:
        if instance:
            instance.stop()
        disk.close()
        remove_own_dir(here)
        playbook("teardown.yml", {"tierlab_root": BENCH_ROOT, "purge": True})
        shutil.rmtree(BENCH_ROOT, ignore_errors=True)
        shutil.rmtree(results, ignore_errors=True)


if __name__ == "__main__":
    main()
