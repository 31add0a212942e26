"""What the query loop will run, and that only one loop runs per run (the host agent's runner)."""

import json

import pytest

from tierlab_host.runner import _lock, plan
from tierlab_host.system import HostError


def test_the_plan_lists_the_tries_without_a_row_in_order_and_starts_a_fresh_progress_log(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "queries.jsonl").write_text(json.dumps({"query": "q01", "try": 1, "status": "ok"}) + "\n")
    (raw / "run.log").write_text("q01_try1 ok 1.000\nfailed: the emulator of tier nand has exited\n")
    spec = {"run_dir": str(tmp_path), "queries": ["q01", "q03"], "tries": 2}
    assert plan(spec) == {"changed": False, "pending": ["q01_try2", "q03_try1", "q03_try2"]}
    assert (raw / "run.log").read_text() == ""


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
