"""What breaking each rule of the unwritten contract (metrics/contract.py) costs on a device, from the device
suite's microbenchmarks (playbooks/devices.yml): for each rule, a job of the suite that keeps it beside one that
breaks it, and how many times the broken one's time per byte is the kept one's. A run's contract check says
which rules its queries break; this says which of them matter on the tier. Figures are in the host's time (an
emulated tier's dilated), which leaves the ratios as the model's.

- low request scale: 4 KiB random reads at the depth where the device is busy (the shallowest whose IOPS is
  within 10% of the most at any depth) against the deepest queue: the same IOPS, and the rest only waits;
- random access is only half-bad: 4 KiB random reads at queue depth 1 against sequential ones;
- control overall load: 4 KiB random reads at queue depth 4 with half the requests writes against none;
- avoid tiny accesses: 512 B random reads against 4 KiB ones, per byte;
- issue 4 KiB-aligned requests: 4 KiB random reads on 512 B boundaries against 4 KiB-aligned ones;
- forget garbage collection: the sustained writes' best 100 ms against their rate once it fell;
- avoid crowded accesses: not measured (no job of the suite sends requests to one 4 KiB chunk at once).
Latencies are means: a cost is the time a workload pays on average, and some rules' cost falls on a share of the
requests only (a read pays for a write only when one is in flight beside it), which a median misses.
"""

import math
import statistics

import pandas as pd

from ..metrics.contract import RULES
from . import fit

COLUMNS = ["tier", "rule", "kept_by", "kept", "broken_by", "broken", "unit", "cost_x", "evidence"]
# the busy depth: the shallowest queue within this share of the most IOPS at any depth
BUSY_SHARE = 0.9


def _job(tier: dict, kind: str, **match) -> dict | None:
    """The tier's job of that kind (None where fio refused it or the suite had none)."""
    jobs = fit.matching(tier, kind, **match)
    return jobs[0] if jobs and "error" not in jobs[0] else None


def _mean(job: dict | None) -> float:
    return job["read"]["mean_us"] if job and "read" in job else math.nan


def _row(tier: dict, rule: str, kept_by: str, kept: float, broken_by: str, broken: float, unit: str,
         cost_x: float, evidence: str) -> dict:
    return {"tier": tier["name"], "rule": rule, "kept_by": kept_by, "kept": kept, "broken_by": broken_by,
            "broken": broken, "unit": unit, "cost_x": cost_x, "evidence": evidence}


def _request_scale(tier: dict) -> dict:
    grid = sorted((j for j in fit.grid(tier, "read") if j["rw"] == "randread" and j["block_bytes"] == 4096),
                  key=lambda j: j["iodepth"])
    rule = RULES[0]
    if not grid:
        return _row(tier, rule, "", math.nan, "", math.nan, "us", math.nan, "not measured: the suite's 4 KiB "
                    "random reads against queue depth failed")
    most = max(j["read"]["iops"] for j in grid)
    busy = next(j for j in grid if j["read"]["iops"] >= BUSY_SHARE * most)
    deepest = grid[-1]
    kept, broken = busy["read"]["mean_us"], deepest["read"]["mean_us"]
    evidence = (f"busy at QD{busy['iodepth']} ({busy['read']['iops']:.0f} IOPS, {busy['read']['iops'] / most:.0%} "
                f"of the most); at QD{deepest['iodepth']} {deepest['read']['iops']:.0f} IOPS, each read "
                f"{broken:.0f} us against {kept:.0f} us") if busy is not deepest else (
                f"IOPS still grew up to the deepest queue tried (QD{deepest['iodepth']}: "
                f"{deepest['read']['iops']:.0f} IOPS, each read {broken:.0f} us): no depth of the suite only waits")
    return _row(tier, rule, f"4 KiB random reads, QD{busy['iodepth']}", kept,
                f"4 KiB random reads, QD{deepest['iodepth']}", broken, "us", broken / kept, evidence)


def _latency_pair(tier: dict, rule: str, kept_job: dict | None, kept_by: str, broken_job: dict | None,
                  broken_by: str, per_byte: tuple[int, int] = (1, 1)) -> dict:
    """Two jobs' mean read latencies; per_byte (kept bytes, broken bytes) compares them per byte."""
    kept, broken = _mean(kept_job), _mean(broken_job)
    if math.isnan(kept) or math.isnan(broken):
        return _row(tier, rule, kept_by, kept, broken_by, broken, "us", math.nan,
                    "not measured: a job of the two failed (raw/devices.json has fio's error)")
    cost = (broken / per_byte[1]) / (kept / per_byte[0])
    per = " per byte" if per_byte != (1, 1) else ""
    return _row(tier, rule, kept_by, kept, broken_by, broken, "us", cost,
                f"{broken_by} {broken:.0f} us against {kept_by} {kept:.0f} us, means: {cost:.2f}x{per}")


def _garbage_collection(tier: dict) -> dict:
    rule = RULES[6]
    job = _job(tier, "sustained")
    if job is None or not job.get("bandwidth_log"):
        return _row(tier, rule, "", math.nan, "", math.nan, "MB/s", math.nan,
                    "not measured: the sustained writes failed")
    rates = [rate / 1e6 for _, rate in job["bandwidth_log"]]
    best, tail = max(rates), statistics.median(rates[-max(1, len(rates) // 3):])
    seconds = len(rates) * job["log_interval_s"]
    return _row(tier, rule, "sustained writes, best 100 ms", best, "sustained writes, last third", tail, "MB/s",
                best / tail if tail else math.inf,
                f"{job['block_bytes'] // 1024} KiB writes at QD{job['iodepth']} for {seconds:.0f} s: {best:.0f} MB/s "
                f"at best, {tail:.0f} MB/s over the last third")


def rule_costs(result: dict) -> pd.DataFrame:
    """Per tier of the suite's result (raw/devices.json), each rule of the contract with the jobs that keep and
    break it, their figures, and the cost of breaking it."""
    rows = []
    for tier in result["tiers"]:
        aligned = _job(tier, "latency", rw="randread")
        rows += [
            _request_scale(tier),
            _latency_pair(tier, RULES[1], _job(tier, "latency", rw="read"), "4 KiB sequential reads, QD1", aligned,
                          "4 KiB random reads, QD1"),
            _row(tier, RULES[2], "", math.nan, "", math.nan, "", math.nan,
                 "not measured: no job of the suite sends requests to one 4 KiB chunk at once"),
            _latency_pair(tier, RULES[3], _job(tier, "mixed", write_pct=0), "reads, 0% writes, QD4",
                          _job(tier, "mixed", write_pct=50), "reads, 50% writes, QD4"),
            _latency_pair(tier, RULES[4], aligned, "4 KiB random reads, QD1",
                          _job(tier, "small", block_bytes=512), "512 B random reads, QD1", per_byte=(4096, 512)),
            _latency_pair(tier, RULES[5], aligned, "4 KiB random reads, QD1", _job(tier, "misaligned"),
                          "4 KiB random reads on 512 B boundaries, QD1"),
            _garbage_collection(tier)]
    return pd.DataFrame(rows, columns=COLUMNS)
