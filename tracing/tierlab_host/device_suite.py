"""The device suite of playbooks/devices.yml: fio on a scratch file on each tier, reads and writes.

What a device model's profile needs, measured through the tier's file system with O_DIRECT (the file is
written for the suite and removed after it, so the tier's data is never touched):
- latency at queue depth 1 of 4 KiB sequential and random reads and writes, as a distribution (the two
  reads, whose contrast decides whether the device streams, in interleaved rounds: READ_LATENCY_ROUNDS);
- requests below 4 KiB, and 4 KiB requests that are not 4 KiB-aligned;
- read latency as the share of writes beside them grows (random 4 KiB, queue depth 4);
- sustained sequential writes, their bandwidth every 100 ms (a write buffer filling, then its drain rate);
- bandwidth against queue depth 1 to 256 for 4 KiB to 256 KiB, random reads and then random writes.
The jobs run in this order: the writes' garbage collection, once provoked, would stay in every later job.
"""

import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from . import emulator, fio
from .system import HostError

SCRATCH_NAME = ".tierlab-devices"
SCRATCH_BYTES = 256 << 20
LATENCY_PERCENTILES = ("1", "5", "10", "25", "50", "75", "90", "95", "99", "99.9", "99.99")
BLOCK_BYTES = (4096, 16384, 65536, 262144)
IODEPTHS = (1, 4, 16, 64, 256)
WRITE_SHARES_PCT = (0, 10, 30, 50, 70)
SMALL_BLOCK_BYTES = (512, 1024, 2048)
SUSTAINED_BLOCK_BYTES, SUSTAINED_IODEPTH = 131072, 32
LOG_INTERVAL_MS = 100
# The host's cost per request on an emulated tier shifts by tens of percent from one second to the next
# (which CPUs fio, the loop worker and the emulator land on): measured once each, a second apart, sequential
# and random reads compared two moments of the host (CI measured a flat model's random reads 23% above its
# sequential ones, and once 21% below). So the two run in this many interleaved rounds of the job's runtime,
# each side kept from its least disturbed round (fio.least_disturbed_round). The median over the rounds was
# still 30% apart for the flat optane model beside a TPC-H run on the host, whose load came and went over
# the rounds: three of the five rounds of random reads fell in it, two of the sequential ones.
READ_LATENCY_ROUNDS = 5


def plan() -> list[list[dict]]:
    """Every job of the suite, in the order it runs (see the module's text), in groups: a group of more than
    one job runs in READ_LATENCY_ROUNDS interleaved rounds."""
    groups = [[{"kind": "latency", "rw": rw, "block_bytes": 4096, "iodepth": 1} for rw in ("read", "randread")]]
    jobs = [{"kind": "latency", "rw": rw, "block_bytes": 4096, "iodepth": 1} for rw in ("write", "randwrite")]
    jobs += [{"kind": "small", "rw": "randread", "block_bytes": b, "iodepth": 1} for b in SMALL_BLOCK_BYTES]
    jobs.append({"kind": "misaligned", "rw": "randread", "block_bytes": 4096, "iodepth": 1, "align_bytes": 512})
    jobs += [{"kind": "mixed", "rw": "randrw", "block_bytes": 4096, "iodepth": 4, "write_pct": share}
             for share in WRITE_SHARES_PCT]
    jobs.append({"kind": "sustained", "rw": "write", "block_bytes": SUSTAINED_BLOCK_BYTES,
                 "iodepth": SUSTAINED_IODEPTH})
    jobs += [{"kind": "bandwidth", "rw": rw, "block_bytes": b, "iodepth": depth}
             for rw in ("randread", "randwrite") for b in BLOCK_BYTES for depth in IODEPTHS]
    return groups + [[job] for job in jobs]


def _options(job: dict, log_prefix: Path) -> tuple[str, ...]:
    if "align_bytes" in job:
        # random offsets on 512 B boundaries: seven in eight 4 KiB requests straddle two 4 KiB blocks
        return (f"--blockalign={job['align_bytes']}",)
    if "write_pct" in job:
        return (f"--rwmixwrite={job['write_pct']}",)
    if job["kind"] == "sustained":
        return (f"--write_bw_log={log_prefix}", f"--log_avg_msec={LOG_INTERVAL_MS}")
    return ()


def measure(target: str, job: dict, runtime_s: float, sustained_s: float) -> dict:
    """One job of the plan run on target: the job with its read and write sides (and the sustained job's
    bandwidth every 100 ms), or with the error fio gave (a device of 4 KiB sectors refuses requests below
    them with O_DIRECT): the suite goes on, and the fit says what it misses."""
    # an emulated tier's image is written back to the host's disk after writes (the scratch's, a write job's):
    # on a slow host for seconds, beside the next job; flushed before each job
    os.sync()
    with tempfile.TemporaryDirectory() as logs:
        prefix = Path(logs) / "sustained"
        seconds = sustained_s if job["kind"] == "sustained" else runtime_s
        try:
            sides = fio.run_job(target, job["rw"], job["block_bytes"], job["iodepth"], seconds, SCRATCH_BYTES,
                                _options(job, prefix), LATENCY_PERCENTILES)
        except HostError as exc:
            return {**job, "runtime_s": seconds, "error": str(exc)}
        measured = {**job, "runtime_s": seconds, **sides}
        if job["kind"] == "sustained":
            measured["bandwidth_log"] = fio.bandwidth_log(prefix)
            measured["log_interval_s"] = LOG_INTERVAL_MS / 1000
    return measured


def measure_group(target: str, group: list[dict], runtime_s: float, sustained_s: float) -> list[dict]:
    """A group of the plan: one job measured once, or several in interleaved rounds, each job's sides from its
    least disturbed round (the rounds' p50s kept); a job that failed in any round has that round's error."""
    if len(group) == 1:
        return [measure(target, group[0], runtime_s, sustained_s)]
    runs = [[measure(target, job, runtime_s, sustained_s) for job in group] for _ in range(READ_LATENCY_ROUNDS)]
    measured = []
    for rounds in zip(*runs, strict=True):
        failed = [r for r in rounds if "error" in r]
        if failed:
            measured.append(failed[0])
            continue
        sides = [side for side in ("read", "write") if side in rounds[0]]
        measured.append({**rounds[0], "rounds": len(rounds),
                         **{side: fio.least_disturbed_round([r[side] for r in rounds]) for side in sides},
                         "p50_us_by_round": {side: [r[side]["lat_us"]["p50"] for r in rounds] for side in sides}})
    return measured


def suite(spec: dict, runtime_s: float, sustained_s: float) -> dict:
    """The suite on one tier: its jobs, and the emulated tier's dilation (the model runs that much slower)."""
    scratch = Path(spec["path"]) / SCRATCH_NAME
    tier = {"name": spec["name"], "role": spec["role"], "emulation": spec["emulation"], "dilation": 1.0}
    if spec["emulation"] == "model":
        tier["dilation"] = (emulator.calibration(spec["emulator_mountpoint"]) or {}).get("dilation", 1.0)
        tier["profile"] = Path(spec["profile_file"]).read_text()
    try:
        fio.write_scratch(scratch, SCRATCH_BYTES)
        tier["jobs"] = [job for group in plan() for job in measure_group(str(scratch), group, runtime_s, sustained_s)]
    finally:
        scratch.unlink(missing_ok=True)
    return tier


def main(spec_file: str, runtime_s: float, sustained_s: float, output: str) -> None:
    specs = json.loads(Path(spec_file).read_text())
    emulator.require_running()
    result = {"measured_at": datetime.now(UTC).isoformat(timespec="seconds"), "runtime_s": runtime_s,
              "sustained_s": sustained_s, "scratch_bytes": SCRATCH_BYTES,
              "tiers": [suite(spec, runtime_s, sustained_s) for spec in specs]}
    Path(output).write_text(json.dumps(result, indent=1))
    print(json.dumps({"changed": True, "output": output, "tiers": [t["name"] for t in result["tiers"]]}))
