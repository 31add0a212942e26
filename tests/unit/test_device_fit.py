"""A profile fitted to the device suite's measurements: what a device of a known profile would measure gives
that profile back."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tierlab.devices import fit as device_fit
from tierlab.devices.profiles import load, parse, profile_path

EMULATOR = Path(__file__).resolve().parents[2] / "emulator"

# the measurements as a host that runs the model twice as slow takes them
DILATION = 2.0
PERCENTILES = ("1", "5", "10", "25", "50", "75", "90", "95", "99", "99.9", "99.99")


def side(p50_us: float, bw_bytes: float = 0.0, iops: float = 0.0, tail: dict | None = None) -> dict:
    lat = {f"p{p}": p50_us for p in PERCENTILES} | (tail or {})
    return {"iops": iops, "bw_bytes": bw_bytes, "lat_us": lat, "mean_us": p50_us}


def measured(profile: dict, buffer_bytes: float, pause_us: float, k: float = DILATION) -> dict:
    """The suite's jobs on a device of the profile, in the host's time: each latency at queue depth 1 its
    parameter plus the transfer; reads beside writes slowed in their slowest third (those that meet a write in
    flight); random reads scaling with the channels up to the bandwidth; the sustained
    writes at the write bandwidth until the buffer is full (a whole number of log intervals), then at the
    sustained rate, one write in 20 with the pause."""
    read_bw, write_bw = profile["read_bandwidth_mb_s"], profile["write_bandwidth_mb_s"]

    def qd1(latency_us: float, bandwidth: float) -> float:
        return (latency_us + 4096 / bandwidth) * k

    jobs = [{"kind": "latency", "rw": "randread", "read": side(qd1(profile["read_random_us"], read_bw))},
            {"kind": "latency", "rw": "read", "read": side(qd1(profile["read_sequential_us"], read_bw))},
            {"kind": "latency", "rw": "randwrite", "write": side(qd1(profile["write_us"], write_bw))},
            {"kind": "mixed", "write_pct": 0, "read": side(qd1(profile["read_random_us"], read_bw))},
            # a read pays for a write only beside one in flight: a third of them, the slowest
            {"kind": "mixed", "write_pct": 50,
             "read": side(qd1(profile["read_random_us"], read_bw), tail={
                 f"p{p}": qd1(profile["read_random_us"], read_bw) + profile["read_during_write_us"] * k
                 for p in ("75", "90", "95", "99", "99.9", "99.99")})}]
    for block in (4096, 65536, 262144):
        for depth in (1, 16, 256):
            one_us = (profile["read_random_us"] + block / read_bw) * k
            iops = min(min(depth, profile["channels"]) * 1e6 / one_us, read_bw * 1e6 / k / block)
            jobs.append({"kind": "bandwidth", "rw": "randread", "block_bytes": block, "iodepth": depth,
                         "read": side(one_us, iops * block, iops)})
            jobs.append({"kind": "bandwidth", "rw": "randwrite", "block_bytes": block, "iodepth": depth,
                         "write": side(0, write_bw * 1e6 / k)})
    best, sustained = write_bw * 1e6 / k, profile["sustained_write_mb_s"] * 1e6 / k
    interval_s = 0.1
    filling = round(buffer_bytes / (best - sustained) / interval_s) if buffer_bytes else 0
    rates = [best] * filling + [sustained if buffer_bytes else best] * (3 * filling or 30)
    tail = {"p99": 1000 + pause_us * k, "p99.9": 1000 + pause_us * k, "p99.99": 1000 + pause_us * k}
    jobs.append({"kind": "sustained", "rw": "write", "block_bytes": 131072, "iodepth": 32,
                 "bandwidth_log": [(interval_s * (i + 1), r) for i, r in enumerate(rates)], "log_interval_s": interval_s,
                 "write": side(1000, best, tail=tail if pause_us else None)})
    return {"name": profile["model"], "role": "capacity", "dilation": k, "jobs": jobs}


def test_a_nand_device_s_measurements_give_its_profile_back():
    nand = load(profile_path("nand"))
    # a buffer that fills in a whole number of the log's intervals: 0.5 s at (1500 - 400) / 2 MB/s
    fitted = device_fit.fit(measured(nand, buffer_bytes=275e6, pause_us=3000))
    assert fitted == {"channels": 32, "read_random_us": 88.6, "read_sequential_us": 8.6, "write_us": 17.3,
                      "read_bandwidth_mb_s": 3000, "write_bandwidth_mb_s": 1500, "streams": 16, "readahead_kb": 512,
                      "write_buffer_mb": 275, "sustained_write_mb_s": 400, "gc_pause_us": 3000,
                      # one 128 KiB write in 20 pauses (p95 below the tail's middle, p99 above)
                      "gc_pause_every_kb": 2560, "read_during_write_us": 200}


def model_job(rw: str, block_bytes: int, iodepth: int) -> dict:
    """What the emulator's nand model measures of one job under fio's closed loop, as the suite records a side."""
    done = subprocess.run([str(EMULATOR / "tierlab-emu"), "--profile", str(profile_path("nand")), "--job", rw,
                           str(block_bytes), str(iodepth)], capture_output=True, text=True, check=True, timeout=120)
    job = json.loads(done.stdout)
    return {"iops": job["iops"], "bw_bytes": job["iops"] * block_bytes, "lat_us": job["lat_us"],
            "mean_us": job["lat_us"]["p50"]}


def test_the_nand_model_s_own_latency_and_bandwidth_jobs_give_its_profile_back():
    """The queue-depth-1 latencies and the bandwidth grid as the emulator's C model measures them (not this file's
    forward model); the sustained and mixed jobs, which its closed loop does not give, from the forward model."""
    subprocess.run(["make", "-s", "-C", str(EMULATOR), "tierlab-emu"], check=True, timeout=300)
    nand = load(profile_path("nand"))
    tier = measured(nand, buffer_bytes=275e6, pause_us=3000, k=1.0)
    tier["jobs"] = [job for job in tier["jobs"] if job["kind"] not in ("latency", "bandwidth")]
    tier["jobs"] += [{"kind": "latency", "rw": rw, side: model_job(rw, 4096, 1)}
                     for rw, side in (("randread", "read"), ("read", "read"), ("randwrite", "write"))]
    tier["jobs"] += [{"kind": "bandwidth", "rw": rw, "block_bytes": block, "iodepth": depth, side: model_job(rw, block, depth)}
                     for rw, side in (("randread", "read"), ("randwrite", "write"))
                     for block in (4096, 65536, 262144) for depth in (1, 16, 256)]
    fitted = device_fit.fit(tier)
    assert {name: fitted[name] for name in ("channels", "read_bandwidth_mb_s", "write_bandwidth_mb_s")} == {
        "channels": 32, "read_bandwidth_mb_s": 3000, "write_bandwidth_mb_s": 1500}
    # the emulator prints its latencies to a hundredth of a microsecond
    assert [fitted[name] for name in ("read_random_us", "read_sequential_us", "write_us")] == pytest.approx(
        [nand["read_random_us"], nand["read_sequential_us"], nand["write_us"]], abs=0.02)


def test_an_optane_device_s_measurements_give_no_buffer_streams_or_pauses():
    optane = load(profile_path("optane"))
    fitted = device_fit.fit(measured(optane, buffer_bytes=0, pause_us=0))
    assert fitted == {"channels": 4, "read_random_us": 8.4, "read_sequential_us": 8.4, "write_us": 10.0,
                      "read_bandwidth_mb_s": 2500, "write_bandwidth_mb_s": 2000, "streams": 0, "readahead_kb": 0,
                      "write_buffer_mb": 0, "sustained_write_mb_s": 0, "gc_pause_us": 0, "gc_pause_every_kb": 0,
                      "read_during_write_us": 0}


def test_the_fitted_profile_is_the_emulator_s_toml_with_each_parameter_s_source():
    tier = measured(load(profile_path("nand")), buffer_bytes=275e6, pause_us=3000)
    text = device_fit.profile_text(tier, device_fit.fit(tier), "raw/devices.json")
    assert parse(text, "fitted")["read_random_us"] == pytest.approx(88.6)
    assert "# p50 of 4 KiB random reads at QD1, less the transfer\nread_random_us = 88.6\n" in text
    assert text.startswith("# nand (capacity tier), fitted by `tierlab devices` from raw/devices.json\n")


def test_devices_refuses_measurements_cut_short_before_writing_anything(tmp_path):
    tier = measured(load(profile_path("nand")), buffer_bytes=275e6, pause_us=3000)
    tier["jobs"] = [j for j in tier["jobs"] if j["kind"] != "sustained"]
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "devices.json").write_text(json.dumps({"tiers": [tier]}))
    done = subprocess.run([sys.executable, "-m", "tierlab", "devices", str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0
    assert "does not hold the device suite's measurements (ValueError: not enough values to unpack" in done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw"]
