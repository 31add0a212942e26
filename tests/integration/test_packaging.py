"""tierlab installed as a package (pip install .) into an environment of its own: its command starts on its
required dependencies alone, analyses a trace, and says what needs the checkout it is installed without."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from lab import read_csv

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    venv = tmp_path_factory.mktemp("installed") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    done = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(ROOT)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return venv / "bin" / "tierlab"


def test_the_installed_command_reads_a_trace_a_run_recorded_as_the_run_s_analysis_did(installed, layout_runs):
    run_dir = layout_runs["C+O"]
    done = subprocess.run([str(installed), "trace-stats", str(run_dir / "raw" / "traces" / "q03_try1.ftrace-raw"),
                           "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    metrics = read_csv(run_dir / "tables" / "query_metrics.csv").set_index("query").loc["q03"]
    counts = read_csv(run_dir / "tables" / "trace_counts.csv").set_index("query").loc["q03"]
    # the window's requests, and those the trace caught outside its marks
    assert stats["requests"] == metrics["requests"] + counts["outside_window"]
    assert stats["read_requests"] >= metrics["read_requests"]


def test_the_installed_command_says_a_device_model_needs_the_checkout(installed):
    done = subprocess.run([str(installed), "planner-costs"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.startswith("tierlab planner-costs: a device profile by its name (the shipped profiles are "
                                  "emulator/profiles/*.toml) needs tierlab's checkout")
