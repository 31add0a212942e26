"""A command run to its end, timed, with its own peak resident memory.

Linux carries a process's peak resident size (ru_maxrss) over fork and exec, so a command started
straight from a benchmark that has just synthesized gigabytes would report the benchmark's peak, not
its own. It is started from a small launcher process instead, which forks and execs it and writes
the child's ru_maxrss to a file.
"""

import subprocess
import sys
import tempfile
import time
from pathlib import Path

LAUNCHER = """import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(f"{usage.ru_maxrss} {status}")
"""


def run_measured(cmd: list[str], capture: bool = False) -> tuple[float, int, int, bytes]:
    """Seconds, peak resident bytes and wait status of cmd, and its stdout if capture."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as report:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-S", "-c", LAUNCHER, report.name, *cmd],
                              stdout=subprocess.PIPE if capture else subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
        peak_kb, status = map(int, Path(report.name).read_text().split())
    return seconds, peak_kb * 1024, status, done.stdout or b""
