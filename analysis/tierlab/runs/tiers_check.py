"""`tierlab tiers check`: the tiers' fio self-check on this host, through tierlab's host agent.

The agent writes the result where the tiers role keeps it, so the next run's
manifest records this check.
"""

import json
import os
import subprocess
from pathlib import Path

from ..errors import TiersError

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


def _target(job: dict) -> str:
    target = job.get("target")
    if not target:
        return f"{'':>10} {'':>9}"
    return f"{target['iops']:>10.0f} {target['p50_us']:>9.1f}"


def format_check(result: dict) -> str:
    dilation = result.get("dilation")
    lines = [f"checked at {result['checked_at']}, {result['runtime_s']:g} s per job in {result['rounds']} interleaved "
             f"rounds (figures: the median round), read-only on each device (first {result['span_bytes'] >> 20} MiB) "
             f"and through each file system (a {result['file_span_bytes'] >> 20} MiB scratch file, removed after)"]
    if dilation:
        lines.append(f"modelled time dilated {dilation:g}x on every modelled tier: targets are the device model's "
                     f"figures with latencies x{dilation:g} and IOPS /{dilation:g}")
    lines.append(f"{'tier':<10} {'medium':<7} {'pattern':<9} {'block':>6} {'qd':>3} {'IOPS':>10} {'p50 us':>9} "
                 f"{'p99 us':>9} {'target IOPS':>11} {'p50 us':>9} {'late':>6}")
    for tier in result["tiers"]:
        for job in tier["jobs"]:
            lat = job["lat_us"]
            late = f"{job['late_share']:>6.1%}" if "late_share" in job else f"{'':>6}"
            lines.append(f"{tier['name']:<10} {job['medium']:<7} {job['rw']:<9} {job['block_bytes'] // 1024:>5}K "
                         f"{job['iodepth']:>3} {job['iops']:>10.0f} {lat['p50']:>9.1f} {lat['p99']:>9.1f} "
                         f" {_target(job)} {late}")
    if result["contrasts"]:
        lines += ["", f"{'contrast':<56} {'medium':<7} {'model':>7} {'measured':>9} {'off':>6}  verdict"]
        for c in result["contrasts"]:
            lines.append(f"{c['name']:<56} {c['medium']:<7} {c['target']:>7.2f} {c['measured']:>9.2f} "
                         f"{c['off']:>+6.0%}  {c['verdict']}")
    fidelity = result["fidelity"]
    if fidelity["tiers"]:
        per_tier = ", ".join(f"{name} {verdict}" for name, verdict in fidelity["tiers"].items())
        lines += ["", f"fidelity: {fidelity['verdict']} ({per_tier})"]
        lines += [f"  {reason}" for reason in fidelity["reasons"]]
    return "\n".join(lines)
