"""tierlab installed as a package (pip install .) into an environment of its own: its command starts on its
required dependencies alone, analyses a trace, and says what needs the checkout it is installed without."""

import subprocess
import sys
from pathlib import Path

import pytest

from tierlab.traces.blktrace import write_blktrace

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    venv = tmp_path_factory.mktemp("installed") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    done = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(ROOT)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return venv / "bin" / "tierlab"


def test_the_installed_command_reads_a_trace(installed, tmp_path):
    trace = write_blktrace(tmp_path / "t.blktrace.0", [("D", 1000, "7:0", 64, 16384, "R", 42),
                                                       ("C", 91000, "7:0", 64, 16384, "R", 0)])
    done = subprocess.run([str(installed), "trace-stats", str(trace)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [line.split() for line in done.stdout.splitlines() if line.split()[0] in ("requests", "read_requests")] == \
        [["requests", "1"], ["read_requests", "1"]]


def test_the_installed_command_says_a_device_model_needs_the_checkout(installed):
    done = subprocess.run([str(installed), "planner-costs"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.startswith("tierlab planner-costs: a device profile by its name (the shipped profiles are "
                                  "emulator/profiles/*.toml) needs tierlab's checkout")
