"""A device model's profile fitted to the device suite's measurements (playbooks/devices.yml).

The suite measures in the host's time; an emulated tier runs its model `dilation` times slower, so every
latency is divided by the dilation and every bandwidth multiplied by it, and the profile describes the
device the model was, in the model's time (a real device's dilation is 1). 1 MB/s is one byte per us.

How each parameter follows (FITTED_FROM says the same in each profile's comments):
- read_bandwidth_mb_s: the most any random-read job of the bandwidth grid moved;
- write_bandwidth_mb_s: the most any write job moved (the sustained writes' best 100 ms, or the grid);
- read_random_us, read_sequential_us, write_us: the median latency of 4 KiB at queue depth 1, less the
  transfer at that bandwidth (the two reads' from the least disturbed of the suite's interleaved rounds);
- channels: the most random 4 KiB reads per second at any depth, times one read's latency;
- write_buffer_mb, sustained_write_mb_s: the sustained writes' rate once it fell (the last third's median),
  and what was written until it fell less what drained meanwhile; none when it never fell below 2/3 of its
  best (no buffer, or one larger than the job wrote);
- gc_pause_us, gc_pause_every_kb: when the sustained writes have a tail (p99.9 over 3x the median): its
  excess over the median, once per the share of writes above the middle of the two;
- read_during_write_us: how much the slowest tenth of reads (p90) slows with half the requests writes (queue
  depth 4): a read pays for a write only when one is in flight beside it, which at queue depth 4 is a share of
  the reads, above a tenth and below half of them (the median misses it);
- streams and readahead_kb are not measured: a device whose sequential reads are faster than its random
  ones by half again gets the shipped nand profile's, else none.
"""

import statistics

import pandas as pd

from .profiles import parse

# what a sequential-read advantage is assumed to come from (emulator/profiles/nand.toml)
ASSUMED_STREAMS, ASSUMED_READAHEAD_KB = 16, 512
MAX_CHANNELS = 256
FITTED_FROM = {
    "channels": "peak 4 KiB random-read IOPS x one read's latency",
    "read_random_us": "p50 of 4 KiB random reads at QD1, less the transfer",
    "read_sequential_us": "p50 of 4 KiB sequential reads at QD1, less the transfer",
    "write_us": "p50 of 4 KiB random writes at QD1, less the transfer",
    "read_bandwidth_mb_s": "the most a random-read job of the bandwidth grid moved",
    "write_bandwidth_mb_s": "the most a write job moved",
    "streams": "not measured: nand.toml's when sequential reads are faster, else 0",
    "readahead_kb": "not measured: nand.toml's when sequential reads are faster, else 0",
    "write_buffer_mb": "written before the sustained rate fell, less what drained meanwhile",
    "sustained_write_mb_s": "the sustained writes' rate once it fell (median of the last third)",
    "gc_pause_us": "the sustained writes' p99.9 over their p50",
    "gc_pause_every_kb": "the share of sustained writes in that tail",
    "read_during_write_us": "p90 read latency at 50% writes over 0% (QD4)",
}


def matching(tier: dict, kind: str, **match) -> list[dict]:
    """The tier's jobs of that kind whose settings are match's."""
    return [j for j in tier["jobs"] if j["kind"] == kind and all(j.get(k) == v for k, v in match.items())]


def _job(tier: dict, kind: str, **match) -> dict:
    (job,) = matching(tier, kind, **match)
    if "error" in job:
        raise ValueError(f"tier {tier['name']}: the {kind} job the fit needs failed: {job['error']}")
    return job


def grid(tier: dict, side: str) -> list[dict]:
    """The bandwidth grid's jobs that measured the side (read or write)."""
    return [j for j in tier["jobs"] if j["kind"] == "bandwidth" and side in j]


def _sustained(job: dict, dilation: float) -> tuple[float, float, float]:
    """(write buffer bytes, sustained bytes/us, best bytes/us) of the sustained writes, in the model's time."""
    rates = [rate for _, rate in job["bandwidth_log"]]
    interval_s = job["log_interval_s"]
    best = max(rates)
    tail = statistics.median(rates[-max(1, len(rates) // 3):])
    if tail > 2 / 3 * best:
        return 0.0, 0.0, best * dilation / 1e6
    # what was written, and how long, until the rate fell
    fell = next((i for i, rate in enumerate(rates) if rate < 1.5 * tail), len(rates))
    written = sum(rate * interval_s for rate in rates[:fell])
    return max(0.0, written - tail * fell * interval_s), tail * dilation / 1e6, best * dilation / 1e6


def _gc(job: dict, dilation: float) -> tuple[float, float]:
    """(pause us, KiB written per pause) from the sustained writes' latency tail, or (0, 0) without one."""
    lat = job["write"]["lat_us"]
    p50, p999 = lat["p50"], lat["p99.9"]
    if p999 <= 3 * p50:
        return 0.0, 0.0
    middle = (p50 + p999) / 2
    below = max(float(p[1:]) for p, value in lat.items() if value <= middle)
    share = (100.0 - below) / 100.0
    return (p999 - p50) / dilation, job["block_bytes"] / 1024 / share


def fit(tier: dict) -> dict:
    """The profile's parameters for one tier of the suite's result."""
    k = tier["dilation"]
    read_bw = max(j["read"]["bw_bytes"] for j in grid(tier, "read")) * k / 1e6
    sustained = _job(tier, "sustained")
    buffer_bytes, sustained_rate, best_write = _sustained(sustained, k)
    write_bw = max([best_write] + [j["write"]["bw_bytes"] * k / 1e6 for j in grid(tier, "write")])

    def qd1_us(rw: str, side: str, bandwidth: float) -> float:
        return max(0.0, _job(tier, "latency", rw=rw)[side]["lat_us"]["p50"] / k - 4096 / bandwidth)

    random_us, sequential_us = qd1_us("randread", "read", read_bw), qd1_us("read", "read", read_bw)
    peak_iops = max(j["read"]["iops"] for j in grid(tier, "read") if j["block_bytes"] == 4096) * k
    streamed = random_us > 1.5 * sequential_us
    pause_us, pause_every_kb = _gc(sustained, k) if buffer_bytes > 0 else (0.0, 0.0)
    mixed = {j["write_pct"]: j["read"]["lat_us"]["p90"] for j in tier["jobs"] if j["kind"] == "mixed" and "read" in j}
    return {
        "channels": min(MAX_CHANNELS, max(1, round(peak_iops * (random_us + 4096 / read_bw) / 1e6))),
        "read_random_us": round(random_us, 2),
        "read_sequential_us": round(sequential_us, 2),
        "write_us": round(qd1_us("randwrite", "write", write_bw), 2),
        "read_bandwidth_mb_s": round(read_bw),
        "write_bandwidth_mb_s": round(write_bw),
        "streams": ASSUMED_STREAMS if streamed else 0,
        "readahead_kb": ASSUMED_READAHEAD_KB if streamed else 0,
        "write_buffer_mb": round(buffer_bytes / 1e6),
        "sustained_write_mb_s": round(sustained_rate) if buffer_bytes > 0 else 0,
        "gc_pause_us": round(pause_us),
        "gc_pause_every_kb": round(pause_every_kb),
        "read_during_write_us": round(max(0.0, (mixed[50] - mixed[0]) / k), 2),
    }


def profile_text(tier: dict, values: dict, source: str) -> str:
    """The fitted profile as the emulator's TOML, each parameter with how it was measured; checked by the
    same parser the emulator's profiles go through."""
    lines = [f"# {tier['name']} ({tier['role']} tier), fitted by `tierlab devices` from {source}",
             f"# measured in the host's time, dilation {tier['dilation']} taken out (the model's time)",
             f'model = "{tier["name"]}-measured"',
             f'description = "measured {tier["name"]}: {values["read_random_us"]} us random and '
             f'{values["read_sequential_us"]} us sequential 4 KiB reads, {values["channels"]} channels"', ""]
    for key, value in values.items():
        lines += [f"# {FITTED_FROM[key]}", f"{key} = {value}"]
    text = "\n".join(lines) + "\n"
    parse(text, f"the profile fitted for {tier['name']}")
    return text


def job_rows(result: dict) -> pd.DataFrame:
    """One row per job and side (read, write) of every tier: the measured curves (a job fio refused has no
    side, and its error in raw/devices.json)."""
    rows = []
    for tier in result["tiers"]:
        for job in tier["jobs"]:
            for side in ("read", "write"):
                if side in job:
                    measured = job[side]
                    rows.append({"tier": tier["name"], "kind": job["kind"], "rw": job["rw"],
                                 "block_bytes": job["block_bytes"], "iodepth": job["iodepth"],
                                 "write_pct": job.get("write_pct"), "align_bytes": job.get("align_bytes"),
                                 "side": side, "iops": measured["iops"], "mb_s": measured["bw_bytes"] / 1e6,
                                 "mean_us": measured["mean_us"], **measured["lat_us"]})
    return pd.DataFrame(rows)


def sustained_rows(result: dict) -> pd.DataFrame:
    """The sustained writes' bandwidth every 100 ms, per tier."""
    return pd.DataFrame([{"tier": tier["name"], "t_s": t, "mb_s": rate / 1e6}
                         for tier in result["tiers"] for t, rate in _job(tier, "sustained")["bandwidth_log"]])


def comparison(tier: dict, values: dict) -> pd.DataFrame:
    """An emulated tier's fitted parameters beside its model's own: how much of the model the suite recovers."""
    model = parse(tier["profile"], f"{tier['name']}'s profile")
    return pd.DataFrame([{"parameter": key, "fitted": value, "model": model[key]} for key, value in values.items()])
