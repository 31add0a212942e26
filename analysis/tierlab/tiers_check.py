"""`tierlab tiers check`: the tiers' fio self-check on this host, through tierlab's host agent.

The agent writes the result where the tiers role keeps it, so the next run's
manifest records this check.
"""

import json
import os
import subprocess
from pathlib import Path

from .errors import TiersError

HOST_PYTHON = "/usr/bin/python3"


def run_check(root: Path, runtime_s: float) -> dict:
    spec, agent = root / "tiers.json", root / "agent"
    if not spec.exists() or not (agent / "tierlab_host").is_dir():
        raise TiersError(f"no tiers are up under {root} (no {spec} or {agent}); run `make tiers` first, "
                         "or give --root for another tierlab root")
    cmd = [HOST_PYTHON, "-m", "tierlab_host", "tiers-check", str(spec), "--runtime-s", str(runtime_s),
           "--output", str(root / "state" / "tiers-check.json")]
    done = subprocess.run(cmd, cwd=agent, capture_output=True, text=True,
                          env={**os.environ, "TIERLAB_STATE_DIR": str(root / "state")})
    if done.returncode != 0:
        raise TiersError(done.stderr.strip() or f"{' '.join(cmd)} failed with exit {done.returncode}")
    return json.loads(done.stdout)


def format_check(result: dict) -> str:
    lines = [f"checked at {result['checked_at']}, {result['runtime_s']:g} s per job over the first "
             f"{result['span_bytes'] >> 20} MiB, read-only",
             f"{'tier':<10} {'pattern':<10} {'block':>6} {'qd':>3} {'IOPS':>10} {'p50 us':>9} {'p90 us':>9} "
             f"{'p99 us':>9} {'p99.9 us':>9}"]
    for tier in result["tiers"]:
        for job in tier["jobs"]:
            lat = job["lat_us"]
            lines.append(f"{tier['name']:<10} {job['rw']:<10} {job['block_bytes'] // 1024:>5}K {job['iodepth']:>3} "
                         f"{job['iops']:>10.0f} {lat['p50']:>9.1f} {lat['p90']:>9.1f} {lat['p99']:>9.1f} {lat['p99.9']:>9.1f}")
    return "\n".join(lines)
