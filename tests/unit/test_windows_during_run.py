"""Query windows summed up while the run goes on (`tierlab analyze --follow`), taken by the analysis of the whole
run only when they were made from what the run has at its end."""

import io
import json

import pandas as pd
import pyarrow.parquet as pq

from tierlab.cli import main
from tierlab.runs.analyze import analyze
from tierlab.runs.results import load_run
from tiny_run import add_query, line, make_run, read

WINDOW = "tracing_mark_write: tierlab {} {}_try1"


def two_query_run(tmp_path):
    """q03 reads two 16 KiB pages in a row on the capacity tier, q05 three of which one comes back."""
    run = make_run(tmp_path, line(1.0, WINDOW.format("start", "q03")) + read(1.1, 0) + read(1.2, 32)
                   + line(1.3, WINDOW.format("end", "q03")))
    add_query(run, "q05", line(2.0, WINDOW.format("start", "q05")) + read(2.1, 640) + read(2.2, 64) + read(2.3, 640)
              + line(2.4, WINDOW.format("end", "q05")))
    return run


def follow(run, labels: str, monkeypatch, capsys) -> tuple[str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(labels))
    main(["analyze", str(run), "--follow"])
    return capsys.readouterr()


def tables_of(run) -> dict[str, pd.DataFrame]:
    return {name: pd.read_csv(run / "tables" / f"{name}.csv")
            for name in ("queries", "query_metrics", "tier_metrics", "table_metrics", "size_histogram",
                         "read_latency", "trace_counts")}


def test_windows_followed_during_the_run_give_the_tables_and_requests_of_an_analysis_from_the_traces(
        tmp_path, monkeypatch, capsys):
    followed, traced = two_query_run(tmp_path / "followed"), two_query_run(tmp_path / "traced")
    out, err = follow(followed, "q03_try1\nq05_try1\n", monkeypatch, capsys)
    assert out.splitlines() == [str(followed / "tables" / "windows" / f"{q}_try1.json") for q in ("q03", "q05")]
    assert err == ""
    main(["analyze", str(followed)])
    assert "[1/2] reading q03_try1 (analysed during the run)" in capsys.readouterr().err
    main(["analyze", str(traced)])
    for name, frame in tables_of(traced).items():
        pd.testing.assert_frame_equal(tables_of(followed)[name], frame, check_exact=True, obj=name)
    assert pq.read_table(followed / "tables" / "requests.parquet").equals(
        pq.read_table(traced / "tables" / "requests.parquet"))
    # q05 read page 40 twice of its three reads: a repeat rate of 1.5
    assert tables_of(followed)["query_metrics"][["query", "read_requests", "repeat_access_rate"]].values.tolist() == [
        ["q03", 2, 1.0], ["q05", 3, 1.5]]


def test_the_analysis_of_the_whole_run_removes_the_windows_it_took(tmp_path, monkeypatch, capsys):
    run = two_query_run(tmp_path)
    follow(run, "q03_try1\n", monkeypatch, capsys)
    main(["analyze", str(run)])
    assert not (run / "tables" / "windows").exists()


def test_a_window_whose_trace_changed_after_it_was_followed_is_read_again_from_its_trace(tmp_path, monkeypatch, capsys):
    run = two_query_run(tmp_path)
    follow(run, "q03_try1\nq05_try1\n", monkeypatch, capsys)
    trace = run / "raw" / "traces" / "q05_try1.ftrace"
    trace.write_text(trace.read_text().replace(line(2.4, WINDOW.format("end", "q05")),
                                               read(2.35, 96) + line(2.4, WINDOW.format("end", "q05"))))
    tables = analyze(load_run(run))
    assert tables["query_metrics"][["query", "read_requests"]].values.tolist() == [["q03", 2], ["q05", 4]]


def test_a_window_followed_with_other_thresholds_is_read_again_with_the_analysis_own(tmp_path, monkeypatch, capsys):
    run = two_query_run(tmp_path)
    monkeypatch.setattr("sys.stdin", io.StringIO("q05_try1\n"))
    main(["analyze", str(run), "--follow", "--repeat-threshold", "2"])
    capsys.readouterr()
    kept = json.loads((run / "tables" / "windows" / "q05_try1.json").read_text())
    assert kept["key"]["parameters"]["repeat_threshold"] == 2.0
    # with the default threshold (1.1), q05's repeat rate of 1.5 makes it repeated
    (q05,) = [row for row in analyze(load_run(run))["query_metrics"].to_dict("records") if row["query"] == "q05"]
    assert q05["category"].endswith("repeated")


def test_a_label_the_run_has_not_traced_is_left_to_the_analysis_of_the_whole_run_and_the_next_followed(
        tmp_path, monkeypatch, capsys):
    run = two_query_run(tmp_path)
    out, err = follow(run, "q04_try1\nq05_try1\n", monkeypatch, capsys)
    assert err == (f"warning: q04_try1 is left to the analysis of the whole run: {run}: raw/queries.jsonl has no "
                   "traced try q04_try1\n")
    assert out.splitlines() == [str(run / "tables" / "windows" / "q05_try1.json")]
