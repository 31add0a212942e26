"""Integration tests run the real playbook (real MariaDB, real emulated tiers, real traces)
at a tiny scale factor, under a tierlab root of their own, and tear it all down after."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEST_ROOT = "/var/lib/tierlab-test"
SCALE_FACTOR = 0.01
QUERIES = "1,3"


def pytest_collection_modifyitems(config, items):
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="integration tests need root (loop devices, mounts, tracing)")
        for item in items:
            if "integration" in str(item.path):
                item.add_marker(skip)


class Lab:
    """The playbooks run under a tierlab root of the tests' own, with ports of its own (another root, with its
    own ports and settings, can be had beside it)."""

    def __init__(self, results_dir: Path, root: str = TEST_ROOT, **settings):
        self.results_dir = results_dir
        self.root = root
        self.settings = {"mysql_port_base": {"mariadb": 3500, "mysql": 3600}, "postgresql_port": 5516, **settings}

    def playbook(self, name: str, *args: str, check: bool = True, **extra) -> subprocess.CompletedProcess:
        variables = {"tierlab_root": self.root, "results_dir": str(self.results_dir), **self.settings,
                     "scale_factor": SCALE_FACTOR, "queries": QUERIES, **extra}
        cmd = [str(ROOT / ".venv/bin/ansible-playbook"), f"playbooks/{name}", "-e", json.dumps(variables), *args]
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                              env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"})
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed:\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}")
        return done

    def run_ids(self) -> set[str]:
        return {p.name for p in self.results_dir.iterdir()} if self.results_dir.exists() else set()

    def execute(self, instance: str, sql: str, limit_s: int, output: Path) -> dict:
        """One statement through the query loop's execute, on an instance of this root, by the agent installed here."""
        sys.path.insert(0, str(Path(self.root, "agent")))
        from tierlab_host.engines import engine
        from tierlab_host.runner import execute

        db = engine(json.loads(Path(self.root, "instances", instance, "engine.json").read_text()))
        return execute(db, f"tpch_sf{str(SCALE_FACTOR).replace('.', '_')}", sql, limit_s, output)

    def study_command(self, *args: str) -> list[str]:
        """`tierlab study` with args, on this root and its ports."""
        return [str(ROOT / ".venv/bin/tierlab"), "study", *args, "--extra-vars",
                json.dumps({"tierlab_root": self.root, **self.settings})]

    def study(self, spec: Path) -> Path:
        """A study file run by `tierlab study` on this root: its study directory."""
        before = self.run_ids()
        done = subprocess.run(self.study_command(str(spec), "--results-dir", str(self.results_dir)), cwd=ROOT,
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise AssertionError(f"tierlab study {spec} failed:\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}")
        (new,) = self.run_ids() - before
        return self.results_dir / new

    def run(self, layout: str, playbook: str = "tpch.yml", **extra) -> Path:
        before = self.run_ids()
        self.playbook(playbook, layout=layout, **extra)
        (new,) = self.run_ids() - before
        return self.results_dir / new


def placement_now(run_dir: Path) -> dict:
    """Where each table's file is right now: path, st_dev, and the st_dev of the tier it should be on."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    tier_paths = {t["role"]: t["path"] for t in manifest["tiers"]}
    return {
        table: {"tier": info["tier"], "path": info["path"], "file_dev": os.stat(info["path"]).st_dev,
                "tier_dev": os.stat(tier_paths[info["tier"]]).st_dev}
        for table, info in manifest["layout"]["tables"].items()
    }


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    lab = Lab(tmp_path_factory.mktemp("results"))
    yield lab
    lab.playbook("teardown.yml", purge=True)
    assert_torn_down(TEST_ROOT)


def assert_torn_down(root: str) -> None:
    """Nothing tierlab made under root is left: its record is empty, and no loop device, mount, server or memory
    group of it remains."""
    record = Path(root) / "state" / "created.json"
    assert json.loads(record.read_text()) == [], "teardown left recorded objects behind"
    assert root not in subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    assert root not in Path("/proc/mounts").read_text()
    for program in ("tierlab-emu", "mariadbd", "postgres"):
        assert subprocess.run(["pgrep", "-f", f"{program} .*{root}/"], capture_output=True).returncode == 1, \
            f"teardown left {program} running"
    assert not list(Path("/sys/fs/cgroup/memory").glob(f"{Path(root).name}-*")), "teardown left a memory group"


@pytest.fixture(scope="session")
def layout_runs(lab):
    """One run per layout, in order; the placement of the files is taken right after each."""
    runs = {}
    for layout in ("None", "ALL", "C+O"):
        run_dir = lab.run(layout)
        runs[layout] = {"dir": run_dir, "placement": placement_now(run_dir)}
    return runs
