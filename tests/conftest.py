import sys
import time
from pathlib import Path

# the host-side agent is a plain directory copied to hosts, not an installed package
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tracing"))

# how long each test took, by phase (setup, call, teardown), and when the session started
SECONDS: dict[str, dict[str, float]] = {}
STARTED = time.monotonic()
SLOWEST_SHOWN = 10
SLOWEST_FILES_SHOWN = 20


def pytest_runtest_logreport(report):
    SECONDS.setdefault(report.nodeid, {})[report.when] = report.duration


def pytest_terminal_summary(terminalreporter):
    """The session's wall time, its slowest tests with their fixtures' setup, and its slowest test files (where a
    module's shared fixture lands on its first test), so that a slow creep shows in every run of the suite."""
    total = {node: sum(phases.values()) for node, phases in SECONDS.items()}
    terminalreporter.section(f"wall time {time.monotonic() - STARTED:.0f} s; the {SLOWEST_SHOWN} slowest tests")
    for node in sorted(total, key=total.get, reverse=True)[:SLOWEST_SHOWN]:
        phases = SECONDS[node]
        terminalreporter.write_line(f"{total[node]:8.1f} s (setup {phases.get('setup', 0):6.1f} s)  {node}")
    by_file: dict[str, float] = {}
    for node, seconds in total.items():
        path = node.partition("::")[0]
        by_file[path] = by_file.get(path, 0.0) + seconds
    terminalreporter.section(f"the {SLOWEST_FILES_SHOWN} slowest test files")
    for path in sorted(by_file, key=by_file.get, reverse=True)[:SLOWEST_FILES_SHOWN]:
        terminalreporter.write_line(f"{by_file[path]:8.1f} s  {path}")
