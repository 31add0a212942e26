"""Short read-only jobs by tierlab-probe (emulator/src/probe.c), as fio would run them: what the tiers'
calibration and self-check measure, dozens of jobs in interleaved rounds, where fio's own 0.3 s per job would
cost more than the jobs."""

import json

from .system import run


def job(probe: str, target: str, rw: str, block_bytes: int, iodepth: int, runtime_s: float, span_bytes: int) -> dict:
    """One time-based read job (read or randread) over the first span_bytes of target, with O_DIRECT and native
    AIO: its IOPS, mean latency and latency percentiles (p50, p90, p99, p99.9), as fio reports them."""
    found = json.loads(run([probe, target, rw, str(block_bytes), str(iodepth), f"{runtime_s:g}", str(span_bytes)],
                           timeout_s=runtime_s + 60).stdout)
    return {"rw": rw, "block_bytes": block_bytes, "iodepth": iodepth, "iops": found["iops"],
            "lat_us": found["lat_us"], "mean_us": found["mean_us"]}
