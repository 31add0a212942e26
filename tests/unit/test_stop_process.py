"""Stopping a process of tierlab's: its signals in turn, SIGKILL last, and never a process that is no longer ours."""

import signal
import subprocess
import sys

from tierlab_host.system import cmdline, stop_process, wait_while_working

# a process that writes the name of the signal it ends on, after it says it is ready; `ignore` names signals it
# ignores instead
CHILD = """
import signal, sys, time
out, ignored = sys.argv[1], sys.argv[2:]
def end(number, frame):
    open(out, "w").write(signal.Signals(number).name)
    sys.exit(0)
for name in ("SIGTERM", "SIGINT"):
    signal.signal(getattr(signal, name), signal.SIG_IGN if name in ignored else end)
print("ready", flush=True)
time.sleep(60)
"""


def start(tmp_path, *ignored: str) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / "ended_on"), *ignored],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "ready\n"
    return child


def test_a_process_ends_on_its_first_signal(tmp_path):
    child = start(tmp_path)
    assert stop_process(child.pid, [(signal.SIGTERM, 10), (signal.SIGINT, 10)], lambda: True) is True
    assert cmdline(child.pid) == []
    assert (tmp_path / "ended_on").read_text() == "SIGTERM"


def test_a_process_that_ignores_a_signal_gets_the_next_one(tmp_path):
    child = start(tmp_path, "SIGTERM")
    assert stop_process(child.pid, [(signal.SIGTERM, 0.3), (signal.SIGINT, 10)], lambda: True) is True
    assert (tmp_path / "ended_on").read_text() == "SIGINT"


def test_a_stopped_process_handles_its_signal_once_continued(tmp_path):
    child = start(tmp_path)
    child.send_signal(signal.SIGSTOP)
    assert stop_process(child.pid, [(signal.SIGTERM, 0), (signal.SIGCONT, 10)], lambda: True) is True
    assert (tmp_path / "ended_on").read_text() == "SIGTERM"


def test_a_process_that_ignores_every_signal_is_killed(tmp_path):
    child = start(tmp_path, "SIGTERM", "SIGINT")
    assert stop_process(child.pid, [(signal.SIGTERM, 0.3), (signal.SIGINT, 0.3)], lambda: True) is True
    assert cmdline(child.pid) == []
    assert not (tmp_path / "ended_on").exists()


def test_a_process_that_is_not_ours_is_let_be(tmp_path):
    child = start(tmp_path)
    try:
        assert stop_process(child.pid, [(signal.SIGTERM, 1)], lambda: False) is False
        assert child.poll() is None
    finally:
        child.kill()
        child.wait(timeout=60)


# a process that, on SIGTERM, works for a while (its clean-up), then ends
CLEANS_UP = """
import signal, sys, time
def end(number, frame):
    until = time.monotonic() + float(sys.argv[1])
    while time.monotonic() < until:
        sum(range(10000))
    sys.exit(0)
signal.signal(signal.SIGTERM, end)
print("ready", flush=True)
time.sleep(60)
"""


def test_a_process_is_waited_for_as_long_as_its_clean_up_works(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", CLEANS_UP, "2"], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "ready\n"
    child.send_signal(signal.SIGTERM)
    took, ended = wait_while_working(child.pid, 0.5, 60, lambda: True)
    assert ended and took >= 2
    assert child.wait(timeout=10) == 0


def test_a_process_that_does_nothing_is_given_up_on_after_the_stall(tmp_path):
    child = start(tmp_path, "SIGTERM")
    child.send_signal(signal.SIGTERM)
    took, ended = wait_while_working(child.pid, 0.5, 60, lambda: True)
    assert not ended and 0.5 <= took < 5
    child.kill()
    child.wait(timeout=10)


def test_a_clean_up_that_works_past_the_limit_is_given_up_on_at_the_limit(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", CLEANS_UP, "30"], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "ready\n"
    child.send_signal(signal.SIGTERM)
    took, ended = wait_while_working(child.pid, 0.5, 1.0, lambda: True)
    assert not ended and 1.0 <= took < 5
    child.kill()
    child.wait(timeout=10)
