"""Integration tests run the real playbooks (real servers, real emulated tiers, real traces) at a tiny scale factor,
under a tierlab root of their own, sharing its loaded databases, and tear it all down after."""

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from lab import LAYOUTS, PLAYBOOK_CALLS, ROLE_SECONDS, ROOT, SCALE_FACTOR, TEST_ROOT, Lab, Lines, assert_torn_down, placement_now

HERE = Path(__file__).resolve().parent
# TPC-H Q1 and Q3 under three layouts, each twice: Q3 reads orders through orders_custkey and lineitem through its
# primary key, at random, so each table moved to the fast tier takes a large share of its time off
LAYOUTS_STUDY = f"""
name: layouts
workload: tpch
variables:
  engine: mariadb
  scale_factor: {SCALE_FACTOR}
  queries: "1,3"
  trace_backend: ftrace
matrix:
  layout: [{", ".join(LAYOUTS)}]
repetitions: 2
"""


def pytest_collection_modifyitems(config, items):
    """Every test here is an integration test; they need root, and without it the suite fails at once, saying so,
    rather than passing what it did not run."""
    here = [item for item in items if item.path.is_relative_to(HERE)]
    for item in here:
        item.add_marker(pytest.mark.integration)
    if here and os.geteuid() != 0:
        raise pytest.UsageError("the integration tests need root (loop devices, mounts, cgroups, tracing, database "
                                "servers): run them as root (make integration), or the unit tests alone (make unit)")


def pytest_terminal_summary(terminalreporter):
    """Each playbook's fixed cost, visible: how many the suite ran, and the seconds of each role over all of them."""
    if not PLAYBOOK_CALLS:
        return
    terminalreporter.section(f"{len(PLAYBOOK_CALLS)} playbook runs; seconds by role over all of them")
    for role, seconds in sorted(ROLE_SECONDS.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"{seconds:8.1f} s  {role}")


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    lab = Lab(tmp_path_factory.mktemp("results"))
    # the tiers first, so every test sees the self-check they were brought up with, whatever ran before it
    lab.playbook("tiers.yml")
    lab.tiers_check = json.loads(Path(lab.root, "state", "tiers-check.json").read_text())
    yield lab
    lab.playbook("teardown.yml", purge=True)
    assert_torn_down(TEST_ROOT)


@pytest.fixture(scope="session")
def layouts(lab, tmp_path_factory):
    """The layouts study, interrupted (Ctrl-C) while its first point runs and resumed: what the interrupted and
    the resumed `tierlab study` said, its directory, its record, and its runs by (layout, repetition)."""
    spec = tmp_path_factory.mktemp("layouts") / "layouts.yml"
    spec.write_text(LAYOUTS_STUDY)
    child = subprocess.Popen(lab.study_command(str(spec), "--results-dir", str(lab.results_dir)), cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = Lines(child)
    try:
        first = [lines.next(60), lines.next(60)]
        child.send_signal(signal.SIGINT)
        interrupted = lines.rest(900)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=60)
    study_dir = Path(first[0].removeprefix("study ").strip())
    after_interrupt = json.loads((study_dir / "study.json").read_text())
    resumed = subprocess.run(lab.study_command("--resume", str(study_dir)), cwd=ROOT, capture_output=True, text=True,
                             timeout=1800)
    assert resumed.returncode == 0, resumed.stdout[-6000:] + resumed.stderr[-3000:]
    record = json.loads((study_dir / "study.json").read_text())
    runs = {(p["variables"]["layout"], p["repetition"]): study_dir / p["run_id"] for p in record["points"]}
    # where the last run left the tables, before later tests move them
    last = record["points"][-1]
    placement_after = placement_now(runs[last["variables"]["layout"], last["repetition"]])
    return {"dir": study_dir, "first_lines": first, "interrupted": interrupted, "interrupted_code": child.returncode,
            "after_interrupt": after_interrupt, "resumed": resumed.stdout, "record": record, "runs": runs,
            "placement_after": placement_after}


@pytest.fixture(scope="session")
def layout_runs(layouts):
    """The first run of each layout."""
    return {layout: layouts["runs"][(layout, 1)] for layout in LAYOUTS}
