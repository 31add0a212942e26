import json

import pandas as pd
import pytest

from tierlab.errors import RunDirError
from tierlab.metrics.throughput import throughput
from tierlab.runs.results import read_driver_reports

# as sysbench_report.lua writes them: two 1 s intervals and the window's total
REPORTS = [
    {"kind": "interval", "time_total_s": 1.0, "time_interval_s": 1.0, "threads_running": 2, "percentile": 95,
     "latency_pct_ms": 3.5, "events": 100, "reads": 1400, "writes": 400, "other": 200, "errors": 1, "reconnects": 0},
    {"kind": "interval", "time_total_s": 2.0, "time_interval_s": 1.0, "threads_running": 2, "percentile": 95,
     "latency_pct_ms": 4.5, "events": 80, "reads": 1120, "writes": 320, "other": 160, "errors": 0, "reconnects": 0},
    {"kind": "total", "time_total_s": 2.0, "time_interval_s": 2.0, "threads_running": 0, "percentile": 95,
     "latency_pct_ms": 4.2, "events": 180, "reads": 2520, "writes": 720, "other": 360, "errors": 1, "reconnects": 0,
     "latency_min_ms": 1.0, "latency_avg_ms": 2.2, "latency_max_ms": 9.0},
]


def write_reports(run_dir, name, lines):
    driver = run_dir / "raw" / "driver"
    driver.mkdir(parents=True, exist_ok=True)
    (driver / name).write_text("".join(line + "\n" for line in lines))


def test_the_window_s_total_becomes_rates_per_second():
    totals, _ = throughput(pd.DataFrame([{"query": "oltp_read_write", "try": 1, **r} for r in REPORTS]))
    assert totals.to_dict("records") == [{
        "query": "oltp_read_write", "try": 1, "seconds": 2.0, "transactions": 180, "tps": 90.0, "qps": 1800.0,
        "reads_per_s": 1260.0, "writes_per_s": 360.0, "other_per_s": 180.0, "errors": 1, "errors_per_s": 0.5,
        "reconnects": 0, "latency_avg_ms": 2.2, "latency_pct_ms": 4.2, "percentile": 95, "latency_max_ms": 9.0}]


def test_each_interval_becomes_a_row_at_its_time_in_the_window():
    _, intervals = throughput(pd.DataFrame([{"query": "oltp_read_write", "try": 1, **r} for r in REPORTS]))
    assert list(intervals["time_s"]) == [1.0, 2.0]
    assert list(intervals["tps"]) == [100.0, 80.0]
    assert list(intervals["errors_per_s"]) == [1.0, 0.0]
    assert list(intervals["latency_pct_ms"]) == [3.5, 4.5]


def test_no_reports_give_empty_tables_with_their_columns():
    totals, intervals = throughput(pd.DataFrame())
    assert totals.empty and "tps" in totals.columns
    assert intervals.empty and "time_s" in intervals.columns


def test_a_window_s_reports_are_read_with_its_step_and_try_and_the_warm_up_s_are_not(tmp_path):
    lines = ["sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)", *map(json.dumps, REPORTS)]
    write_reports(tmp_path, "oltp_read_write_try2.jsonl", lines)
    write_reports(tmp_path, "oltp_read_write_try2.warmup.jsonl", lines)
    reports = read_driver_reports(tmp_path)
    assert len(reports) == 3
    assert set(zip(reports["query"], reports["try"], strict=True)) == {("oltp_read_write", 2)}


def test_a_damaged_report_is_refused_naming_its_file_and_line(tmp_path):
    write_reports(tmp_path, "oltp_read_only_try1.jsonl", [json.dumps(REPORTS[0]), '{"kind": "interval", "time'])
    with pytest.raises(RunDirError) as err:
        read_driver_reports(tmp_path)
    assert str(err.value).startswith(f"{tmp_path}/raw/driver/oltp_read_only_try1.jsonl:2: not a report of the driver (")
