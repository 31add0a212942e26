"""What the query loop will run, and that only one loop runs per run (the host agent's runner)."""

import json

import pytest

from tierlab_host.runner import _cut_torn_row, _lock, plan
from tierlab_host.system import HostError


def test_the_plan_lists_the_tries_without_a_row_in_order_and_starts_a_fresh_progress_log(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "queries.jsonl").write_text(json.dumps({"query": "q01", "try": 1, "status": "ok"}) + "\n")
    (raw / "run.log").write_text("q01_try1 ok 1.000\nfailed: the emulator of tier nand has exited\n")
    spec = {"run_dir": str(tmp_path), "queries": ["q01", "q03"], "tries": 2}
    assert plan(spec) == {"changed": False, "pending": ["q01_try2", "q03_try1", "q03_try2"]}
    assert (raw / "run.log").read_text() == ""


TORN = '{"query": "q03", "try": 1, "status": "o'


def test_a_last_row_torn_in_its_write_leaves_its_try_to_run(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "queries.jsonl").write_text(json.dumps({"query": "q01", "try": 1, "status": "ok"}) + "\n" + TORN)
    assert plan({"run_dir": str(tmp_path), "queries": ["q01", "q03"], "tries": 1})["pending"] == ["q03_try1"]


def test_the_loop_cuts_a_torn_row_off_keeps_it_aside_and_says_so(tmp_path):
    whole = json.dumps({"query": "q01", "try": 1, "status": "ok"}) + "\n"
    (tmp_path / "queries.jsonl").write_text(whole + TORN)
    _cut_torn_row(tmp_path)
    assert (tmp_path / "queries.jsonl").read_text() == whole
    assert (tmp_path / "torn_rows.txt").read_text().endswith(f" cut from the end of queries.jsonl: {TORN}\n")
    assert (tmp_path / "run.log").read_text() == (
        f"cut a row torn in its write from the end of queries.jsonl ({len(TORN)} bytes, kept in torn_rows.txt): its "
        "try runs again\n")


def test_a_whole_last_row_without_its_newline_is_kept_and_given_its_newline(tmp_path):
    whole = json.dumps({"query": "q01", "try": 1, "status": "ok"})
    (tmp_path / "queries.jsonl").write_text(whole)
    _cut_torn_row(tmp_path)
    assert (tmp_path / "queries.jsonl").read_text() == whole + "\n"
    assert not (tmp_path / "torn_rows.txt").exists()


def rows_written(tmp_path, rows: list[tuple[str, int, str]]) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "queries.jsonl").write_text("".join(json.dumps({"query": query, "try": attempt, "status": status}) + "\n"
                                               for query, attempt, status in rows))


def test_a_resume_that_retries_failed_tries_adds_a_new_try_per_error_numbered_on_from_the_query_s_last(tmp_path):
    rows_written(tmp_path, [("q01", 1, "ok"), ("q09", 1, "error"), ("q09", 2, "ok"), ("q15", 1, "timeout"),
                            ("q17", 1, "error"), ("q17", 2, "error")])
    spec = {"run_dir": str(tmp_path), "queries": ["q01", "q09", "q15", "q17", "q18"], "tries": 2, "retry_failed": True}
    # q15's timeout is a measurement, not retried; q18's two tries have no row yet
    assert plan(spec)["pending"] == ["q01_try2", "q15_try2", "q18_try1", "q18_try2", "q09_try3", "q17_try3",
                                     "q17_try4"]


def test_a_retried_try_that_ended_ok_is_not_retried_again(tmp_path):
    rows_written(tmp_path, [("q09", 1, "error"), ("q09", 2, "ok")])
    assert plan({"run_dir": str(tmp_path), "queries": ["q09"], "tries": 1, "retry_failed": True})["pending"] == []


def test_without_retry_failed_a_failed_try_keeps_its_row_and_is_not_run_again(tmp_path):
    rows_written(tmp_path, [("q09", 1, "error")])
    assert plan({"run_dir": str(tmp_path), "queries": ["q09"], "tries": 1})["pending"] == []


def test_a_second_query_loop_on_the_same_run_is_refused(tmp_path):
    first = _lock(tmp_path)
    try:
        with pytest.raises(HostError) as err:
            _lock(tmp_path)
        assert str(err.value) == (f"another query loop of this run is running (it holds {tmp_path / 'run.lock'}); "
                                  "wait for it to end, then resume")
    finally:
        first.close()
    _lock(tmp_path).close()
