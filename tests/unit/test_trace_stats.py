import json

import pytest

from tierlab.cli import main
from tierlab.traces.blktrace import write_blktrace
from tierlab.traces.formats import detect_format
from tierlab.traces.ftrace_raw import write_ftrace_raw

FTRACE = """# tracer: nop
#
        mariadbd-12033   [000] .....   10.000000: block_rq_issue: 7,1 R 16384 () 0 + 32 be,0,4 [mariadbd]
          <idle>-0       [001] ..s1.   10.000100: block_rq_complete: 7,1 R () 0 + 32 be,0,4 [0]
        mariadbd-12033   [000] .....   10.001000: block_rq_issue: 7,1 R 16384 () 32 + 32 be,0,4 [mariadbd]
          <idle>-0       [001] ..s1.   10.001100: block_rq_complete: 7,1 R () 32 + 32 be,0,4 [0]
        mariadbd-12033   [000] .....   10.002000: block_rq_issue: 7,1 R 16384 () 0 + 32 be,0,4 [mariadbd]
          <idle>-0       [001] ..s1.   10.002300: block_rq_complete: 7,1 R () 0 + 32 be,0,4 [0]
        mariadbd-12033   [000] .....   10.003000: block_rq_issue: 7,1 FF 0 () 0 + 0 be,0,4 [mariadbd]
"""


def test_trace_stats_json_of_an_ftrace_file(tmp_path, capsys):
    path = tmp_path / "q.ftrace"
    path.write_text(FTRACE)
    main(["trace-stats", str(path), "--json"])
    stats = json.loads(capsys.readouterr().out)
    assert (stats["requests"], stats["read_requests"], stats["write_requests"], stats["other_requests"]) == (3, 3, 0, 1)
    assert (stats["pages"], stats["distinct_pages"]) == (3, 2)
    assert stats["repeat_access_rate"] == 1.5
    assert stats["sequential_pct"] == pytest.approx(100 / 3)
    assert stats["latency_us"]["p50"] == pytest.approx(100.0)
    assert stats["counts"]["dispatch_without_completion"] == 1


def test_trace_stats_of_a_raw_window_counts_what_its_text_would(tmp_path, capsys):
    events = [("issue", 10_000_000_000, 12033, "7:1", 0, 32, "R", "mariadbd"),
              ("complete", 10_000_100_000, 0, "7:1", 0, 32, "R")]
    path = write_ftrace_raw(tmp_path / "q.ftrace-raw", [events])
    main(["trace-stats", str(path), "--json"])
    stats = json.loads(capsys.readouterr().out)
    assert (stats["requests"], stats["read_requests"], stats["latency_us"]["p50"]) == (1, 1, pytest.approx(100.0))


def test_formats_are_told_apart(tmp_path):
    ftrace = tmp_path / "a.ftrace"
    ftrace.write_text(FTRACE)
    text = tmp_path / "a.txt"
    text.write_text("  7,1    0        1     0.000000000 12033  D   R 0 + 32 [mariadbd]\n")
    write_blktrace(tmp_path / "b.blktrace.0", [])
    raw = write_ftrace_raw(tmp_path / "a.ftrace-raw", [[("print", 10**9, "tierlab start q")]])
    assert detect_format(str(raw)) == "ftrace-raw"
    assert detect_format(str(ftrace)) == "ftrace"
    assert detect_format(str(text)) == "blkparse"
    assert detect_format(str(tmp_path / "b")) == "binary"


@pytest.mark.parametrize(("flag", "given", "allowed"), [
    ("--page-size", "1000000000000", "a power of two from 512 to 65536 bytes"),
    ("--page-size", "12288", "a power of two from 512 to 65536 bytes"),
    ("--page-size", "16k", "a power of two from 512 to 65536 bytes"),
])
def test_trace_stats_refuses_a_page_size_that_is_no_page_size(tmp_path, capsys, flag, given, allowed):
    path = tmp_path / "q.ftrace"
    path.write_text(FTRACE)
    with pytest.raises(SystemExit) as done:
        main(["trace-stats", str(path), flag, given])
    assert done.value.code == 2
    assert f"argument {flag}: {given!r} is not allowed; allowed: {allowed}" in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "given", "allowed"), [
    ("--stream-window", "-1", "a whole number from 1 to 1024"),
    ("--random-threshold", "nan", "a percentage from 0 to 100"),
    ("--repeat-threshold", "inf", "a rate of at least 1 (1.0: no page read twice)"),
])
def test_analyze_refuses_parameters_out_of_their_range_before_reading_anything(tmp_path, capsys, flag, given, allowed):
    with pytest.raises(SystemExit) as done:
        main(["analyze", str(tmp_path / "no-such-run"), flag, given])
    assert done.value.code == 2
    assert f"argument {flag}: {given!r} is not allowed; allowed: {allowed}" in capsys.readouterr().err


def test_a_directory_given_as_a_trace_is_refused(tmp_path):
    with pytest.raises(SystemExit) as done:
        main(["trace-stats", str(tmp_path)])
    assert str(done.value) == (f"tierlab trace-stats: {tmp_path} is a directory; give a trace file, or the prefix of "
                               "per-CPU blktrace files (DIR/loop0 for DIR/loop0.blktrace.N)")


def test_the_same_trace_given_twice_is_refused_rather_than_counted_twice(tmp_path):
    path = tmp_path / "q.ftrace"
    path.write_text(FTRACE)
    link = tmp_path / "again.ftrace"
    link.symlink_to(path)
    with pytest.raises(SystemExit) as done:
        main(["trace-stats", str(path), str(link)])
    assert str(done.value) == f"tierlab trace-stats: {link} is the same trace as {path}; give each trace once"


def refusal(args) -> str:
    with pytest.raises(SystemExit) as done:
        main(["trace-stats", *map(str, args)])
    return str(done.value)


def test_a_format_that_does_not_match_the_file_is_refused(tmp_path):
    path = tmp_path / "q.ftrace"
    path.write_text(FTRACE)
    assert refusal([path, "--format", "blkparse"]) == (f"tierlab trace-stats: {path} is in the ftrace format, not blkparse: "
                                                       "give --format ftrace, or leave --format out")


def test_a_binary_trace_read_as_blkparse_text_is_refused(tmp_path):
    path = write_blktrace(tmp_path / "loop0.blktrace.0", [("D", 1000, "7:0", 8, 4096, "R", 42, 0)])
    assert refusal([path, "--format", "blkparse"]) == (f"tierlab trace-stats: {path} is in the binary format, not "
                                                       "blkparse: give --format binary, or leave --format out")


def test_a_request_size_no_device_has_is_counted_and_left_out_of_a_small_trace(tmp_path, capsys):
    path = tmp_path / "q.ftrace"
    path.write_text(FTRACE.replace("() 32 + 32 be,0,4 [mariadbd]", "() 32 + 999999999 be,0,4 [mariadbd]"))
    assert path.stat().st_size < 1000
    main(["trace-stats", str(path), "--json"])
    out, err = capsys.readouterr()
    stats = json.loads(out)
    assert (stats["counts"]["beyond_bounds"], stats["read_requests"], stats["distinct_pages"]) == (1, 2, 1)
    assert ("warning: the trace has 1 requests beyond 2^63 bytes or over 128 MiB long, more than any device takes "
            "(corrupt fields; left out)\n") in err


@pytest.mark.parametrize(("content", "is_what"), [(bytes(range(256)) * 4, "not a block trace"), (b"", "empty")])
def test_a_file_that_is_no_trace_is_refused_rather_than_read_as_an_empty_one(tmp_path, content, is_what):
    path = tmp_path / "q.txt"
    path.write_bytes(content)
    assert refusal([path]) == (f"tierlab trace-stats: {path} is {is_what}: its first {len(content)} bytes are neither "
                               "binary blktrace, nor blkparse's text, nor ftrace's text or raw window")


def test_a_gap_in_the_per_cpu_files_is_counted_and_warned_about(tmp_path, capsys):
    for cpu in (0, 3):
        events = [("D", 1000 + cpu, "7:0", 8 * cpu, 4096, "R", 42, cpu), ("C", 90000 + cpu, "7:0", 8 * cpu, 4096, "R", 0, cpu)]
        write_blktrace(tmp_path / f"loop0.blktrace.{cpu}", events, cpu=cpu)
    main(["trace-stats", str(tmp_path / "loop0"), "--json"])
    out, err = capsys.readouterr()
    assert json.loads(out)["counts"]["missing_cpu_files"] == 2
    assert ("warning: the trace has 2 CPU numbers without a per-CPU file (a CPU offline, or its file and events "
            "missing)\n") in err


def test_lost_events_are_counted_and_warned_about(tmp_path, capsys):
    path = tmp_path / "q.ftrace"
    path.write_text(FTRACE + "CPU:1 [LOST 3043 EVENTS]\n")
    main(["trace-stats", str(path), "--json"])
    out, err = capsys.readouterr()
    assert json.loads(out)["counts"]["lost_events"] == 3043
    assert "warning: the trace has 3043 events lost by the tracer (their requests are missing)\n" in err
