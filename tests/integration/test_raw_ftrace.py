"""A raw ftrace window against the kernel's own text of the same ring buffer: the same requests."""

import json
import subprocess

import numpy as np

from tierlab.parse_ftrace import parse_ftrace
from tierlab.parse_ftrace_raw import parse_ftrace_raw
from tierlab_host import record
from tierlab_host.trace import FtraceInstance


def test_a_raw_window_holds_the_requests_the_kernel_s_text_shows(layout_runs, tmp_path, monkeypatch):
    """Reads on the test root's capacity tier device, traced by the agent's ftrace instance; the text is read
    from the instance's `trace` (which leaves the buffer as it is) after an end marker of the test's own,
    before stop marks the end again and drains the window as raw pages."""
    tiers = json.loads((layout_runs["C+O"]["dir"] / "raw" / "tiers.json").read_text())
    nand = next(tier for tier in tiers if tier["name"] == "nand")
    # the instance is recorded, and removed, in a record of the test's own (the layout runs mounted tracefs)
    monkeypatch.setattr(record, "STATE_DIR", tmp_path / "state")
    monkeypatch.setattr(record, "RECORD_PATH", tmp_path / "state" / "created.json")
    instance = FtraceInstance("tierlab-test-raw", [nand["device"]], 8192)
    try:
        instance.start("w_try1", tmp_path)
        for skip in (0, 4096, 100, 77777):
            subprocess.run(["dd", f"if={nand['block_device']}", "of=/dev/null", "bs=16k", "count=300", f"skip={skip}",
                            "iflag=direct", "status=none"], check=True)
        (instance.dir / "trace_marker").write_text("tierlab end w_try1\n")
        (tmp_path / "w_try1.ftrace").write_bytes((instance.dir / "trace").read_bytes())
        files = instance.stop("w_try1", tmp_path)["files"]
    finally:
        instance.close()
    assert json.loads((tmp_path / "state" / "created.json").read_text()) == []
    assert files == ["w_try1.ftrace-raw"]
    raw, text = parse_ftrace_raw(tmp_path / files[0]), parse_ftrace(tmp_path / "w_try1.ftrace")
    assert len(raw.requests) == len(text.requests) >= 1200
    assert [m for _, m in text.markers] == ["tierlab start w_try1", "tierlab end w_try1"]
    assert [m for _, m in raw.markers] == ["tierlab start w_try1", "tierlab end w_try1", "tierlab end w_try1"]
    for column in ("device", "op", "rwbs", "sector", "size_sectors", "pid", "process"):
        assert raw.requests[column].tolist() == text.requests[column].tolist(), column
    # the text shows microseconds; the raw records keep nanoseconds
    assert np.abs(raw.requests["ts_s"] - text.requests["ts_s"]).max() < 1e-6
    assert np.abs(raw.requests["latency_us"] - text.requests["latency_us"]).max() <= 2.0
