"""Integration tests run the real playbooks (real servers, real emulated tiers, real traces) at a tiny scale factor,
under a tierlab root of their own, sharing its loaded databases, and tear it all down after."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from hosts import HOSTS, SshHosts
from lab import (
    LAYOUTS,
    PLAYBOOK_CALLS,
    ROLE_SECONDS,
    ROOT,
    SCALE_FACTOR,
    TEST_ROOT,
    TIERLAB,
    Lab,
    Lines,
    cli,
    command,
    count_study,
    cpus_allowed_now,
    placement_now,
    remove_torn_down_root,
)

from tierlab.runs.doctor import DEFAULT_ROOT
from tierlab_host.emulator import ENABLE_URING_KNOB

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


# the fixtures whose tests are left to make test-long: minutes each, for features of their own (real hosts)
LONG_FIXTURES = {"two_hosts", "devices", "real_devices", "rebooted"}


def pytest_collection_modifyitems(config, items):
    """Every test here is an integration test; they need root, and without it the suite fails at once, saying so,
    rather than passing what it did not run."""
    here = [item for item in items if item.path.is_relative_to(HERE)]
    for item in here:
        item.add_marker(pytest.mark.integration)
        if LONG_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.long)
    if here and os.geteuid() != 0:
        raise pytest.UsageError("the integration tests need root (loop devices, mounts, cgroups, tracing, database "
                                "servers): run them as root (make integration), or the unit tests alone (make unit)")


def pytest_terminal_summary(terminalreporter):
    """Each playbook's fixed cost, visible: how many the suite ran, and the seconds of each role over all of them."""
    if not PLAYBOOK_CALLS:
        return
    terminalreporter.section(f"{len(PLAYBOOK_CALLS)} ansible-playbook runs (the tests' own and their studies' "
                             "points); seconds by role over all of them")
    for role, seconds in sorted(ROLE_SECONDS.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"{seconds:8.1f} s  {role}")


@pytest.fixture(scope="session", autouse=True)
def ansible_files(tmp_path_factory):
    """Ansible's files on the hosts (its modules' temporary directories, the query loop's job status) under the
    suite's own temporary directory, for every playbook the suite runs and every tierlab command it starts: by
    default they would be left in the default root's /var/lib/tierlab/ansible-tmp and in ~/.ansible_async."""
    here = tmp_path_factory.mktemp("ansible")
    os.environ.update(ANSIBLE_REMOTE_TMP=str(here / "remote-tmp"), ANSIBLE_ASYNC_DIR=str(here / "async"))


@pytest.fixture(scope="session", autouse=True)
def default_root_untouched():
    """The suite works under roots of its own: where the host has no default root, the suite leaves none."""
    had = Path(DEFAULT_ROOT).exists()
    yield
    assert had or not Path(DEFAULT_ROOT).exists(), f"the suite made the default root {DEFAULT_ROOT}: " + \
        ", ".join(str(path) for path in Path(DEFAULT_ROOT).rglob("*"))


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    lab = Lab(tmp_path_factory.mktemp("results"))
    # torn down even when the tiers fail to come up: a root left behind would be the next suite's
    try:
        # FUSE over io_uring's switch as the host had it: the tiers turn it on, and record it to put back if it was off
        lab.uring_before = ENABLE_URING_KNOB.read_text().strip() if ENABLE_URING_KNOB.exists() else None
        # the tiers first, so every test sees the self-check they were brought up with, whatever ran before it
        lab.playbook("tiers.yml")
        lab.tiers_check = json.loads(Path(lab.root, "state", "tiers-check.json").read_text())
        yield lab
    finally:
        lab.playbook("teardown.yml", purge=True)
        remove_torn_down_root(TEST_ROOT)


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
    count_study(study_dir)
    record = json.loads((study_dir / "study.json").read_text())
    runs = {(p["variables"]["layout"], p["repetition"]): study_dir / p["run_id"] for p in record["points"]}
    # where the last run left the tables, before later tests move them
    last = record["points"][-1]
    placement_after = placement_now(runs[last["variables"]["layout"], last["repetition"]])
    # what the last run started, before a later run stops its server
    cpus_after = cpus_allowed_now(lab.root)
    return {"dir": study_dir, "first_lines": first, "interrupted": interrupted, "interrupted_code": child.returncode,
            "after_interrupt": after_interrupt, "resumed": resumed.stdout, "record": record, "runs": runs,
            "placement_after": placement_after, "cpus_after": cpus_after}


@pytest.fixture(scope="session")
def layout_runs(layouts):
    """The first run of each layout."""
    return {layout: layouts["runs"][(layout, 1)] for layout in LAYOUTS}


@pytest.fixture(scope="session")
def postgresql_runs(lab, layout_runs):
    """Every query on PostgreSQL under C+O (warm and untraced: for answers, plans and placement), then Q3 cold
    and traced under L, which moves what changes tier."""
    return {"C+O": lab.run("C+O", engine="postgresql", queries="all", cold=False, trace=False),
            "L": lab.run("L", engine="postgresql", queries="3")}


# Two hosts on this machine reached over SSH (hosts.py), each with a root, tiers and ports of its own, whose tiers
# are btrfs on plain loop devices (no emulator to build and calibrate on each; the emulated tiers' fidelity is
# tested on the lab's root) with a short self-check. One study spreads a point to each: Q1, Q6 and Q14 on MariaDB
# and on PostgreSQL, C+O, every table compressed by the file system. node-a's connections are cut while its query
# loop runs, and the study resumed.
TWO_HOSTS_VARIABLES = {"tiers_filesystem": "btrfs", "tiers_emulation": "throttle", "tiers_check_runtime_s": 0.5}
TWO_HOSTS_STUDY = f"""
name: spread
workload: tpch
variables:
  scale_factor: {SCALE_FACTOR}
  queries: "1,6,14"
  layout: C+O
  compression: zstd
matrix:
  engine: [mariadb, postgresql]
"""
LOOP_WAIT_S = 900


def query_loop_runs(host: str) -> bool:
    record = Path(f"/var/lib/tierlab-{host}/state/created.json")
    return record.exists() and any(e["kind"] == "query_loop" for e in json.loads(record.read_text() or "[]"))


@pytest.fixture(scope="session")
def two_hosts(tmp_path_factory):
    """The study spread over the two hosts, cut on node-a while its query loop runs, and resumed: what `tierlab
    study` said each time, what study.json held after the cut, the study's directory, its record and its runs by
    engine. Both hosts are torn down after, their roots removed, and what hosts.py made removed."""
    here = tmp_path_factory.mktemp("two_hosts")
    hosts = SshHosts(here)
    try:
        inventory = hosts.open()
        (here / "spread.yml").write_text(TWO_HOSTS_STUDY)
        extra = ["--extra-vars", json.dumps(TWO_HOSTS_VARIABLES)]
        child = subprocess.Popen([TIERLAB, "study", "-i", str(inventory), str(here / "spread.yml"), "--results-dir",
                                  str(here / "results"), *extra], cwd=ROOT, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
        lines = Lines(child)
        deadline = time.monotonic() + LOOP_WAIT_S
        while not query_loop_runs("node-a"):
            assert child.poll() is None, lines.rest(60)
            assert time.monotonic() < deadline, f"node-a ran no query loop within {LOOP_WAIT_S} s"
            time.sleep(0.05)
        sessions = hosts.cut("node-a")
        cut_said = lines.rest(LOOP_WAIT_S)
        hosts.start("node-a")
        (study_dir,) = (here / "results").iterdir()
        after_cut = json.loads((study_dir / "study.json").read_text())
        resumed = cli("study", "--resume", str(study_dir), "-i", str(inventory), *extra, timeout_s=1200)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        record = json.loads((study_dir / "study.json").read_text())
        runs = {point["variables"]["engine"]: study_dir / point["run_id"] for point in record["points"]}
        yield {"cut_said": cut_said, "cut_code": child.returncode, "sessions_cut": sessions, "after_cut": after_cut,
               "said": resumed.stdout, "dir": study_dir, "record": record, "runs": runs, "inventory": inventory}
    finally:
        try:
            if hosts.sshd:
                teardown = command([str(ROOT / ".venv/bin/ansible-playbook"), "-i", str(here / "two-hosts.yml"),
                                    "playbooks/teardown.yml", "-e", "purge=true"], "the two hosts' teardown", 600,
                                   cwd=ROOT, env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")})
                assert teardown.returncode == 0, teardown.stdout[-3000:]
                for host in HOSTS:
                    remove_torn_down_root(f"/var/lib/tierlab-{host}")
        finally:
            hosts.close()
