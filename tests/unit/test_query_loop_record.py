"""A query loop left running by a stopped playbook: another run on its root is refused, and teardown stops it by
its record, and only it."""

import signal
import subprocess
import sys

import pytest

from tierlab_host import record, runner
from tierlab_host.system import HostError, cmdline


def use_record(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(record, "STATE_DIR", tmp_path)
    monkeypatch.setattr(record, "RECORD_PATH", tmp_path / "created.json")


def start_loop(spec: str) -> subprocess.Popen:
    """A process whose command line names the run's spec file, as a query loop's does, once it is running."""
    loop = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)", spec],
                            stdout=subprocess.PIPE, text=True)
    assert loop.stdout.readline() == "ready\n"
    return loop


def test_a_recorded_query_loop_is_stopped_and_its_record_removed(tmp_path, monkeypatch):
    use_record(tmp_path, monkeypatch)
    spec = str(tmp_path / "run_spec.json")
    loop = start_loop(spec)
    entry = {"kind": "query_loop", "pid": loop.pid, "marker": spec, "run_id": "r1"}
    record.add(**entry)
    runner.stop_recorded(entry)
    assert cmdline(loop.pid) == []
    assert record.entries() == []


def test_a_recorded_query_loop_whose_pid_runs_another_program_now_is_left_alone(tmp_path, monkeypatch):
    use_record(tmp_path, monkeypatch)
    other = subprocess.Popen(["sleep", "60"])
    entry = {"kind": "query_loop", "pid": other.pid, "marker": str(tmp_path / "run_spec.json"), "run_id": "r1"}
    record.add(**entry)
    try:
        runner.stop_recorded(entry)
        assert other.poll() is None
        assert record.entries() == []
    finally:
        other.send_signal(signal.SIGKILL)
        other.wait(timeout=60)


def test_a_root_whose_query_loop_runs_is_refused_with_its_run_named(tmp_path, monkeypatch):
    use_record(tmp_path, monkeypatch)
    spec = str(tmp_path / "run_spec.json")
    loop = start_loop(spec)
    try:
        record.add("query_loop", pid=loop.pid, marker=spec, run_id="20261126T221455Z_postgresql_ssb-sf1_None")
        with pytest.raises(HostError) as err:
            runner.require_root_free()
        assert str(err.value) == (
            f"the query loop of run 20261126T221455Z_postgresql_ssb-sf1_None (pid {loop.pid}) still runs on this "
            "tierlab root; another run here would restart its servers and empty its caches under it: wait for it to "
            "end (it logs to its raw/run.log), or stop it with playbooks/teardown.yml")
    finally:
        loop.kill()
        loop.wait(timeout=60)


def test_the_record_of_a_query_loop_that_is_gone_is_let_go(tmp_path, monkeypatch):
    use_record(tmp_path, monkeypatch)
    gone = subprocess.Popen(["true"])
    gone.wait(timeout=60)
    entry = {"kind": "query_loop", "pid": gone.pid, "marker": str(tmp_path / "run_spec.json"), "run_id": "r1"}
    record.add(**entry)
    assert runner.require_root_free() == {"changed": True, "let_go": [entry], "stopped": []}
    assert record.entries() == []


def test_the_loop_of_the_run_being_resumed_is_stopped_and_its_record_removed(tmp_path, monkeypatch):
    use_record(tmp_path, monkeypatch)
    spec = str(tmp_path / "run_spec.json")
    loop = start_loop(spec)
    try:
        entry = {"kind": "query_loop", "pid": loop.pid, "marker": spec, "run_id": "r1"}
        record.add(**entry)
        found = runner.require_root_free(resuming="r1")
        (stopped,) = found["stopped"]
        # it ended on its SIGTERM, waited for, not killed
        assert (found["changed"], found["let_go"], stopped.pop("waited_s") < 10, stopped) == (
            True, [], True, {**entry, "killed": False})
        assert cmdline(loop.pid) == []
        assert record.entries() == []
    finally:
        if loop.poll() is None:
            loop.kill()
            loop.wait(timeout=60)
