import math

import numpy as np
import pandas as pd
import pytest

from tierlab.errors import TraceFormatError
from tierlab.traces.blk import classify
from tierlab.traces.frame import CATEGORICAL_COLUMNS, concat_requests
from tierlab.traces.ftrace import parse_ftrace

HEADER = """# tracer: nop
#
# entries-in-buffer/entries-written: 9/9   #P:2
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
#              | |         |   |||||     |         |
"""


def issue(ts, rwbs, sector, size, task="mariadbd-12033", comm="mariadbd", dev="7,1"):
    body = f"{dev} {rwbs} {size * 512} () {sector} + {size} be,0,4 [{comm}]"
    return f"{task:>24}   [000] .....   {ts:.6f}: block_rq_issue: {body}\n"


def complete(ts, rwbs, sector, size, dev="7,1"):
    return f"          <idle>-0       [001] ..s1.   {ts:.6f}: block_rq_complete: {dev} {rwbs} () {sector} + {size} be,0,4 [0]\n"


def marker(ts, text):
    return f"         python3-11974   [000] ...1.   {ts:.6f}: tracing_mark_write: {text}\n"


def write_trace(tmp_path, body):
    path = tmp_path / "q03_try1.ftrace"
    path.write_text(HEADER + body)
    return path


def test_dispatch_and_completion_make_one_request_with_its_latency(tmp_path):
    trace = parse_ftrace(write_trace(tmp_path, issue(714.545253, "RS", 25231688, 32) + complete(714.545399, "RS", 25231688, 32)))
    row = trace.requests.iloc[0]
    assert len(trace.requests) == 1
    assert (row["device"], row["op"], row["sector"], row["size_sectors"], row["pid"], row["process"]) == (
        "7:1", "R", 25231688, 32, 12033, "mariadbd")
    assert row["latency_us"] == pytest.approx(146.0)


def test_text_columns_are_categoricals_of_the_values_that_occur(tmp_path):
    body = issue(1.0, "RS", 8, 8) + complete(1.1, "RS", 8, 8) + issue(1.2, "W", 16, 8) + complete(1.3, "W", 16, 8)
    requests = parse_ftrace(write_trace(tmp_path, body)).requests
    assert [str(requests[c].dtype) for c in CATEGORICAL_COLUMNS] == ["category"] * 4
    assert requests["op"].cat.categories.tolist() == ["R", "W"]
    assert requests["rwbs"].tolist() == ["RS", "W"]


def test_concatenated_frames_keep_categoricals_over_the_union_of_categories(tmp_path):
    first = parse_ftrace(write_trace(tmp_path, issue(1.0, "R", 8, 8, dev="7,1") + complete(1.1, "R", 8, 8, dev="7,1")))
    second = parse_ftrace(write_trace(tmp_path, issue(2.0, "W", 8, 8, dev="8,16", comm="kworker")
                                      + complete(2.1, "W", 8, 8, dev="8,16")))
    both = concat_requests([first.requests, second.requests.assign(query="q1")])
    assert str(both["device"].dtype) == "category" and both["device"].tolist() == ["7:1", "8:16"]
    assert both["op"].tolist() == ["R", "W"] and both["process"].tolist() == ["mariadbd", "kworker"]
    assert both["query"].tolist()[1] == "q1" and len(both) == 2


def test_completions_match_the_oldest_open_dispatch_of_the_same_sector(tmp_path):
    body = (issue(1.0, "R", 100, 8) + issue(1.1, "R", 100, 8) + complete(1.2, "R", 100, 8) + complete(1.5, "R", 100, 8))
    latencies = parse_ftrace(write_trace(tmp_path, body)).requests["latency_us"].tolist()
    assert latencies == pytest.approx([200_000.0, 400_000.0])


def test_markers_are_kept_in_order(tmp_path):
    body = marker(1.0, "tierlab start q03_try1") + issue(1.5, "R", 8, 8) + marker(2.0, "tierlab end q03_try1")
    assert parse_ftrace(write_trace(tmp_path, body)).markers == [(1.0, "tierlab start q03_try1"), (2.0, "tierlab end q03_try1")]


def test_flush_discard_and_zero_length_are_counted_apart_from_data(tmp_path):
    body = (issue(1.0, "FF", 0, 0) + issue(1.1, "DS", 4096, 2048) + issue(1.2, "W", 64, 0)
            + issue(1.3, "WFS", 800, 8) + issue(1.4, "FWFS", 900, 8) + issue(1.5, "N", 0, 0))
    trace = parse_ftrace(write_trace(tmp_path, body))
    assert trace.requests["rwbs"].tolist() == ["WFS", "FWFS"]
    assert trace.requests["op"].tolist() == ["W", "W"]
    assert (trace.counts["flush"], trace.counts["discard"], trace.counts["zero_length"], trace.counts["other_op"]) == (1, 1, 1, 1)


def test_unmatched_dispatches_and_completions_are_counted(tmp_path):
    body = complete(0.9, "R", 7, 8) + issue(1.0, "R", 100, 8)
    trace = parse_ftrace(write_trace(tmp_path, body))
    assert trace.counts["completion_without_dispatch"] == 1
    assert trace.counts["dispatch_without_completion"] == 1
    assert math.isnan(trace.requests["latency_us"].iloc[0])


def test_blk_tracer_lines_are_read_too(tmp_path):
    body = ("        mariadbd-12033   [000] d..1.   10.000000: 7,0 D RS 305152 + 32 [mariadbd]\n"
            "          <idle>-0       [000] d.h1.   10.000070: 7,0 C RS 305152 + 32 [0]\n")
    row = parse_ftrace(write_trace(tmp_path, body)).requests.iloc[0]
    assert (row["device"], row["sector"], row["size_sectors"]) == ("7:0", 305152, 32)
    assert row["latency_us"] == pytest.approx(70.0)


def test_a_corrupt_line_names_the_file_and_line(tmp_path):
    body = issue(1.0, "R", 100, 8) + "        mariadbd-1 [000] .....  1.2: block_rq_issue: 7,1 garbage\n"
    path = write_trace(tmp_path, body)
    with pytest.raises(TraceFormatError, match=f"^{path}:7: not an ftrace block event line"):
        parse_ftrace(path)


def test_a_truncated_last_line_is_an_error_unless_tolerated(tmp_path):
    path = write_trace(tmp_path, issue(1.0, "R", 100, 8) + issue(1.1, "R", 200, 8)[:40])
    with pytest.raises(TraceFormatError, match=":7:"):
        parse_ftrace(path)
    trace = parse_ftrace(path, tolerate_errors=True)
    assert len(trace.requests) == 1
    assert trace.counts["bad_lines"] == 1


@pytest.mark.parametrize(("rwbs", "op"), [("R", "R"), ("RA", "R"), ("RSM", "R"), ("WS", "W"), ("WFS", "W"),
                                          ("FWFS", "W"), ("FN", "F"), ("FF", "F"), ("D", "D"), ("DS", "D"), ("N", "N")])
def test_rwbs_classification(rwbs, op):
    assert classify(rwbs) == op


def test_a_sector_beyond_2_63_bytes_is_counted_and_left_out(tmp_path):
    body = issue(1.0, "R", 1 << 63, 8) + complete(1.1, "R", 1 << 63, 8) + issue(1.2, "R", 8, 8) + complete(1.3, "R", 8, 8)
    trace = parse_ftrace(write_trace(tmp_path, body))
    assert trace.requests["sector"].tolist() == [8]
    assert (trace.counts["beyond_bounds"], trace.counts["completion_without_dispatch"]) == (1, 0)


def test_a_dispatch_time_after_its_completion_is_a_time_jump_counted_and_its_latency_left_out(tmp_path):
    body = issue(72000000.0, "R", 100, 8) + complete(1.1, "R", 100, 8) + issue(1.2, "R", 8, 8) + complete(1.3, "R", 8, 8)
    trace = parse_ftrace(write_trace(tmp_path, body))
    assert trace.requests[["sector", "latency_us"]].fillna(-1).values.tolist() == [[100, -1], [8, pytest.approx(1e5)]]
    assert trace.counts["time_jumps"] == 1


def test_events_overwritten_in_the_ring_buffer_are_counted_as_lost(tmp_path):
    path = write_trace(tmp_path, issue(1.0, "R", 8, 8))
    path.write_text(path.read_text().replace("entries-written: 9/9", "entries-written: 9/1209"))
    assert parse_ftrace(path).counts["lost_events"] == 1200


def test_events_lost_while_the_trace_was_read_are_counted_as_lost_not_as_bad_lines(tmp_path):
    trace = parse_ftrace(write_trace(tmp_path, issue(1.0, "R", 8, 8) + "CPU:1 [LOST 3043 EVENTS]\n" + complete(1.1, "R", 8, 8)))
    assert (trace.counts["lost_events"], trace.counts["bad_lines"], len(trace.requests)) == (3043, 0, 1)


def test_random_traces_pair_as_a_queue_per_device_and_sector(tmp_path):
    """Against the definition: in file order, a completion closes the oldest open dispatch of its device and
    sector; many requests share sectors, complete out of order or never, and some completions match nothing."""
    rng = np.random.default_rng(3)
    lines, events, ts = [], [], 1.0
    open_requests: list[tuple[str, int, int]] = []
    for _ in range(3000):
        ts += float(rng.integers(1, 50)) / 1e6
        if open_requests and rng.random() < 0.45:
            dev, sector, size = open_requests.pop(int(rng.integers(len(open_requests))))
            lines.append(complete(ts, "R", sector, size, dev=dev))
            events.append(("C", ts, dev, sector, size))
        elif rng.random() < 0.05:
            sector = int(rng.integers(0, 4)) * 8
            lines.append(complete(ts, "R", sector, 8))
            events.append(("C", ts, "7,1", sector, 8))
        else:
            dev, sector, size = str(rng.choice(["7,1", "7,2"])), int(rng.integers(0, 16)) * 8, int(rng.choice([8, 32]))
            open_requests.append((dev, sector, size))
            lines.append(issue(ts, rng.choice(["R", "RA", "RS"]), sector, size, dev=dev))
            events.append(("D", ts, dev, sector, size))
    expected, waiting = [], {}
    for action, at, dev, sector, size in events:
        if action == "D":
            row = [round(at, 6), dev.replace(",", ":"), sector, size, math.nan]
            expected.append(row)
            waiting.setdefault((dev, sector), []).append(row)
        elif waiting.get((dev, sector)):
            row = waiting[(dev, sector)].pop(0)
            row[4] = round((at - row[0]) * 1e6)
    columns = ["ts_s", "device", "sector", "size_sectors", "latency_us"]
    got = parse_ftrace(write_trace(tmp_path, "".join(lines))).requests[columns]
    got = got.assign(ts_s=got["ts_s"].round(6), device=got["device"].astype(str), latency_us=got["latency_us"].round())
    pd.testing.assert_frame_equal(got, pd.DataFrame(expected, columns=columns))


@pytest.mark.parametrize("rwbs", ["FF", "F", "FN", "FS"])
def test_every_spelling_of_a_bare_flush_is_counted_as_a_flush(tmp_path, rwbs):
    trace = parse_ftrace(write_trace(tmp_path, issue(1.0, rwbs, 0, 0) + complete(1.1, rwbs, 0, 0)))
    assert (len(trace.requests), trace.counts["flush"], trace.counts["other_op"]) == (0, 1, 0)


def test_chunks_of_any_size_read_the_same_requests(tmp_path, monkeypatch):
    """Lines cut by a chunk's end, a marker longer than a chunk, and a last line without its newline."""
    body = "".join(issue(1.0 + i / 1000, "R", 8 * i, 8) + complete(1.0005 + i / 1000, "R", 8 * i, 8) for i in range(40))
    path = write_trace(tmp_path, marker(0.5, "tierlab start q03_try1 " + "x" * 300) + body.rstrip("\n"))
    whole = parse_ftrace(path)
    monkeypatch.setattr("tierlab.traces.ftrace.CHUNK_BYTES", 97)
    chunked = parse_ftrace(path)
    pd.testing.assert_frame_equal(chunked.requests, whole.requests)
    assert len(whole.requests) == 40
    assert chunked.markers == whole.markers
