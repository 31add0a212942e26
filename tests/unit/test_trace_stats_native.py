"""The compiled pass of trace-stats over binary blktrace files (traces/native.py) against the request frames'
path it follows (traces/frame_stats.py), on random traces."""


import numpy as np
import pytest
from random_blktrace import DEV, T0, random_trace, write_per_cpu

from tierlab.errors import TraceFormatError
from tierlab.traces import native
from tierlab.traces.blktrace import write_blktrace
from tierlab.traces.frame_stats import frame_stats
from tierlab.traces.stats import trace_stats

PAGE = 16384


def both(prefix, tolerate=False, page=PAGE):
    """(the compiled pass's figures, counts and devices; the request frames')"""
    assert native.available(), f"{native.LIBRARY} is not built: `make setup` builds it"
    return native.blktrace_stats([str(prefix)], tolerate, page), frame_stats([("binary", [str(prefix)])], tolerate, page)


def assert_same(ours, reference):
    (figures, counts, devices), (want_figures, want_counts, want_devices) = ours, reference
    assert (counts, devices) == (want_counts, want_devices)
    assert list(figures) == list(want_figures)
    for key, value in figures.items():
        want = want_figures[key]
        if isinstance(want, float) and not isinstance(want, bool):
            # sums of floating-point times, in another order
            assert value == pytest.approx(want, rel=1e-12, nan_ok=True), key
        else:
            assert value == want, key


def stream_trace(seed, requests=4000, streams=6, cpus=2):
    """Per-CPU events of interleaved sequential streams of reads on two devices (some reread, some run into
    each other), random writes among them, up to 32 in flight, and a few misaligned and tiny requests."""
    rng = np.random.default_rng(seed)
    at = {(dev, s): int(rng.integers(0, 1 << 20)) * 8 for dev in (DEV, "259:0") for s in range(streams)}
    per_cpu = {cpu: [] for cpu in range(cpus)}
    now = T0
    for _ in range(requests):
        now += int(rng.integers(1_000, 20_000))
        dev, s = list(at)[int(rng.integers(0, len(at)))]
        sectors = int(rng.choice([1, 8, 16, 32, 64, 256]))
        if rng.random() < 0.2:
            op, sector = "W", int(rng.integers(0, 1 << 20)) * 8 + int(rng.integers(0, 8))
        else:
            op, sector = "R", at[(dev, s)]
            at[(dev, s)] = sector + sectors if rng.random() < 0.9 else max(0, sector - 64 * sectors)
        cpu = int(rng.integers(0, cpus))
        per_cpu[cpu].append(("D", now, dev, sector, sectors * 512, op, 4242, cpu))
        end = now + int(rng.lognormal(np.log(150_000), 0.8))
        per_cpu[int(rng.integers(0, cpus))].append(("C", end, dev, sector, sectors * 512, op, 0, cpu))
    for events in per_cpu.values():
        events.sort(key=lambda event: event[1])
    return per_cpu


@pytest.mark.parametrize(("seed", "cpus", "byteorder"), [(7, 2, "<"), (11, 3, ">"), (3, 1, "<")])
def test_the_compiled_pass_counts_every_rule_of_a_busy_trace_as_the_request_frames_do(tmp_path, seed, cpus, byteorder):
    ours, reference = both(write_per_cpu(tmp_path, random_trace(seed=seed, cpus=cpus), byteorder=byteorder))
    assert reference[0]["requests"] > 900 and all(reference[1][key] > 0 for key in (
        "flush", "other_op", "zero_length", "dispatch_without_completion", "completion_without_dispatch"))
    assert_same(ours, reference)


@pytest.mark.parametrize(("seed", "page"), [(1, 16384), (2, 4096), (5, 65536)])
def test_the_compiled_pass_measures_streams_repeats_and_flight_as_the_request_frames_do(tmp_path, seed, page):
    ours, reference = both(write_per_cpu(tmp_path, stream_trace(seed)), page=page)
    figures = reference[0]
    assert 20 < figures["sequential_pct"] < 100 and figures["repeat_access_rate"] > 1.01
    assert figures["inflight_max"] > 4 and figures["misaligned_pct"] > 0 and figures["tiny_pct"] > 0
    assert reference[2] == ["259:0", "8:16"]
    assert_same(ours, reference)


def test_a_corrupt_tail_is_counted_alike_when_tolerated_and_refused_alike_when_not(tmp_path):
    prefix = write_per_cpu(tmp_path, stream_trace(9, requests=500))
    with open(f"{prefix}.blktrace.1", "ab") as out:
        out.write(b"\x07\x74\x61\x65" + bytes(20))
    ours, reference = both(prefix, tolerate=True)
    assert (reference[1]["bad_records"], reference[1]["bad_bytes"]) == (1, 24)
    assert_same(ours, reference)
    refusals = []
    for measure in (lambda: native.blktrace_stats([str(prefix)], False, PAGE),
                    lambda: frame_stats([("binary", [str(prefix)])], False, PAGE)):
        with pytest.raises(TraceFormatError) as refused:
            measure()
        refusals.append(str(refused.value))
    assert refusals[0] == refusals[1]
    assert "record header is truncated: 24 of 48 bytes" in refusals[0]


def test_a_file_out_of_time_order_is_left_to_the_request_frames(tmp_path):
    events = [("D", T0 + 5_000, DEV, 80, 4096, "R", 42), ("D", T0 + 1_000, DEV, 8, 4096, "R", 42),
              ("C", T0 + 9_000, DEV, 80, 4096, "R", 0), ("C", T0 + 9_500, DEV, 8, 4096, "R", 0)]
    path = write_blktrace(tmp_path / "q.blktrace.0", events)
    assert native.blktrace_stats([str(path)], False, PAGE) is None
    said = []
    stats = trace_stats([str(path)], "auto", False, PAGE, lambda *line: said.append(line))
    assert said == [(1, 1, f"{path} (binary)")]
    assert (stats["requests"], stats["latency_us"]["p50"]) == (2, 6.25)
    assert stats["io_time_s"] == pytest.approx(8.5e-6, rel=1e-6)   # times near 5000 s, as doubles
