"""A query's trace cut short (its end marker lost) is marked, not taken as the whole query."""

import json

import pytest

from tierlab.run_io import analyze, load_run

HEADER = "# tracer: nop\n#\n"


def line(ts: float, event: str) -> str:
    return f"        mariadbd-12033   [000] .....   {ts:.6f}: {event}\n"


def read(ts: float, sector: int) -> str:
    return (line(ts, f"block_rq_issue: 7,1 R 16384 () {sector} + 32 be,0,4 [mariadbd]")
            + line(ts + 0.0001, f"block_rq_complete: 7,1 R () {sector} + 32 be,0,4 [0]"))


def make_run(tmp_path, body: str):
    run = tmp_path / "20261123T092837Z_mariadb_tpch-sf0.1_C+O"
    for sub in ("config", "raw/traces"):
        (run / sub).mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"schema_version": 1, "run_id": run.name}))
    (run / "config" / "study.json").write_text(json.dumps({"study": {"page_size_bytes": 16384}}))
    (run / "raw" / "tiers.json").write_text(json.dumps([{"name": "nand", "device": "7:1"}]))
    (run / "raw" / "extents.json").write_text(json.dumps({"files": [
        {"object": "lineitem", "path": "/t/lineitem.ibd", "device": "7:1", "extents": [[0, 0, 1 << 20]]}]}))
    (run / "raw" / "queries.jsonl").write_text(json.dumps(
        {"query": "q03", "try": 1, "status": "ok", "error": "", "elapsed_s": 1.0, "rows": 10, "cache": "cold",
         "started_at": "2026-11-23T09:28:40Z", "trace_files": ["q03_try1.ftrace"], "events_lost": 0}) + "\n")
    (run / "raw" / "traces" / "q03_try1.ftrace").write_text(HEADER + body)
    return run


@pytest.mark.parametrize(("end_marker", "complete"), [(True, True), (False, False)])
def test_a_trace_is_complete_only_with_its_end_marker(tmp_path, end_marker, complete):
    body = line(1.0, "tracing_mark_write: tierlab start q03_try1") + read(1.1, 0) + read(1.2, 32)
    if end_marker:
        body += line(1.3, "tracing_mark_write: tierlab end q03_try1")
    tables = analyze(load_run(make_run(tmp_path, body)))
    assert tables["queries"]["trace_complete"].tolist() == [complete]
    assert tables["trace_counts"]["trace_complete"].tolist() == [complete]
    assert tables["query_metrics"]["read_requests"].tolist() == [2]
