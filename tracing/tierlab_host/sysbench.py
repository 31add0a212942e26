"""sysbench's OLTP tests (sysbench 1.0): its tables made by its own prepare, and a test run for a timed
window with its reports as JSON lines.

The reports come from sysbench_report.lua, beside this module: it loads the test's own script and
replaces sysbench's human-readable reports by one JSON object a line, one per report interval and one
for the whole window, in counts and seconds. The engine gives the options that reach its server
(`sysbench_options`).
"""

import json
import os
import subprocess
import time
from pathlib import Path

from .system import HostError

REPORT_SCRIPT = Path(__file__).with_name("sysbench_report.lua")
# sysbench's own test scripts
TESTS_DIR = Path("/usr/share/sysbench")
# the latency percentile sysbench reports per interval and for the window
PERCENTILE = 95


def prepare(db, spec: dict) -> dict:
    """Create and fill the tables with sysbench's prepare, in the target the spec gives (one for all: a
    layout places sysbench's tables together), with its table options; the seconds it took."""
    options, env = db.sysbench_options(spec["database"], spec["target"], spec["table_options"])
    cmd = ["sysbench", str(TESTS_DIR / "oltp_common.lua"), *options, f"--tables={spec['tables']}",
           f"--table-size={spec['table_size']}", f"--threads={min(spec['threads'], spec['tables'])}", "prepare"]
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
    if done.returncode != 0:
        raise HostError(f"sysbench prepare of {spec['tables']} tables failed (exit {done.returncode}): "
                        f"{done.stderr.strip() or done.stdout.strip()[-2000:]}")
    return {"changed": True, "seconds": round(time.monotonic() - started, 3)}


def command(db, database: str, test: str, driver: dict, seconds: int) -> tuple[list[str], dict]:
    """The command line (and environment) that runs `test` for `seconds` with its reports as JSON lines."""
    options, env = db.sysbench_options(database)
    cmd = ["sysbench", str(REPORT_SCRIPT), *options, f"--tables={driver['tables']}",
           f"--table-size={driver['table_size']}", f"--threads={driver['threads']}", f"--time={seconds}",
           "--events=0", f"--report-interval={driver['report_interval_s']}", f"--percentile={PERCENTILE}", "run"]
    return cmd, {**os.environ, **env, "TIERLAB_SYSBENCH_TEST": test,
                 "LUA_PATH": f"{TESTS_DIR}/?.lua;;"}


def reports(path: Path) -> list[dict]:
    """The JSON reports a window wrote (sysbench's other output, such as its banner, left out)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]
