import math
import subprocess

import numpy as np
import pandas as pd
import pytest
from random_blktrace import DEV, T0, random_trace, write_per_cpu

from tierlab.errors import TraceFormatError
from tierlab.traces.blk import (
    BLK_IO_TRACE_MAGIC,
    BLK_IO_TRACE_VERSION,
    BLK_TA_CGROUP,
    BLK_TC_AHEAD,
    BLK_TC_DISCARD,
    BLK_TC_FLUSH,
    BLK_TC_FUA,
    BLK_TC_META,
    BLK_TC_PC,
    BLK_TC_READ,
    BLK_TC_SYNC,
    BLK_TC_WRITE,
    blk_action,
    dev_t,
    record_dtype,
    rwbs_string,
)
from tierlab.traces.blkparse_text import parse_blkparse_text
from tierlab.traces.blktrace import parse_blktrace_binary, write_blktrace
from tierlab.traces.frame import MAX_END_SECTOR


def d(us, sector, sectors, rwbs="R", pid=4242, dev=DEV, cpu=0):
    """A dispatch `us` microseconds after T0."""
    return ("D", T0 + int(us * 1000), dev, sector, sectors * 512, rwbs, pid, cpu)


def c(us, sector, sectors, rwbs="R", dev=DEV, cpu=0):
    return ("C", T0 + int(us * 1000), dev, sector, sectors * 512, rwbs, 0, cpu)


def note(pid, name, us=-1, cpu=0):
    return ("process", T0 + int(us * 1000), DEV, pid, name, cpu)


def decode(tmp_path, events, name="q03_try1", **kwargs):
    return parse_blktrace_binary(write_blktrace(tmp_path / f"{name}.blktrace.0", events), **kwargs)


# ---- binary decoding ----


def test_dispatch_and_completion_make_one_request_with_its_latency(tmp_path):
    trace = decode(tmp_path, [note(4242, "mariadbd"), d(0, 305152, 32, "RS"), c(146, 305152, 32, "RS")])
    row = trace.requests.iloc[0]
    assert len(trace.requests) == 1
    assert (row["ts_s"], row["device"], row["op"], row["rwbs"], row["sector"], row["size_sectors"], row["pid"],
            row["process"]) == (5000.0, "8:16", "R", "RS", 305152, 32, 4242, "mariadbd")
    assert row["latency_us"] == 146.0


def test_the_frame_has_the_columns_and_types_of_parse_ftrace(tmp_path):
    requests = decode(tmp_path, [d(0, 8, 8), c(10, 8, 8)]).requests
    assert list(requests.columns) == ["ts_s", "device", "op", "rwbs", "sector", "size_sectors", "latency_us", "pid", "process"]
    assert [str(t) for t in requests.dtypes] == ["float64", "category", "category", "category", "int64", "int64", "float64",
                                                 "int64", "category"]


def test_completions_match_the_oldest_open_dispatch_of_the_same_sector(tmp_path):
    trace = decode(tmp_path, [d(0, 100, 8), d(100, 100, 8), c(200, 100, 8), c(500, 100, 8)])
    assert trace.requests["latency_us"].tolist() == [200.0, 400.0]


def test_completions_match_by_device_and_sector_whatever_the_sector(tmp_path):
    huge = MAX_END_SECTOR - 8
    # enough other requests in the batch that (device, sector) keys no longer pack into one 64-bit sort key
    others = [e for i in range(1024) for e in (d(100 + i, 8 * i, 8, dev="8:48"), c(101 + i, 8 * i, 8, dev="8:48"))]
    events = [d(0, huge, 8), d(1, huge, 8, dev="8:32"), d(2, huge, 8), c(10, huge, 8, dev="8:32"), c(20, huge, 8), c(40, huge, 8)]
    requests = decode(tmp_path, events + others).requests
    far = requests[requests["sector"] == huge]
    assert far[["device", "latency_us"]].values.tolist() == [["8:16", 20.0], ["8:32", 9.0], ["8:16", 38.0]]


def test_a_request_reaching_beyond_2_63_bytes_is_counted_and_left_out(tmp_path):
    trace = decode(tmp_path, [d(0, MAX_END_SECTOR - 7, 8), c(10, MAX_END_SECTOR - 7, 8), d(20, 8, 8), c(30, 8, 8)])
    assert trace.requests["sector"].tolist() == [8]
    assert (trace.counts["beyond_bounds"], trace.counts["completion_without_dispatch"]) == (1, 0)


def test_a_request_longer_than_any_device_takes_is_counted_and_left_out(tmp_path):
    longest = (128 << 20) // 512
    trace = decode(tmp_path, [d(0, 0, longest), c(10, 0, longest), d(20, 1 << 20, longest + 8),
                              c(30, 1 << 20, longest + 8), d(40, 8 << 30, (1 << 23) - 1), c(50, 8 << 30, (1 << 23) - 1)])
    assert trace.requests["size_sectors"].tolist() == [longest]
    assert trace.counts["beyond_bounds"] == 2


def test_a_completion_over_300_s_after_its_dispatch_is_a_time_jump_counted_and_its_latency_left_out(tmp_path):
    trace = decode(tmp_path, [d(0, 8, 8), c(301e6, 8, 8), d(10, 16, 8), c(20, 16, 8), d(5e6, 24, 8), c(299e6, 24, 8)])
    assert trace.requests[["sector", "latency_us"]].fillna(-1).values.tolist() == [[8, -1], [16, 10], [24, 294e6]]
    assert trace.counts["time_jumps"] == 1


def test_both_byte_orders_decode_to_the_same_frame(tmp_path):
    events = [note(4242, "mariadbd"), d(0, 100, 8, "WS"), d(3, 200, 16, "RA"), c(40, 200, 16, "RA"), c(90, 100, 8, "WS")]
    little = write_blktrace(tmp_path / "le.blktrace.0", events, byteorder="<")
    big = write_blktrace(tmp_path / "be.blktrace.0", events, byteorder=">")
    assert big.read_bytes()[:4] == bytes([0x65, 0x61, 0x74, 0x07])
    assert little.read_bytes()[:4] == bytes([0x07, 0x74, 0x61, 0x65])
    pd.testing.assert_frame_equal(parse_blktrace_binary(big).requests, parse_blktrace_binary(little).requests)
    assert parse_blktrace_binary(big).requests["latency_us"].tolist() == [90.0, 37.0]


def test_per_cpu_files_are_merged_by_time_before_matching(tmp_path):
    # the same sector on two CPUs; in time order D0 D10 C20 C30 -> both 20 us (CPU by CPU it would be 30 and 10)
    write_blktrace(tmp_path / "trace.blktrace.0", [d(0, 64, 8), c(30, 64, 8)], cpu=0)
    write_blktrace(tmp_path / "trace.blktrace.1", [d(10, 64, 8, cpu=1), c(20, 64, 8, cpu=1)], cpu=1)
    trace = parse_blktrace_binary(tmp_path / "trace")
    assert trace.requests["ts_s"].tolist() == [5000.0, 5000.00001]
    assert trace.requests["latency_us"].tolist() == [20.0, 20.0]


def test_a_prefix_expands_to_its_per_cpu_files_in_cpu_order(tmp_path):
    for cpu in (0, 1, 10, 2):
        write_blktrace(tmp_path / f"trace.blktrace.{cpu}", [d(cpu, 8 * cpu, 8, cpu=cpu), c(100 + cpu, 8 * cpu, 8, cpu=cpu)],
                       cpu=cpu)
    write_blktrace(tmp_path / "trace.other.blktrace.0", [d(50, 999, 8)])
    trace = parse_blktrace_binary(tmp_path / "trace")
    assert trace.requests["sector"].tolist() == [0, 8, 16, 80]
    explicit = parse_blktrace_binary([tmp_path / "trace.blktrace.10", tmp_path / "trace.blktrace.0",
                                      tmp_path / "trace.blktrace.2", tmp_path / "trace.blktrace.1"])
    pd.testing.assert_frame_equal(explicit.requests, trace.requests)


def test_a_missing_trace_is_reported(tmp_path):
    with pytest.raises(FileNotFoundError, match="no per-CPU files"):
        parse_blktrace_binary(tmp_path / "nothing")


def test_a_per_cpu_file_given_beside_its_prefix_is_refused_rather_than_read_twice(tmp_path):
    path = write_blktrace(tmp_path / "q03_try1.blktrace.0", [d(0, 8, 8), c(5, 8, 8)])
    with pytest.raises(TraceFormatError) as err:
        parse_blktrace_binary([tmp_path / "q03_try1", path])
    assert str(err.value) == f"{path} would be read twice: give each per-CPU file once, or their prefix alone"


def test_process_notes_name_the_pid_of_the_dispatch(tmp_path):
    events = [note(4242, "mariadbd", -3), note(0, "swapper/0", -2), d(0, 8, 8, pid=4242), d(1, 16, 8, pid=31337),
              c(5, 8, 8), c(6, 16, 8)]
    requests = decode(tmp_path, events).requests
    assert requests["process"].iloc[0] == "mariadbd" and pd.isna(requests["process"].iloc[1])
    assert requests["process"].cat.categories.tolist() == ["mariadbd"]
    assert requests["pid"].tolist() == [4242, 31337]


def test_a_reused_pid_takes_the_name_noted_last_before_the_dispatch(tmp_path):
    events = [d(50, 8, 8, pid=77), c(55, 8, 8), note(77, "kworker/0:1", 60), note(77, "mariadbd", 100),
              d(150, 16, 8, pid=77), c(155, 16, 8), d(70, 24, 8, pid=77), c(75, 24, 8)]
    requests = decode(tmp_path, sorted(events, key=lambda e: e[1])).requests
    # before any note: the first one; then the last one at or before the dispatch
    assert requests["process"].tolist() == ["kworker/0:1", "kworker/0:1", "mariadbd"]


def test_messages_and_timestamps_become_markers_in_time_order(tmp_path):
    events = [("timestamp", T0 - 500, DEV, 1_700_000_000, 5), d(0, 8, 8), ("message", T0 + 1_000, DEV, "tierlab start q03_try1"),
              c(2, 8, 8), ("message", T0 + 9_000, DEV, "tierlab end q03_try1\n")]
    assert decode(tmp_path, events).markers == [(4999.9999995, "blktrace wallclock 1700000000.000000005"),
                                                (5000.000001, "tierlab start q03_try1"),
                                                (5000.000009, "tierlab end q03_try1")]


def test_flush_discard_and_zero_length_are_counted_apart_from_data(tmp_path):
    events = [d(0, 0, 0, "FN"), d(1, 4096, 2048, "DS"), d(2, 64, 0, "W"), d(3, 800, 8, "WFS"), d(4, 900, 8, "FWFS"),
              d(5, 0, 0, "N"), ("D", T0 + 6_000, DEV, 1000, 100, "R", 1)]
    trace = decode(tmp_path, events)
    assert trace.requests["rwbs"].tolist() == ["WFS", "FWFS"]
    assert trace.requests["op"].tolist() == ["W", "W"]
    counts = trace.counts
    assert (counts["flush"], counts["discard"], counts["zero_length"], counts["other_op"]) == (1, 1, 2, 1)
    assert counts["dispatch_without_completion"] == 7


def test_passthrough_requests_are_other_ops(tmp_path):
    pc_read = BLK_TC_PC | BLK_TC_READ
    trace = decode(tmp_path, [d(0, 0, 8, pc_read), c(10, 0, 8, pc_read), d(20, 8, 8), c(30, 8, 8)])
    assert trace.requests["sector"].tolist() == [8]
    assert (trace.counts["other_op"], trace.counts["dispatch_without_completion"]) == (1, 0)


def test_unmatched_dispatches_and_completions_are_counted(tmp_path):
    trace = decode(tmp_path, [c(-10, 7, 8), d(0, 100, 8), c(5, 100, 8), c(6, 100, 8), d(7, 200, 8)])
    assert trace.counts["completion_without_dispatch"] == 2
    assert trace.counts["dispatch_without_completion"] == 1
    assert trace.requests["latency_us"].iloc[0] == 5.0
    assert math.isnan(trace.requests["latency_us"].iloc[1])


def test_other_actions_are_skipped(tmp_path):
    events = [("Q", T0 - 2_000, DEV, 8, 4096, "R", 1), ("G", T0 - 1_500, DEV, 8, 4096, "R", 1),
              ("I", T0 - 1_000, DEV, 8, 4096, "R", 1), d(0, 8, 8), c(9, 8, 8)]
    trace = decode(tmp_path, events)
    assert trace.requests["latency_us"].tolist() == [9.0]
    assert trace.counts["completion_without_dispatch"] == 0


def test_records_with_a_cgroup_id_are_decoded(tmp_path):
    dtype = record_dtype("<")
    payload = (123456).to_bytes(8, "little")
    out = b""
    for time, action in ((T0, blk_action("D", "W")), (T0 + 20_000, blk_action("C", "W"))):
        record = np.zeros(1, dtype)
        record[["magic", "time", "sector", "bytes", "action", "pid", "device", "pdu_len"]] = (
            BLK_IO_TRACE_MAGIC | BLK_IO_TRACE_VERSION, time, 64, 4096, action | BLK_TA_CGROUP, 9, dev_t(DEV), 8)
        out += record.tobytes() + payload
    path = tmp_path / "cg.blktrace.0"
    path.write_bytes(out)
    assert parse_blktrace_binary(path).requests[["rwbs", "sector", "latency_us"]].values.tolist() == [["W", 64, 20.0]]


def test_an_empty_file_gives_an_empty_frame(tmp_path):
    (tmp_path / "idle.blktrace.0").write_bytes(b"")
    trace = parse_blktrace_binary(tmp_path / "idle")
    assert trace.requests.empty
    assert str(trace.requests["device"].dtype) == "category"
    assert trace.counts["bad_records"] == 0


@pytest.mark.parametrize(("categories", "nbytes", "rwbs"), [
    (BLK_TC_READ, 4096, "R"), (BLK_TC_READ, 0, "N"), (BLK_TC_WRITE | BLK_TC_SYNC, 4096, "WS"), (BLK_TC_FLUSH, 0, "FN"),
    (BLK_TC_FLUSH | BLK_TC_WRITE | BLK_TC_FUA | BLK_TC_SYNC, 4096, "FWFS"), (BLK_TC_DISCARD | BLK_TC_SYNC, 4096, "DS"),
    (BLK_TC_READ | BLK_TC_AHEAD, 4096, "RA"), (BLK_TC_WRITE | BLK_TC_SYNC | BLK_TC_META, 512, "WSM")])
def test_rwbs_is_built_from_the_category_bits_as_blkparse_does(categories, nbytes, rwbs):
    assert rwbs_string(categories, nbytes) == rwbs


# ---- corrupt and truncated files ----


def three_requests(tmp_path):
    """A process note (48 + 16 bytes) then three D/C pairs (48 bytes each): records at 64, 112, ... 304."""
    events = [note(4242, "mariadbd"), d(0, 8, 8), c(5, 8, 8), d(10, 16, 8), c(15, 16, 8), d(20, 24, 8), c(25, 24, 8)]
    return write_blktrace(tmp_path / "q03_try1.blktrace.0", events)


def test_a_truncated_record_names_the_file_and_byte_offset(tmp_path):
    path = three_requests(tmp_path)
    path.write_bytes(path.read_bytes()[:300])
    with pytest.raises(TraceFormatError, match=f"^{path}: at byte offset 256: record header is truncated: 44 of 48 bytes"):
        parse_blktrace_binary(path)


def test_a_truncated_file_keeps_its_good_part_when_tolerated(tmp_path):
    path = three_requests(tmp_path)
    path.write_bytes(path.read_bytes()[:300])
    trace = parse_blktrace_binary(path, tolerate_errors=True)
    assert trace.requests["sector"].tolist() == [8, 16]
    assert trace.requests["latency_us"].tolist() == [5.0, 5.0]
    assert (trace.counts["bad_records"], trace.counts["bad_bytes"]) == (1, 44)


def test_a_bad_magic_names_its_byte_offset(tmp_path):
    path = three_requests(tmp_path)
    data = bytearray(path.read_bytes())
    data[160:164] = b"\0\0\0\0"
    path.write_bytes(bytes(data))
    with pytest.raises(TraceFormatError, match=f"^{path}: at byte offset 160: bad magic 0x00000000"):
        parse_blktrace_binary(path)
    assert parse_blktrace_binary(path, tolerate_errors=True).requests["sector"].tolist() == [8]


def test_a_payload_running_past_the_end_is_an_error(tmp_path):
    path = write_blktrace(tmp_path / "m.blktrace.0", [d(0, 8, 8), c(5, 8, 8), ("message", T0 + 9_000, DEV, "a long message")])
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(TraceFormatError, match=r"at byte offset 96: payload runs past the end of the file \(pdu_len 14"):
        parse_blktrace_binary(path)


def test_a_file_that_is_not_a_blktrace_is_an_error(tmp_path):
    path = tmp_path / "x.blktrace.0"
    path.write_text("# tracer: nop\n")
    with pytest.raises(TraceFormatError, match="at byte offset 0: bad magic"):
        parse_blktrace_binary(path)


# ---- synthetic traces, against chunked decoding and against blkparse ----


def genesis_s(per_cpu) -> float:
    """blkparse's time zero: the first event other than a process note or timestamp."""
    return min(e[1] for events in per_cpu.values() for e in events if e[0] not in ("process", "timestamp")) / 1e9


def shifted(trace, seconds):
    return trace.requests.assign(ts_s=trace.requests["ts_s"] - seconds)


def assert_same_requests(ours, theirs):
    pd.testing.assert_frame_equal(ours, theirs, check_exact=False, rtol=0, atol=1e-9)
    # latencies are exact (both from integer nanoseconds)
    assert ours["latency_us"].fillna(-1).tolist() == theirs["latency_us"].fillna(-1).tolist()


COMMON_COUNTS = ["flush", "discard", "other_op", "zero_length", "dispatch_without_completion", "completion_without_dispatch"]


def test_the_random_trace_exercises_every_rule(tmp_path):
    trace = parse_blktrace_binary(write_per_cpu(tmp_path, random_trace()))
    assert all(trace.counts[key] > 0 for key in COMMON_COUNTS)
    assert trace.requests["process"].isna().any() and set(trace.requests["device"]) == {"8:16", "259:0"}


@pytest.mark.parametrize("chunk_bytes", [48, 100, 4096])
def test_decoding_in_small_chunks_gives_the_same_result(tmp_path, chunk_bytes):
    prefix = write_per_cpu(tmp_path, random_trace(requests=600, cpus=3))
    whole, chunked = parse_blktrace_binary(prefix), parse_blktrace_binary(prefix, chunk_bytes=chunk_bytes)
    pd.testing.assert_frame_equal(chunked.requests, whole.requests)
    assert (chunked.markers, chunked.counts) == (whole.markers, whole.counts)


def test_per_cpu_files_decode_event_for_event_like_blkparse(tmp_path):
    per_cpu = random_trace()
    prefix = write_per_cpu(tmp_path, per_cpu)
    text = tmp_path / "trace.txt"
    subprocess.run(["blkparse", "-i", str(prefix), "-o", str(text)], check=True, capture_output=True, timeout=120)
    ours, theirs = parse_blktrace_binary(prefix), parse_blkparse_text(text)
    assert len(theirs.requests) > 1000
    assert_same_requests(shifted(ours, genesis_s(per_cpu)), theirs.requests)
    assert {k: ours.counts[k] for k in COMMON_COUNTS} == {k: theirs.counts[k] for k in COMMON_COUNTS}
    assert [text for _, text in theirs.markers] == ["tierlab start q07_try2", "bfq0 dispatch"]
    assert [text for _, text in ours.markers] == ["tierlab start q07_try2", "bfq0 dispatch"]
    assert [ts for ts, _ in ours.markers] == pytest.approx([ts + genesis_s(per_cpu) for ts, _ in theirs.markers], abs=1e-9)


def test_a_big_endian_merged_dump_decodes_event_for_event_like_blkparse_from_stdin(tmp_path):
    per_cpu = random_trace(seed=11, cpus=3)
    merged = sorted((e for events in per_cpu.values() for e in events), key=lambda e: e[1])
    dump = write_blktrace(tmp_path / "merged.bin", merged, byteorder=">")
    with open(dump, "rb") as stdin:
        text = subprocess.run(["blkparse", "-i", "-"], stdin=stdin, check=True, capture_output=True, text=True,
                              timeout=120).stdout
    (tmp_path / "merged.txt").write_text(text)
    ours, theirs = parse_blktrace_binary(dump), parse_blkparse_text(tmp_path / "merged.txt")
    assert_same_requests(shifted(ours, genesis_s(per_cpu)), theirs.requests)
    assert {k: ours.counts[k] for k in COMMON_COUNTS} == {k: theirs.counts[k] for k in COMMON_COUNTS}


def test_a_blkparse_dump_decodes_like_its_per_cpu_files(tmp_path):
    per_cpu = random_trace(seed=3)
    prefix = write_per_cpu(tmp_path, per_cpu)
    dump = tmp_path / "dump.bin"
    subprocess.run(["blkparse", "-i", str(prefix), "-d", str(dump), "-o", "/dev/null"], check=True, capture_output=True,
                   timeout=120)
    # blkparse writes the events of its dump relative to the trace's first event
    ours, from_dump = parse_blktrace_binary(prefix), parse_blktrace_binary(dump)
    assert_same_requests(shifted(ours, genesis_s(per_cpu)), from_dump.requests)
    assert from_dump.counts == ours.counts


# ---- blkparse text ----


BLKPARSE_TEXT = """Input file trace.blktrace.0 added
  7,0    1        1     0.000000000  1234  D   RS 305152 + 32 [mariadbd]
  7,0    1        2     0.000000000  1234  Q   RS 400000 + 8 [mariadbd]
  7,0    0        0     0.000010000     0  m   N tierlab start q03_try1
  7,0    1        2     0.000070000     0  C   RS 305152 + 32 [0]
  7,0    1        3     0.000080000  4321  D   FN [(null)]
  7,0    1        4     0.000090000  1234  D    R 36 (12 00 00 00 24 00 ..) [sg_inq]
  7,0    1        5     0.000095000     0  C    R (12 00 00 00 24 00 ..) [0]
  7,0    1        6     0.000099000     0  C   FN 0 [0]
CPU1 (trace):
 Reads Queued:           1,        4KiB\t Writes Queued:           0,        0KiB
 Read Dispatches:        1,       16KiB\t Write Dispatches:        0,        0KiB

Throughput (R/W): 0KiB/s / 0KiB/s
Events (trace): 8 entries
Skips: 0 forward (0 -   0.0%)
"""


def test_blkparse_text_dispatch_and_completion_make_one_request(tmp_path):
    path = tmp_path / "trace.txt"
    path.write_text(BLKPARSE_TEXT)
    trace = parse_blkparse_text(path)
    row = trace.requests.iloc[0]
    assert len(trace.requests) == 1
    assert (row["ts_s"], row["device"], row["op"], row["rwbs"], row["sector"], row["size_sectors"], row["pid"],
            row["process"]) == (0.0, "7:0", "R", "RS", 305152, 32, 1234, "mariadbd")
    assert row["latency_us"] == 70.0
    assert trace.markers == [(0.00001, "tierlab start q03_try1")]


def test_blkparse_text_counts_flushes_and_passthrough_and_matches_them_at_sector_0(tmp_path):
    path = tmp_path / "trace.txt"
    path.write_text(BLKPARSE_TEXT)
    counts = parse_blkparse_text(path).counts
    assert (counts["flush"], counts["other_op"], counts["completion_without_dispatch"], counts["dispatch_without_completion"],
            counts["bad_lines"]) == (1, 1, 0, 0, 0)


def test_blkparse_text_a_garbled_event_line_names_the_file_and_line(tmp_path):
    path = tmp_path / "trace.txt"
    path.write_text(BLKPARSE_TEXT.replace("305152 + 32 [0]", "305152 + [0]"))
    with pytest.raises(TraceFormatError, match=f"^{path}:5: not a blkparse event line"):
        parse_blkparse_text(path)
    trace = parse_blkparse_text(path, tolerate_errors=True)
    assert (trace.counts["bad_lines"], trace.counts["dispatch_without_completion"]) == (1, 1)


def test_blkparse_text_read_in_batches_of_any_size_gives_the_same_requests(tmp_path, monkeypatch):
    prefix = write_per_cpu(tmp_path, random_trace())
    text = tmp_path / "trace.txt"
    subprocess.run(["blkparse", "-i", str(prefix), "-o", str(text)], check=True, capture_output=True, timeout=120)
    whole = parse_blkparse_text(text)
    monkeypatch.setattr("tierlab.traces.blkparse_text._TEXT_BATCH", 97)
    batched = parse_blkparse_text(text)
    pd.testing.assert_frame_equal(batched.requests, whole.requests)
    assert (batched.markers, batched.counts) == (whole.markers, whole.counts)
