"""A trace streamed into the metrics a chunk at a time gives the numbers of the whole trace read at once."""

import numpy as np
import pandas as pd
import pytest

from tierlab.metrics.patterns import Pieces, access_summary, sequential_flags
from tierlab.traces import matcher
from tierlab.traces.blk import blk_action, dev_t, record_dtype
from tierlab.traces.blktrace import parse_blktrace_binary, write_blktrace
from tierlab.traces.frame_stats import StatsSink
from tierlab.traces.stats import trace_stats

PAGE = 16384
T0 = 5_000_000_000_000
FIELDS = ("time", "sector", "bytes", "action", "pid", "device", "cpu")


def random_trace(prefix, n: int, seed: int):
    """n requests on two devices over two per-CPU files, completions on either CPU, overlapping requests to
    the same sectors, writes, misaligned and multi-page requests; one dispatch never completed, and one
    completed 400 s after it (a time jump), both early in the trace."""
    rng = np.random.default_rng(seed)
    dispatch = T0 + np.cumsum(rng.integers(1_000, 600_000_000, n))      # some 900 s for 3000
    complete = dispatch + rng.integers(5_000, 5_000_000, n)
    complete[3] = dispatch[3] + 400_000_000_000
    done = np.ones(n, dtype=bool)
    done[5] = False
    device = rng.choice([dev_t("7:1"), dev_t("7:2")], n)
    sector = rng.integers(0, 3000, n) * 8 + rng.choice([0, 0, 0, 3], n)
    nbytes = rng.choice([512, 4096, 16384, 65536], n)
    rwbs = np.where(rng.random(n) < 0.3, "W", "R")
    d_action = np.array([blk_action("D", r) for r in rwbs], dtype=np.uint32)
    c_action = np.array([blk_action("C", r) for r in rwbs], dtype=np.uint32)
    events = pd.DataFrame({"time": np.r_[dispatch, complete[done]], "sector": np.r_[sector, sector[done]],
                           "bytes": np.r_[nbytes, nbytes[done]], "action": np.r_[d_action, c_action[done]],
                           "pid": np.r_[np.full(n, 4242), np.zeros(done.sum(), int)],
                           "device": np.r_[device, device[done]], "cpu": rng.integers(0, 2, n + done.sum())})
    for cpu, part in events.sort_values("time", kind="stable").groupby("cpu"):
        records = np.zeros(len(part), dtype=record_dtype("<", names=FIELDS))
        for name in FIELDS:
            records[name] = part[name].to_numpy()
        write_blktrace(f"{prefix}.blktrace.{cpu}", records, cpu=cpu)
    return prefix


def whole_summary(requests: pd.DataFrame) -> dict:
    reads = (requests["op"] == "R").to_numpy()
    flags = np.zeros(len(requests), dtype=bool)
    flags[reads] = sequential_flags(requests.loc[reads, ["ts_s", "device", "sector", "size_sectors"]], PAGE)
    return access_summary(Pieces.of_requests(requests, flags, PAGE))


def same(summary: dict) -> dict:
    """The summary to compare with: counts exact, sums of floats to their last bits (their order may differ)."""
    return {key: value if isinstance(value, str | int) else pytest.approx(value, rel=1e-12, nan_ok=True)
            for key, value in summary.items()}


def test_the_frames_handed_to_a_sink_are_the_rows_of_the_whole_trace(tmp_path, monkeypatch):
    prefix = random_trace(tmp_path / "t", 3000, 7)
    whole = parse_blktrace_binary(prefix)
    monkeypatch.setattr(matcher, "SINK_ROWS", 100)
    frames = []
    streamed = parse_blktrace_binary(prefix, chunk_bytes=4800, sink=frames.append)
    assert len(frames) > 10
    assert streamed.requests.empty
    assert streamed.counts == whole.counts
    assert (whole.counts["time_jumps"], whole.counts["dispatch_without_completion"]) == (1, 1)
    joined = pd.concat(frames, ignore_index=True)
    columns = ["ts_s", "sector", "size_sectors", "latency_us", "pid"]
    pd.testing.assert_frame_equal(joined[columns], whole.requests[columns])
    for name in ("device", "op", "rwbs"):
        assert joined[name].astype(str).tolist() == whole.requests[name].astype(str).tolist()


def test_the_metrics_summed_up_frame_by_frame_are_those_of_the_whole_trace(tmp_path, monkeypatch):
    prefix = random_trace(tmp_path / "t", 3000, 11)
    expected = whole_summary(parse_blktrace_binary(prefix).requests)
    monkeypatch.setattr(matcher, "SINK_ROWS", 100)
    sink = StatsSink(PAGE)
    parse_blktrace_binary(prefix, chunk_bytes=4800, sink=sink)
    assert sink.totals.summary() == same(expected)


def test_trace_stats_reports_the_metrics_of_the_whole_trace(tmp_path):
    prefix = random_trace(tmp_path / "t", 3000, 13)
    expected = whole_summary(parse_blktrace_binary(prefix).requests)
    stats = trace_stats([str(prefix)], "auto", False, PAGE)
    got = {**{key: stats[key] for key in expected if not key.startswith("latency_")},
           **{f"latency_{key}_us": value for key, value in stats["latency_us"].items()}}
    assert got == same(expected)


def test_per_cpu_files_given_one_by_one_are_paired_across_files(tmp_path):
    prefix = random_trace(tmp_path / "t", 500, 3)
    one_by_one = trace_stats([f"{prefix}.blktrace.0", f"{prefix}.blktrace.1"], "auto", False, PAGE)
    assert one_by_one == trace_stats([str(prefix)], "auto", False, PAGE)
    assert one_by_one["counts"]["completion_without_dispatch"] == 0
