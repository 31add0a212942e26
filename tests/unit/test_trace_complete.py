"""A query's trace cut short (its end marker lost) is marked, not taken as the whole query."""

import json

import pytest

from tierlab.cli import main
from tierlab.runs.analyze import analyze
from tierlab.runs.results import load_run
from tiny_run import add_query, line, make_run, read


@pytest.mark.parametrize(("end_marker", "complete"), [(True, True), (False, False)])
def test_a_trace_is_complete_only_with_its_end_marker(tmp_path, end_marker, complete):
    body = line(1.0, "tracing_mark_write: tierlab start q03_try1") + read(1.1, 0) + read(1.2, 32)
    if end_marker:
        body += line(1.3, "tracing_mark_write: tierlab end q03_try1")
    tables = analyze(load_run(make_run(tmp_path, body)))
    assert tables["queries"]["trace_complete"].tolist() == [complete]
    assert tables["trace_counts"]["trace_complete"].tolist() == [complete]
    assert tables["query_metrics"]["read_requests"].tolist() == [2]


def test_a_cut_trace_is_warned_about_on_stderr_and_in_the_report(tmp_path, capsys):
    run = make_run(tmp_path, line(1.0, "tracing_mark_write: tierlab start q03_try1") + read(1.1, 0))
    main(["analyze", str(run)])
    assert ("warning: the trace of q03 try 1 has no end marker: it was cut short, and the query's requests after the "
            "cut are missing (trace_complete=False in tables/queries.csv)\n") in capsys.readouterr().err
    assert "were cut short (no end marker)" in (run / "report" / "report.html").read_text()


def test_a_stream_does_not_continue_from_one_query_window_into_the_next(tmp_path):
    # q05's first read starts where q03's last read ended (sector 64), but each query starts cold
    window = "tracing_mark_write: tierlab {} {}_try1"
    run = make_run(tmp_path, line(1.0, window.format("start", "q03")) + read(1.1, 0) + read(1.2, 32)
                   + line(1.3, window.format("end", "q03")))
    add_query(run, "q05", line(2.0, window.format("start", "q05")) + read(2.1, 64) + read(2.2, 96)
              + line(2.3, window.format("end", "q05")))
    metrics = analyze(load_run(run))["query_metrics"]
    assert metrics[["query", "sequential_pct"]].values.tolist() == [["q03", 50.0], ["q05", 50.0]]


def test_each_tier_and_table_of_a_query_is_summarised_apart(tmp_path):
    # the 4 KiB read of orders comes between the two of lineitem in time, after them in page order
    run = make_run(tmp_path, read(1.0, 0) + line(1.1, "block_rq_issue: 7,0 R 4096 () 64 + 8 be,0,4 [mariadbd]")
                   + line(1.15, "block_rq_complete: 7,0 R () 64 + 8 be,0,4 [0]") + read(1.2, 32))
    (run / "raw" / "tiers.json").write_text(json.dumps([{"name": "nand", "role": "capacity", "device": "7:1"},
                                                        {"name": "optane", "role": "fast", "device": "7:0"}]))
    (run / "raw" / "extents.json").write_text(json.dumps({"files": [
        {"object": "lineitem", "path": "/t/lineitem.ibd", "device": "7:1", "extents": [[0, 0, 1 << 20]]},
        {"object": "orders", "path": "/t/orders.ibd", "device": "7:0", "extents": [[0, 0, 1 << 20]]}]}))
    tables = analyze(load_run(run))
    assert tables["tier_metrics"][["tier", "read_requests", "read_bytes"]].values.tolist() == [
        ["nand", 2, 32768], ["optane", 1, 4096]]
    assert tables["table_metrics"][["object", "tier", "read_requests", "read_bytes"]].values.tolist() == [
        ["lineitem", "nand", 2, 32768], ["orders", "optane", 1, 4096]]
