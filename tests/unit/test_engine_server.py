"""Starting a database server: what is refused before it is started; stopping one that does not stop."""

import signal
import socket
import subprocess
import sys

import pytest

from tierlab.catalog.engines import POSTGRESQL
from tierlab_host import record
from tierlab_host.engines import server
from tierlab_host.system import HostError, cmdline

# a postmaster that ignores PostgreSQL's fast shutdown and ends on the immediate one, noting that it got it
DEAF_SERVER = ("import signal, sys, time\n"
               "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
               "def immediate(number, frame):\n"
               "    open(sys.argv[2], 'w').close()\n"
               "    sys.exit(0)\n"
               "signal.signal(signal.SIGQUIT, immediate)\n"
               "print('ready', flush=True)\n"
               "time.sleep(60)\n")


def test_a_port_another_process_listens_on_is_refused_with_the_variables_that_choose_it():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(HostError) as err:
            server.require_free_port("mariadb-16k", port)
    assert str(err.value) == (f"mariadb-16k: port {port} on 127.0.0.1 is taken by another process (Address already in "
                              "use); give this tierlab root ports of its own (mysql_port_base, postgresql_port)")


def test_a_port_a_closed_connection_left_in_time_wait_is_free():
    """A server stopped a moment ago leaves its port in TIME_WAIT, where a server started again can listen (both set
    SO_REUSEADDR, as MariaDB and PostgreSQL do) though a plain bind is refused."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = listener.accept()
            # the side that closes first holds TIME_WAIT
            accepted.close()
            client.recv(1)
    with socket.socket() as plain, pytest.raises(OSError, match="Address already in use"):
        plain.bind(("127.0.0.1", port))
    assert server.require_free_port("postgresql-8k", port) is None


def test_a_server_deaf_to_its_fast_shutdown_gets_the_immediate_one_and_its_children_left_in_its_group_are_killed(
        tmp_path, monkeypatch):
    monkeypatch.setattr(record, "STATE_DIR", tmp_path)
    monkeypatch.setattr(record, "RECORD_PATH", tmp_path / "created.json")
    monkeypatch.setattr(server, "STOP_TIMEOUT_S", 0.3)
    monkeypatch.setattr(server, "ESCALATE_TIMEOUT_S", 0.3)
    marker = f"--config-file={tmp_path}/postgresql.conf"
    quit_file = tmp_path / "got SIGQUIT"
    postmaster = subprocess.Popen([sys.executable, "-c", DEAF_SERVER, marker, str(quit_file)], stdout=subprocess.PIPE,
                                  text=True)
    assert postmaster.stdout.readline() == "ready\n"
    backend = subprocess.Popen(["sleep", "60"])
    procs = tmp_path / "cgroup.procs"
    procs.write_text(f"{backend.pid}\n")
    entry = {"kind": "process", "instance": "postgresql-8k", "engine": "postgresql", "pid": postmaster.pid,
             "marker": marker, "groups": [str(procs)], "stop_signals": list(POSTGRESQL.stop_signals)}
    record.add(**entry)
    assert server.stop_recorded(entry) is True
    assert quit_file.exists()
    assert (cmdline(postmaster.pid), cmdline(backend.pid)) == ([], [])
    assert record.entries() == []


def test_a_recorded_server_whose_pid_runs_another_program_now_is_not_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(record, "STATE_DIR", tmp_path)
    monkeypatch.setattr(record, "RECORD_PATH", tmp_path / "created.json")
    other = subprocess.Popen(["sleep", "60"])
    entry = {"kind": "process", "instance": "mariadb-16k", "engine": "mariadb", "pid": other.pid,
             "marker": "--defaults-file=/x/my.cnf", "groups": [], "stop_signals": ["SIGTERM"]}
    record.add(**entry)
    try:
        assert server.stop_recorded(entry) is False
        assert other.poll() is None
        assert record.entries() == []
    finally:
        other.send_signal(signal.SIGKILL)
        other.wait(timeout=60)


def test_a_run_stops_every_other_server_of_the_root_and_leaves_its_own_and_processes_it_did_not_start(
        tmp_path, monkeypatch):
    monkeypatch.setattr(record, "STATE_DIR", tmp_path)
    monkeypatch.setattr(record, "RECORD_PATH", tmp_path / "created.json")
    servers = {}
    for instance in ("mariadb-16k", "mysql-4k", "postgresql-8k"):
        marker = f"--defaults-file={tmp_path}/{instance}.cnf"
        servers[instance] = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker])
        record.add(kind="process", instance=instance, engine=instance.split("-")[0], pid=servers[instance].pid,
                   marker=marker, groups=[], stop_signals=["SIGTERM"])
    # a server recorded whose pid is now another program's: let go, not stopped, and not named
    stranger = subprocess.Popen(["sleep", "60"])
    record.add(kind="process", instance="mysql-8k", engine="mysql", pid=stranger.pid,
               marker=f"--defaults-file={tmp_path}/mysql-8k.cnf", groups=[], stop_signals=["SIGTERM"])
    try:
        assert server.stop_others("mysql-4k") == ["mariadb-16k", "postgresql-8k"]
        assert [cmdline(servers[i].pid) for i in ("mariadb-16k", "postgresql-8k")] == [[], []]
        assert (servers["mysql-4k"].poll(), stranger.poll()) == (None, None)
        assert [entry["instance"] for entry in record.entries()] == ["mysql-4k"]
    finally:
        for process in [*servers.values(), stranger]:
            process.kill()
            process.wait(timeout=60)
