"""A client the query loop watches to its end: what its failure is said to be."""

import pytest

from tierlab_host.clients import watched


@pytest.mark.parametrize(("script", "status", "error"), [
    ("echo rows; exit 0", "ok", ""),
    ("echo 'ERROR 1146: no such table' >&2; exit 1", "error", "ERROR 1146: no such table"),
    ("echo 'a report on its standard output'; exit 3", "error", "exited with 3"),
    ("kill -KILL $$", "error", "killed by signal 9")])
def test_a_client_s_failure_is_what_it_said_else_how_it_ended(tmp_path, script, status, error):
    result = watched(["sh", "-c", script], None, None, tmp_path / "output", 60)
    assert (result["status"], result["error"]) == (status, error)
