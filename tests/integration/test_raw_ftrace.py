"""A raw ftrace window against the kernel's own text of the same ring buffer: the same requests."""

import errno
import json
from pathlib import Path

import numpy as np
import pytest
from lab import command

from tierlab.traces.ftrace import parse_ftrace
from tierlab.traces.ftrace_raw import parse_ftrace_raw
from tierlab_host import record, teardown, trace
from tierlab_host.trace import RAW_MAGIC, FtraceInstance


@pytest.fixture
def own_record(tmp_path, monkeypatch):
    """What the test makes on the host (its tracing instance, and a debugfs mount where the host has no tracefs)
    goes in a record of the test's own, which its teardown empties."""
    monkeypatch.setattr(record, "STATE_DIR", tmp_path / "state")
    monkeypatch.setattr(record, "RECORD_PATH", tmp_path / "state" / "created.json")
    yield
    teardown.down()


@pytest.fixture
def nand(layout_runs, own_record):
    """The test root's capacity tier."""
    tiers = json.loads((layout_runs["C+O"] / "raw" / "tiers.json").read_text())
    return next(tier for tier in tiers if tier["name"] == "nand")


def read_direct(block_device: str, count: int, skip: int, block_bytes: int) -> set[int]:
    """count reads of block_bytes from block skip on, with O_DIRECT: the sectors they start at."""
    done = command(["dd", f"if={block_device}", "of=/dev/null", f"bs={block_bytes}", f"count={count}", f"skip={skip}",
                    "iflag=direct", "status=none"], "dd", 300)
    assert done.returncode == 0, done.stderr
    sectors = block_bytes // 512
    return {(skip + n) * sectors for n in range(count)}


def test_a_raw_window_holds_the_requests_the_kernel_s_text_shows(nand, tmp_path, monkeypatch):
    """Reads on the capacity tier's device, traced by the agent's ftrace instance, left in the ring buffer
    while the window lasts; the text is read from the instance's `trace` (which leaves the buffer as it is)
    after an end marker of the test's own, before stop marks the end again and drains the window as raw pages."""
    monkeypatch.setattr(trace, "DRAIN_INTERVAL_S", 3600)
    instance = FtraceInstance("tierlab-test-raw", [nand["device"]], 8192)
    try:
        instance.start("w_try1", tmp_path)
        read = set().union(*(read_direct(nand["block_device"], 300, skip, 16384) for skip in (0, 4096, 100, 77777)))
        (instance.dir / "trace_marker").write_text("tierlab end w_try1\n")
        (tmp_path / "w_try1.ftrace").write_bytes((instance.dir / "trace").read_bytes())
        files = instance.stop("w_try1", tmp_path)["files"]
    finally:
        instance.close()
    assert record.entries("tracing_instance") == []
    assert files == ["w_try1.ftrace-raw"]
    raw, text = parse_ftrace_raw(tmp_path / files[0]), parse_ftrace(tmp_path / "w_try1.ftrace")
    assert len(raw.requests) == len(text.requests)
    # dd's 1,200 reads, each a 32-sector request where it asked (with whatever else read the device meanwhile)
    ours = raw.requests[(raw.requests["size_sectors"] == 32) & raw.requests["sector"].isin(read)]
    assert set(ours["sector"]) == read and len(ours) == 1200
    assert [m for _, m in text.markers] == ["tierlab start w_try1", "tierlab end w_try1"]
    assert [m for _, m in raw.markers] == ["tierlab start w_try1", "tierlab end w_try1", "tierlab end w_try1"]
    for column in ("device", "op", "rwbs", "sector", "size_sectors", "pid", "process"):
        assert raw.requests[column].tolist() == text.requests[column].tolist(), column
    # the text shows microseconds; the raw records keep nanoseconds
    assert np.abs(raw.requests["ts_s"] - text.requests["ts_s"]).max() < 1e-6
    assert np.abs(raw.requests["latency_us"] - text.requests["latency_us"]).max() <= 2.0


def test_a_window_longer_than_the_ring_buffer_holds_loses_no_request(nand, tmp_path):
    """60,000 reads of 4 KiB make some 8 MiB of events, four times what a 1 MiB buffer per CPU holds: the
    window's pages are taken out of the buffer while it lasts."""
    instance = FtraceInstance("tierlab-test-long", [nand["device"]], 1024)
    try:
        instance.start("long_try1", tmp_path)
        read = read_direct(nand["block_device"], 60000, 0, 4096)
        found = instance.stop("long_try1", tmp_path)
    finally:
        instance.close()
    assert found["events_lost"] == 0
    window = parse_ftrace_raw(tmp_path / found["files"][0])
    assert window.counts["lost_events"] == 0
    assert [m for _, m in window.markers] == ["tierlab start long_try1", "tierlab end long_try1"]
    # dd's own: the file system on the device may read one of the same blocks meanwhile
    requests = window.requests
    ours = requests[(requests["process"] == "dd") & (requests["size_sectors"] == 8) & requests["sector"].isin(read)]
    assert set(ours["sector"]) == read
    # a page drained twice would repeat its hundreds of requests; the block layer may requeue a request and issue it
    # again (seen once: 60,001)
    assert 60000 <= len(ours) <= 60000 + 6


def test_a_window_that_fails_to_start_says_why_and_closes_with_its_file_kept(own_record, tmp_path, monkeypatch):
    """The start marker's write refused (as when another process removed the instance): start raises that
    error, and close() ends the window it had opened instead of failing on a drainer never started."""
    instance = FtraceInstance("tierlab-test-refused", ["7:0"], 1024)
    write_text = Path.write_text

    def refuse_the_marker(path, text, *args, **kwargs):
        if path.name == "trace_marker":
            raise OSError(errno.EBADF, "Bad file descriptor")
        return write_text(path, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", refuse_the_marker)
    try:
        with pytest.raises(OSError, match="Bad file descriptor"):
            instance.start("w_try1", tmp_path)
    finally:
        instance.close()
    assert record.entries("tracing_instance") == []
    assert (tmp_path / "w_try1.ftrace-raw").read_bytes().startswith(RAW_MAGIC)
