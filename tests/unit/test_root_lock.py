"""One command at a time on a tierlab root: the lock's holder found among a playbook's ancestors on the controller,
and the host's lock file taken, refused, taken over from a dead holder and released."""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tierlab.runs.lock_holder import holder, shown
from tierlab_host import record, root_lock
from tierlab_host.system import HostError


@pytest.fixture
def state(monkeypatch, tmp_path):
    monkeypatch.setattr(record, "STATE_DIR", tmp_path / "state")
    return tmp_path / "state"


def script(directory: Path, name: str, body: str) -> Path:
    path = directory / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def descendant(parent: subprocess.Popen) -> int:
    """The pid of the sleep at the bottom of parent's tree, once it runs."""
    for _ in range(100):
        found = subprocess.run(["pgrep", "-f", "sleep 30"], capture_output=True, text=True, timeout=60).stdout.split()
        mine = [int(pid) for pid in found if parent.pid in _ancestors(int(pid))]
        if mine:
            return mine[0]
        time.sleep(0.05)
    raise AssertionError("the sleep never started")


def _ancestors(pid: int) -> list[int]:
    chain = []
    while pid > 1:
        pid = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
        chain.append(pid)
    return chain


def test_the_holder_is_the_outermost_playbook_among_the_ancestors(tmp_path):
    playbook = script(tmp_path, "ansible-playbook", "sleep 30")
    started = subprocess.Popen([str(playbook), "tpch.yml"])
    try:
        found = holder(descendant(started))
        # /proc/PID/stat's 22nd field, the process's start time in clock ticks after boot
        start_ticks = int(Path(f"/proc/{started.pid}/stat").read_text().rpartition(")")[2].split()[19])
    finally:
        started.kill()
        started.wait(timeout=60)
    assert (found["pid"], found["kind"]) == (started.pid, "playbook")
    assert found["command"] == f"/bin/sh {playbook} tpch.yml"
    assert found["start_ticks"] == start_ticks


def test_a_study_holds_the_lock_for_the_playbooks_it_runs(tmp_path):
    playbook = script(tmp_path, "ansible-playbook", "sleep 30")
    study = script(tmp_path, "tierlab", f"{playbook} tpch.yml")
    started = subprocess.Popen([str(study), "study", "first-layouts.yml"])
    try:
        found = holder(descendant(started))
    finally:
        subprocess.run(["pkill", "-P", str(started.pid)], timeout=60)
        started.kill()
        started.wait(timeout=60)
    assert (found["pid"], found["kind"], found["command"]) == (started.pid, "study",
                                                                f"/bin/sh {study} study first-layouts.yml")


def test_a_process_with_no_playbook_among_its_ancestors_has_no_holder():
    with pytest.raises(RuntimeError, match="no ansible-playbook or tierlab study among this process's ancestors"):
        holder(os.getpid())


def me(run_id: str = "") -> dict:
    """This test's own process as a holder: one that runs."""
    ticks = int(Path("/proc/self/stat").read_text().rpartition(")")[2].split()[19])
    return {"machine_id": root_lock.machine_id(), "pid": os.getpid(), "start_ticks": ticks, "kind": "playbook",
            "command": "ansible-playbook playbooks/tpch.yml", "run_id": run_id}


def dead() -> dict:
    """A holder that has ended: a process that ran and was waited for."""
    done = subprocess.Popen(["true"])
    done.wait(timeout=60)
    return {**me("20261127T000000Z_mariadb_tpch-sf0.01_C+O"), "pid": done.pid, "command": "ansible-playbook tiers.yml"}


def test_a_free_root_is_taken_and_taking_it_again_changes_nothing(state):
    assert root_lock.take(me()) == {"changed": True, "note": ""}
    assert {k: v for k, v in json.loads((state / "root-lock.json").read_text()).items() if k != "taken_at"} == me()
    assert root_lock.take(me()) == {"changed": False, "note": ""}


def test_a_root_held_by_a_command_that_runs_is_refused_with_who_holds_it(state):
    root_lock.take(me("20261127T000000Z_mariadb_tpch-sf0.01_C+O"))
    taken_at = json.loads((state / "root-lock.json").read_text())["taken_at"]
    with pytest.raises(HostError) as refused:
        root_lock.take({**me(), "pid": 1, "start_ticks": 0, "command": "ansible-playbook tiers.yml"})
    assert str(refused.value) == (
        f"this tierlab root is locked by `ansible-playbook playbooks/tpch.yml` (pid {os.getpid()}, run "
        f"20261127T000000Z_mariadb_tpch-sf0.01_C+O, since {taken_at}), which still runs: wait for it to end, or stop "
        f"it (Ctrl-C, or kill {os.getpid()}); one command at a time changes a root, and another tierlab_root lets two "
        "run side by side")


def test_a_lock_whose_holder_no_longer_runs_is_taken_over_with_a_note(state):
    gone = dead()
    root_lock.take(gone)
    taken_at = json.loads((state / "root-lock.json").read_text())["taken_at"]
    assert root_lock.take(me()) == {"changed": True, "note": (
        f"took over the root's lock from `ansible-playbook tiers.yml` (pid {gone['pid']}, run "
        f"20261127T000000Z_mariadb_tpch-sf0.01_C+O, since {taken_at}), which no longer runs")}


def remote(pid: int, running: list[list[int]], machine: str = "controller-1") -> dict:
    """A holder on a controller that is not this host, with the playbooks and studies that run there."""
    return {"machine_id": machine, "pid": pid, "start_ticks": 7, "kind": "playbook", "command": "ansible-playbook x.yml",
            "run_id": "", "running": running}


def test_a_host_is_told_by_the_same_controller_whether_its_holder_still_runs(state):
    root_lock.take(remote(4242, []))
    assert "running" not in json.loads((state / "root-lock.json").read_text())
    with pytest.raises(HostError, match="which still runs: wait for it to end"):
        root_lock.take(remote(5353, [[4242, 7], [5353, 7]]))
    assert root_lock.take(remote(5353, [[5353, 7]]))["note"].startswith(
        "took over the root's lock from `ansible-playbook x.yml` (pid 4242, since ")


def test_a_lock_held_from_another_controller_is_refused_with_how_to_remove_it(state):
    root_lock.take({**dead(), "machine_id": "elsewhere"})
    with pytest.raises(HostError, match=f"from another controller \\(elsewhere\\), which cannot be checked from here: "
                                        f"wait for it to end; if it has ended without releasing the lock, remove "
                                        f"{state / 'root-lock.json'}$"):
        root_lock.take(me())


def test_only_the_holder_releases_the_lock(state):
    root_lock.take(me())
    assert root_lock.release(dead()) == {"changed": False}
    assert (state / "root-lock.json").exists()
    assert root_lock.release(me()) == {"changed": True}
    assert not (state / "root-lock.json").exists()


def test_an_extra_vars_value_that_may_hold_a_password_is_not_shown_in_the_lock():
    argv = ["ansible-playbook", "observe.yml", "-e", "conninfo='host=db password=hunter2'", "-e", "layout=C+O",
            "--extra-vars=token=abc", "-eapi_secret=x", "-e", "conninfo=postgresql://app:hunter2@db/app"]
    assert shown(argv) == (
        "ansible-playbook observe.yml -e (a value not shown: it may hold a password) -e layout=C+O "
        "--extra-vars=(a value not shown: it may hold a password) -e(a value not shown: it may hold a password) "
        "-e (a value not shown: it may hold a password)")
