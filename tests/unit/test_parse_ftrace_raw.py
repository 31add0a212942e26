import numpy as np
import pandas as pd
import pytest
from test_parse_ftrace import HEADER, complete, issue, marker

from tierlab.errors import TraceFormatError
from tierlab.traces.formats import FTRACE_RAW_MAGIC
from tierlab.traces.ftrace import parse_ftrace
from tierlab.traces.ftrace_raw import KERNEL_LAYOUT, parse_ftrace_raw, write_ftrace_raw


def ns(seconds: float) -> int:
    return round(seconds * 1e9)


def test_a_dispatch_and_its_completion_on_another_cpu_make_one_request(tmp_path):
    path = write_ftrace_raw(tmp_path / "q03_try1.ftrace-raw", [
        [("print", ns(714.5), "tierlab start q03_try1"), ("issue", ns(714.545253), 12033, "7:1", 25231688, 32, "RS", "mariadbd")],
        [("complete", ns(714.545399), 0, "7:1", 25231688, 32, "RS"), ("print", ns(714.6), "tierlab end q03_try1")]])
    trace = parse_ftrace_raw(path)
    row = trace.requests.iloc[0]
    assert len(trace.requests) == 1
    assert (row["device"], row["op"], row["rwbs"], row["sector"], row["size_sectors"], row["pid"], row["process"]) == (
        "7:1", "R", "RS", 25231688, 32, 12033, "mariadbd")
    assert row["latency_us"] == pytest.approx(146.0)
    assert trace.markers == [(714.5, "tierlab start q03_try1"), (714.6, "tierlab end q03_try1")]


def test_the_same_events_read_as_raw_and_as_text_give_the_same_requests(tmp_path):
    """Two CPUs, reads and writes on two devices, deltas past 27 bits, records longer than 112 bytes; times in
    whole microseconds, as ftrace's text shows them (the raw records keep nanoseconds)."""
    rng = np.random.default_rng(7)
    cpus, lines = [[], []], []
    at = 1_000_000_000_000
    for n in range(3000):
        at += 1000 * int(rng.integers(1, 200_000 if n % 500 == 0 else 50))
        sector, size = int(rng.integers(0, 1 << 30)) * 8, int(rng.choice([8, 32, 256]))
        rwbs, dev = str(rng.choice(["R", "RA", "WS", "RM"])), str(rng.choice(["7:1", "7:2"]))
        done = at + 1000 * int(rng.integers(5, 900))
        comm = str(rng.choice(["mariadbd", "ib_io_rd-3", "postgres"]))
        cpus[n % 2].append(("issue", at, 4000 + n % 7, dev, sector, size, rwbs, comm))
        cpus[(n + 1) % 2].append(("complete", done, 0, dev, sector, size, rwbs))
        lines.append((at, issue(at / 1e9, rwbs, sector, size, task=f"{comm}-{4000 + n % 7}", comm=comm,
                                dev=dev.replace(":", ","))))
        lines.append((done, complete(done / 1e9, rwbs, sector, size, dev=dev.replace(":", ","))))
    long_text = "tierlab start q01_try1 " + "x" * 200
    cpus[0].insert(0, ("print", 999_000_000_000, long_text))
    lines.append((999_000_000_000, marker(999.0, long_text)))
    for events in cpus:
        events.sort(key=lambda event: event[1])
    raw = parse_ftrace_raw(write_ftrace_raw(tmp_path / "w.ftrace-raw", cpus))
    (tmp_path / "w.ftrace").write_text(HEADER + "".join(line for _, line in sorted(lines, key=lambda pair: pair[0])))
    text = parse_ftrace(tmp_path / "w.ftrace")
    assert len(raw.requests) == 3000
    pd.testing.assert_frame_equal(raw.requests, text.requests, check_exact=False, rtol=1e-9)
    assert raw.markers == text.markers == [(999.0, long_text)]
    assert raw.counts["dispatch_without_completion"] == raw.counts["completion_without_dispatch"] == 0


def test_events_lost_before_a_page_are_counted(tmp_path):
    events = [("issue", ns(1 + n / 1000), 1, "7:1", 8 * n, 8, "R", "mariadbd") for n in range(200)]
    trace = parse_ftrace_raw(write_ftrace_raw(tmp_path / "w.ftrace-raw", [events], lost={(0, 1): 57}))
    assert (trace.counts["lost_events"], trace.counts["lost_pages"]) == (57, 1)


def test_a_damaged_page_is_refused_with_its_file_and_counted_when_tolerated(tmp_path):
    events = [("issue", ns(1 + n / 1000), 1, "7:1", 8 * n, 8, "R", "mariadbd") for n in range(200)]
    path = write_ftrace_raw(tmp_path / "w.ftrace-raw", [events])
    data = bytearray(path.read_bytes())
    start = data.index(b"\n", len(FTRACE_RAW_MAGIC)) + 1
    data[start + 8:start + 16] = (5000).to_bytes(8, "little")      # the first page says it holds 5000 bytes
    path.write_bytes(data)
    with pytest.raises(TraceFormatError) as err:
        parse_ftrace_raw(path)
    assert str(err.value) == (f"{path}: 1 damaged or cut page(s) of the raw ftrace window; pass --tolerate-errors "
                              "to leave them out (they are counted)")
    tolerated = parse_ftrace_raw(path, tolerate_errors=True)
    assert tolerated.counts["bad_pages"] == 1
    # an issue event takes 72 bytes (a 4-byte header, 65 of record padded to 68), so a page's 4080 bytes hold 56:
    # the pages hold 56, 56, 56 and 32 issues, and the three kept have 144 (each without its completion)
    assert tolerated.counts["dispatch_without_completion"] == 144


def test_a_cut_last_page_is_a_damaged_page(tmp_path):
    path = write_ftrace_raw(tmp_path / "w.ftrace-raw", [[("issue", ns(1), 1, "7:1", 8, 8, "R", "mariadbd")]])
    path.write_bytes(path.read_bytes()[:-100])
    assert parse_ftrace_raw(path, tolerate_errors=True).counts["bad_pages"] == 1


def test_a_file_that_is_not_a_raw_window_is_refused(tmp_path):
    path = tmp_path / "w.ftrace-raw"
    path.write_bytes(b"# tracer: nop\n")
    with pytest.raises(TraceFormatError) as err:
        parse_ftrace_raw(path)
    assert str(err.value) == f"{path}: not a raw ftrace window (it does not begin with 'tierlab ftrace-raw 1')"


def test_a_layout_without_the_block_formats_is_refused(tmp_path):
    layout = {**KERNEL_LAYOUT, "formats": {"print": KERNEL_LAYOUT["formats"]["print"]}}
    path = write_ftrace_raw(tmp_path / "w.ftrace-raw", [[("print", ns(1), "tierlab start q")]], layout=layout)
    with pytest.raises(TraceFormatError, match="the layout line of the raw ftrace window is unreadable"):
        parse_ftrace_raw(path)
