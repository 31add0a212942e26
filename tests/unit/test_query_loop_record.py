"""A query loop left running by a stopped playbook: teardown stops it by its record, and only it."""

import signal
import subprocess
import sys

from tierlab_host import record, runner
from tierlab_host.system import cmdline


def use_record(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(record, "STATE_DIR", tmp_path)
    monkeypatch.setattr(record, "RECORD_PATH", tmp_path / "created.json")


def test_a_recorded_query_loop_is_stopped_and_its_record_removed(tmp_path, monkeypatch):
    use_record(tmp_path, monkeypatch)
    spec = str(tmp_path / "run_spec.json")
    loop = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)", spec],
                            stdout=subprocess.PIPE, text=True)
    assert loop.stdout.readline() == "ready\n"
    entry = {"kind": "query_loop", "pid": loop.pid, "marker": spec}
    record.add(**entry)
    runner.stop_recorded(entry)
    assert cmdline(loop.pid) == []
    assert record.entries() == []


def test_a_recorded_query_loop_whose_pid_runs_another_program_now_is_left_alone(tmp_path, monkeypatch):
    use_record(tmp_path, monkeypatch)
    other = subprocess.Popen(["sleep", "60"])
    entry = {"kind": "query_loop", "pid": other.pid, "marker": str(tmp_path / "run_spec.json")}
    record.add(**entry)
    try:
        runner.stop_recorded(entry)
        assert other.poll() is None
        assert record.entries() == []
    finally:
        other.send_signal(signal.SIGKILL)
        other.wait()
