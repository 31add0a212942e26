"""The device model's decisions, on synthetic request sequences (tierlab-emu --simulate)."""

import json
import subprocess
from pathlib import Path

import pytest

EMULATOR = Path(__file__).resolve().parents[2] / "emulator"
PROFILES = EMULATOR / "profiles"
KIB = 1024


@pytest.fixture(scope="module")
def binary() -> Path:
    subprocess.run(["make", "-s", "-C", str(EMULATOR)], check=True, timeout=300)
    return EMULATOR / "tierlab-emu"


def simulate(binary: Path, profile: Path, requests: list[tuple[float, str, int, int]]) -> list[dict]:
    stdin = "".join(f"{at} {op} {offset} {length}\n" for at, op, offset, length in requests)
    done = subprocess.run([str(binary), "--profile", str(profile), "--simulate"], input=stdin,
                          capture_output=True, text=True, check=True, timeout=120)
    header, *lines = done.stdout.splitlines()
    return [dict(zip(header.split(), line.split(), strict=True)) for line in lines]


def latencies(rows: list[dict]) -> list[float]:
    return [float(r["latency_us"]) for r in rows]


def classes(rows: list[dict]) -> list[str]:
    return [r["class"] for r in rows]


def small_profile(tmp_path: Path, name: str = "small", **changes) -> Path:
    """The nand profile with some parameters changed, for sequences of tractable length."""
    lines = []
    for line in (PROFILES / "nand.toml").read_text().splitlines():
        key = line.split("=")[0].strip()
        lines.append(f"{key} = {changes[key]}" if key in changes else line)
    path = tmp_path / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_nand_random_4k_read_at_qd1_takes_90_us(binary):
    rows = simulate(binary, PROFILES / "nand.toml", [(0, "r", 7 * 1 << 30, 4 * KIB)])
    assert classes(rows) == ["read_random"]
    assert latencies(rows) == [pytest.approx(88.6 + 4096 / 3000, abs=0.001)]


def test_nand_sequential_reads_hit_the_read_ahead_buffer_after_the_stream_is_detected(binary):
    requests = [(i * 1000, "r", i * 16 * KIB, 16 * KIB) for i in range(4)]
    rows = simulate(binary, PROFILES / "nand.toml", requests)
    # the first read is random; the second detects the stream and still pays the media
    assert classes(rows) == ["read_random", "read_random", "read_sequential", "read_sequential"]
    assert latencies(rows)[2] == pytest.approx(8.6 + 16384 / 3000, abs=0.01)


def test_interleaved_scans_are_each_detected_as_sequential(binary):
    scan_a, scan_b, scan_c = 0, 1 << 30, 5 << 30
    requests = []
    for i in range(6):
        for base in (scan_a, scan_b, scan_c):
            requests.append((len(requests) * 200, "r", base + i * 16 * KIB, 16 * KIB))
    rows = simulate(binary, PROFILES / "nand.toml", requests)
    # two reads of each scan find and confirm it; the other twelve come from the buffer
    assert classes(rows)[:6] == ["read_random"] * 6
    assert classes(rows)[6:] == ["read_sequential"] * 12


def interleaved_scans(scans: int) -> list[tuple]:
    """Four 16 KiB reads of each of `scans` scans, a read of each in turn."""
    return [(n * 200, "r", (n % scans) * (1 << 28) + (n // scans) * 16 * KIB, 16 * KIB) for n in range(scans * 4)]


def test_as_many_interleaved_scans_as_tracked_streams_are_each_detected_as_sequential(binary):
    # the nand profile tracks 16 streams: two reads of each scan find and confirm it
    rows = simulate(binary, PROFILES / "nand.toml", interleaved_scans(16))
    assert classes(rows) == ["read_random"] * 32 + ["read_sequential"] * 32


def test_more_interleaved_scans_than_tracked_streams_are_all_random(binary):
    # a seventeenth scan replaces the least recently used stream before its next read comes
    rows = simulate(binary, PROFILES / "nand.toml", interleaved_scans(17))
    assert set(classes(rows)) == {"read_random"}


def test_reads_out_of_order_inside_the_prefetched_window_still_count_as_sequential(binary):
    pages = [0, 1, 2, 4, 3, 6, 5, 7]
    requests = [(n * 100, "r", p * 16 * KIB, 16 * KIB) for n, p in enumerate(pages)]
    rows = simulate(binary, PROFILES / "nand.toml", requests)
    assert classes(rows) == ["read_random", "read_random"] + ["read_sequential"] * 6


def test_optane_reads_take_the_same_time_random_or_sequential(binary):
    sequential = [(i * 1000, "r", i * 16 * KIB, 16 * KIB) for i in range(4)]
    random = [(i * 1000, "r", (i * 7919 % 4096) * (1 << 20), 16 * KIB) for i in range(4)]
    optane = PROFILES / "optane.toml"
    # optane.toml: 8.4 us to read, at 2500 MB/s
    one_read_us = 8.4 + 16 * KIB / 2500
    assert latencies(simulate(binary, optane, sequential)) == pytest.approx([one_read_us] * 4, abs=0.001)
    assert latencies(simulate(binary, optane, random)) == pytest.approx([one_read_us] * 4, abs=0.001)
    assert latencies(simulate(binary, optane, [(0, "r", 0, 4 * KIB)])) == [pytest.approx(8.4 + 4096 / 2500, abs=0.001)]


def test_requests_beyond_the_channels_queue_behind_the_first_free_channel(binary):
    # optane has 4 channels: the fifth simultaneous read starts when the first ends
    requests = [(0, "r", n * (1 << 20), 4 * KIB) for n in range(5)]
    rows = simulate(binary, PROFILES / "optane.toml", requests)
    one_read_us = 8.4 + 4096 / 2500
    assert [float(r["start_us"]) for r in rows] == [0, 0, 0, 0, pytest.approx(one_read_us, abs=0.001)]
    assert float(rows[4]["done_us"]) == pytest.approx(2 * one_read_us, abs=0.002)


def test_large_reads_at_depth_are_capped_at_the_bandwidth(binary):
    # 32 simultaneous 1 MiB reads on nand: 32 channels, but one 3000 MB/s link
    requests = [(0, "r", n * (1 << 24), 1 << 20) for n in range(32)]
    rows = simulate(binary, PROFILES / "nand.toml", requests)
    last_done_us = max(float(r["done_us"]) for r in rows)
    assert last_done_us == pytest.approx(32 * (1 << 20) / 3000, rel=1e-6)


def test_writes_are_buffered_until_the_buffer_fills_then_wait_for_garbage_collection(binary, tmp_path):
    # a 1 MB buffer draining at 100 MB/s, written at 1 GB/s (64 KiB every 65.536 us)
    profile = small_profile(tmp_path, write_buffer_mb=1, sustained_write_mb_s=100, gc_pause_us=0)
    requests = [(n * 65.536, "w", n * 64 * KIB, 64 * KIB) for n in range(40)]
    rows = simulate(binary, profile, requests)
    # after write n the buffer holds 65536 (n + 1) - 6553.6 n bytes: past 1e6 from n = 16 on
    assert classes(rows) == ["write_buffered"] * 16 + ["write_gc"] * 24
    buffered = 17.3 + 65536 / 1500
    # write 16 waits for its 9254.4 bytes over the line to drain at 100 MB/s; each later one for 58982.4 more
    expected = [buffered] * 16 + [buffered + (9254.4 + 58982.4 * k) / 100 for k in range(24)]
    assert latencies(rows) == pytest.approx(expected, abs=0.002)


def test_the_garbage_collection_regime_has_millisecond_pauses(binary, tmp_path):
    # no channel or link queueing, so each write's latency is its own
    unqueued = {"channels": 0, "write_bandwidth_mb_s": 0, "write_buffer_mb": 1, "gc_pause_every_kb": 256}
    with_pauses = small_profile(tmp_path, **unqueued)
    without = small_profile(tmp_path, "without", **unqueued, gc_pause_us=0)
    # 2 MiB at once overflows the 1 MB buffer; every 256 KiB of GC-regime writes pays a 3 ms pause
    requests = [(0, "w", n * 64 * KIB, 64 * KIB) for n in range(32)]
    paused = simulate(binary, with_pauses, requests)
    extra = [round(a - b, 3) for a, b in zip(latencies(paused), latencies(simulate(binary, without, requests)), strict=True)]
    # 15 writes (983,040 bytes) fit in the buffer, the sixteenth is past 1e6; each fourth GC write pays the pause
    assert classes(paused) == ["write_buffered"] * 15 + ["write_gc"] * 17
    assert [index for index, value in enumerate(extra) if value] == [18, 22, 26, 30]
    assert {value for value in extra if value} == {3000.0}


def test_a_read_that_meets_an_in_flight_write_is_slowed(binary):
    rows = simulate(binary, PROFILES / "nand.toml", [(0, "w", 0, 4 * KIB), (5, "r", 1 << 30, 4 * KIB),
                                                     (100, "r", 2 << 30, 4 * KIB)])
    assert [r["interfered"] for r in rows[1:]] == ["1", "0"]
    assert latencies(rows)[1] == pytest.approx(88.6 + 4096 / 3000 + 200.0, abs=0.001)
    assert latencies(rows)[2] == pytest.approx(88.6 + 4096 / 3000, abs=0.001)


def test_passthrough_adds_nothing(binary):
    rows = simulate(binary, PROFILES / "passthrough.toml", [(0, "r", 0, 4 * KIB), (0, "w", 0, 1 << 20)])
    assert latencies(rows) == [0.0, 0.0]


def job(binary: Path, profile: str, rw: str, block_bytes: int, iodepth: int) -> dict:
    done = subprocess.run([str(binary), "--profile", str(PROFILES / f"{profile}.toml"), "--job", rw, str(block_bytes),
                           str(iodepth)], capture_output=True, text=True, check=True, timeout=120)
    return json.loads(done.stdout)


def test_a_closed_loop_job_at_qd1_gives_each_request_s_modelled_latency(binary):
    done = job(binary, "nand", "randread", 16 * KIB, 1)
    assert done["lat_us"]["p50"] == 94.06  # 88.6 + 16384 / 3000
    assert done["iops"] == pytest.approx(1e6 / 94.06, rel=1e-3)


def test_a_closed_loop_sequential_job_reads_from_the_read_ahead_buffer(binary):
    assert job(binary, "nand", "read", 16 * KIB, 1)["lat_us"]["p50"] == 14.06  # 8.6 + 16384 / 3000


def test_a_closed_loop_job_at_depth_is_capped_by_the_channels_or_the_bandwidth(binary):
    # optane: 4 channels of 14.95 us would give 267k IOPS; 2500 MB/s caps 16 KiB reads at 152.6k
    assert job(binary, "optane", "randread", 16 * KIB, 32)["iops"] == pytest.approx(2500e6 / 16384, rel=1e-3)
    # nand at 4 KiB: 32 channels of 89.97 us, below the bandwidth
    assert job(binary, "nand", "randread", 4 * KIB, 32)["iops"] == pytest.approx(32 / 89.97e-6, rel=1e-3)


def test_a_job_with_an_unknown_pattern_is_refused(binary):
    done = subprocess.run([str(binary), "--profile", str(PROFILES / "nand.toml"), "--job", "trim", "4096", "1"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr == "tierlab-emu: --job RW must be read, randread, write or randwrite, got trim\n"
