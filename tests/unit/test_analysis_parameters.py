"""The parameters an analysis used are kept with its tables and stated in its report."""

from tierlab.report.run import write_run_report
from tierlab.runs.analyze import analyze
from tierlab.runs.results import load_run, write_tables
from tiny_run import line, make_run, read

BODY = (line(1.0, "tracing_mark_write: tierlab start q03_try1") + read(1.1, 0) + read(1.2, 32)
        + line(1.3, "tracing_mark_write: tierlab end q03_try1"))


def test_the_parameters_are_written_to_tables(tmp_path):
    run = make_run(tmp_path, BODY)
    write_tables(run, analyze(load_run(run), stream_window=3, random_threshold=40.0, repeat_threshold=1.5))
    assert (run / "tables" / "parameters.csv").read_text() == (
        "page_size_bytes,stream_window,random_threshold_pct,repeat_threshold\n16384,3,40,1.5\n")


def test_the_report_states_the_parameters_it_was_computed_with(tmp_path):
    run = make_run(tmp_path, BODY)
    tables = analyze(load_run(run), stream_window=3, random_threshold=40.0, repeat_threshold=1.5)
    write_run_report(tmp_path / "report", {"run": run.name, "engine": {"name": "mariadb"}}, tables)
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert ("Pages of 16 KiB. Sequential: a read that starts where one of the last 3 reads on its device ended, or "
            "spans more than one page") in summary
    assert "engine_sequential_pct is read-ahead pages / pages read." in summary
    assert "Categories: random when random_pct > 40, repeated when repeat_access_rate > 1.5:" in summary
