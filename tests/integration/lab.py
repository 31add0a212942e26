"""What the integration tests run with: the playbooks and tierlab's commands under a tierlab root of the tests' own,
each call bounded in time (a hang fails the test, naming what hung), and the playbooks' time by role added up over
the suite."""

import json
import os
import queue
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pandas as pd

from tierlab.traces.ftrace_raw import parse_ftrace_raw

ROOT = Path(__file__).resolve().parents[2]
TEST_ROOT = "/var/lib/tierlab-test"
SCALE_FACTOR = 0.01
QUERIES = "1,3"
# the layouts study's (conftest.py)
LAYOUTS = ("None", "C+O", "ALL")
TPCH_DATABASE = f"tpch_sf{str(SCALE_FACTOR).replace('.', '_')}"
TIERLAB = str(ROOT / ".venv" / "bin" / "tierlab")
# profile_tasks beside ansible.cfg's profile_roles: each task's seconds in the playbooks' logs
ANSIBLE_ENV = {"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
               "ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_roles,ansible.posix.profile_tasks"}
# a playbook that brings tiers up on a fresh root, or installs an engine, takes minutes; none takes this long
PLAYBOOK_TIMEOUT_S = 900
# every table and index of the public schema, and where its main file is
RELATION_FILES = ("SELECT c.relname, pg_relation_filepath(c.oid) FROM pg_class c "
                  "WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'i')")
# seconds per role over every playbook the suite ran, and how many playbooks it ran
ROLE_SECONDS: dict[str, float] = {}
PLAYBOOK_CALLS: list[str] = []
# the file that fills a tier up (fill_up)
FILLER = "tierlab-filler"
_ROLE_LINE = re.compile(r"^(\S+) -+ ([\d.]+)s$", re.M)


def command(cmd: list[str], what: str, timeout_s: float, **kwargs) -> subprocess.CompletedProcess:
    """cmd run to its end, its output captured; a command that outlasts timeout_s is killed and fails the test."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, **kwargs)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"{what} hung: no end after {timeout_s:.0f} s ({' '.join(map(str, cmd))}):\n"
                             f"{(exc.stdout or b'')[-3000:]}") from None


class Lines:
    """A child's output, a line at a time as it writes them, each waited for at most a while."""

    def __init__(self, child: subprocess.Popen):
        self.child = child
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=lambda: [self.lines.put(line) for line in child.stdout], daemon=True)
        self.reader.start()

    def next(self, timeout_s: float) -> str:
        try:
            return self.lines.get(timeout=timeout_s)
        except queue.Empty:
            raise AssertionError(f"{self.child.args[0]} wrote no line within {timeout_s:.0f} s") from None

    def rest(self, timeout_s: float) -> str:
        """Everything it writes until it ends, which it must within timeout_s."""
        try:
            self.child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.child.args[0]} did not end within {timeout_s:.0f} s; it wrote last:\n"
                                 f"{''.join(self.lines.queue)[-3000:]}") from None
        self.reader.join(timeout=60)
        return "".join(self.lines.queue)


def cli(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess:
    """The tierlab command, as users run it from the checkout."""
    return command([TIERLAB, *args], f"tierlab {args[0]}", timeout_s, cwd=ROOT)


def count_playbook(name: str, output: str) -> None:
    """One ansible-playbook run of the suite, by whatever started it: counted, its roles' seconds added up."""
    PLAYBOOK_CALLS.append(name)
    recap = output.rpartition("ROLES RECAP")[2].partition("TASKS RECAP")[0]
    for role, seconds in _ROLE_LINE.findall(recap):
        if role != "total":
            ROLE_SECONDS[role] = ROLE_SECONDS.get(role, 0.0) + float(seconds)


def count_study(study_dir: Path) -> None:
    """The ansible-playbook runs of a study's points, counted: each attempt, as its point's log keeps them (each
    begins with its command line)."""
    for log in sorted((study_dir / "logs").glob("point-*.log")):
        for attempt in re.split(r"^\$ ", log.read_text(), flags=re.M)[1:]:
            count_playbook(f"{study_dir.name} {log.stem}", attempt)


class Lab:
    """The playbooks run under a tierlab root of the tests' own, with ports of its own (another root, with its
    own ports and settings, can be had beside it)."""

    def __init__(self, results_dir: Path, root: str = TEST_ROOT, **settings):
        self.results_dir = results_dir
        self.root = root
        self.settings = {"mysql_port_base": {"mariadb": 3500, "mysql": 3600}, "postgresql_port": 5516, **settings}

    def playbook_command(self, name: str, *args: str, **extra) -> list[str]:
        """ansible-playbook on the playbook called name, with this root's variables and extra (run it with ANSIBLE_ENV)."""
        variables = {"tierlab_root": self.root, "results_dir": str(self.results_dir), **self.settings,
                     "scale_factor": SCALE_FACTOR, "queries": QUERIES, **extra}
        return [str(ROOT / ".venv/bin/ansible-playbook"), f"playbooks/{name}", "-e", json.dumps(variables), *args]

    def playbook(self, name: str, *args: str, check: bool = True, timeout_s: float = PLAYBOOK_TIMEOUT_S,
                 **extra) -> subprocess.CompletedProcess:
        cmd = self.playbook_command(name, *args, **extra)
        done = command(cmd, f"playbooks/{name}", timeout_s, cwd=ROOT, env={**os.environ, **ANSIBLE_ENV})
        count_playbook(name, done.stdout)
        # each playbook's output, as a study keeps its points' (logs/), for what failed or took long
        log = self.results_dir.parent / "playbooks" / f"{len(PLAYBOOK_CALLS):03d}-{name.removesuffix('.yml')}.log"
        log.parent.mkdir(exist_ok=True)
        log.write_text(done.stdout + done.stderr)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed:\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}")
        return done

    def run_ids(self) -> set[str]:
        return {p.name for p in self.results_dir.iterdir()} if self.results_dir.exists() else set()

    def run(self, layout: str, playbook: str = "tpch.yml", **extra) -> Path:
        before = self.run_ids()
        self.playbook(playbook, layout=layout, **extra)
        (new,) = self.run_ids() - before
        return self.results_dir / new

    def study_command(self, *args: str) -> list[str]:
        """`tierlab study` with args, on this root and its ports."""
        return [TIERLAB, "study", *args, "--extra-vars", json.dumps({"tierlab_root": self.root, **self.settings})]

    def study(self, spec: Path, timeout_s: float = PLAYBOOK_TIMEOUT_S) -> Path:
        """A study file run by `tierlab study` on this root: its study directory."""
        before = self.run_ids()
        done = command(self.study_command(str(spec), "--results-dir", str(self.results_dir)), f"tierlab study {spec}",
                       timeout_s, cwd=ROOT)
        if done.returncode != 0:
            raise AssertionError(f"tierlab study {spec} failed:\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}")
        (new,) = self.run_ids() - before
        count_study(self.results_dir / new)
        return self.results_dir / new

    def serving(self, instance: str) -> dict:
        """The engine spec of an instance of this root, its server started by the agent unless it runs: each run
        stops the root's other servers."""
        spec_file = Path(self.root, "instances", instance, "engine.json")
        started = self.agent("engine-start", str(spec_file))
        assert started.returncode == 0, started.stderr
        return json.loads(spec_file.read_text())

    def execute(self, instance: str, sql: str, limit_s: int, output: Path, database: str = TPCH_DATABASE) -> dict:
        """One statement through the query loop's execute, on an instance of this root, by the agent installed on
        the root (its own process, as the query loop runs it)."""
        program = ("import json, sys; from tierlab_host.engines import engine; from tierlab_host.clients import execute; "
                   "spec, database, sql, limit_s, output = json.load(sys.stdin); "
                   "print(json.dumps(execute(engine(spec), database, sql, limit_s, output)))")
        spec = self.serving(instance)
        # the root's own record, as the playbooks give the agent (by default it would write the default root's)
        done = command(["/usr/bin/python3", "-c", program], f"the agent's execute on {instance}", limit_s + 120,
                       cwd=Path(self.root, "agent"), input=json.dumps([spec, database, sql, limit_s, str(output)]),
                       env={**os.environ, "TIERLAB_STATE_DIR": str(Path(self.root, "state"))})
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def agent(self, *args: str, timeout_s: float = 600) -> subprocess.CompletedProcess:
        """A command of the host agent installed on the root, with the root's own record, as the playbooks run it."""
        return command(["/usr/bin/python3", "-m", "tierlab_host", *args], f"tierlab_host {args[0]}", timeout_s,
                       cwd=Path(self.root, "agent"), env={**os.environ, "TIERLAB_STATE_DIR": str(Path(self.root, "state"))})

    def psql(self, database: str, *args: str) -> subprocess.CompletedProcess:
        """The root's PostgreSQL instance's own psql on database, connected as the host agent connects (its socket,
        its passfile); unaligned, tab-separated, tuples only."""
        spec = self.serving("postgresql-8k")
        conninfo = (f"host={spec['socket_dir']} port={spec['port']} user=postgres dbname={database} "
                    f"passfile={spec['password_file']}")
        return command([f"{spec['bindir']}/psql", "-X", "-v", "ON_ERROR_STOP=1", "-A", "-t", "-F", "\t",
                        "-d", conninfo, *args], "psql", 300)

    def relation_tiers(self, database: str, manifest: dict) -> dict[str, str]:
        """Each table and index of database's public schema, and the role of the tier (of the run whose manifest is
        given) that holds its main file."""
        rows = [row.split("\t") for row in self.psql(database, "-c", RELATION_FILES).stdout.splitlines()]
        datadir = manifest["engine"]["settings"]["data_directory"]
        tier_paths = {t["role"]: t["path"] + "/" for t in manifest["tiers"]}
        return {name: role for name, path in rows for role, tier in tier_paths.items()
                if os.path.realpath(os.path.join(datadir, path)).startswith(tier)}


def one_table_workload(directory: Path, rows: int, queries: dict[str, str]) -> Path:
    """A workload directory named for its directory: one table t (id, v = 7 id) of rows rows, and the queries given
    (name: SQL)."""
    (directory / "queries").mkdir(parents=True)
    (directory / "data").mkdir()
    (directory / "workload.yml").write_text(f"name: {directory.name}\ntables: [t]\ndata: {{files: data}}\n"
                                            f"queries: [{', '.join(queries)}]\n")
    (directory / "schema.sql").write_text("CREATE TABLE t (id INT NOT NULL PRIMARY KEY, v INT NOT NULL);\n")
    (directory / "data" / "t.csv").write_text("id,v\n" + "".join(f"{i},{i * 7}\n" for i in range(1, rows + 1)))
    for query, sql in queries.items():
        (directory / "queries" / f"{query}.sql").write_text(sql)
    return directory


def fast_tier(root: str) -> Path:
    """The fast tier's mount point under root, from the root's tiers.json."""
    (spec,) = [t for t in json.loads(Path(root, "tiers.json").read_text()) if t["role"] == "fast"]
    return Path(spec["path"])


def fill_up(tier: Path, room_left_bytes: int) -> subprocess.CompletedProcess:
    """fallocate's FILLER on tier, leaving room_left_bytes free on its file system (for users other than root)."""
    stat = os.statvfs(tier)
    return command(["fallocate", "-l", str(stat.f_bavail * stat.f_frsize - room_left_bytes), str(tier / FILLER)],
                   "fallocate", 60)


def read_csv(path: Path) -> pd.DataFrame:
    """A CSV tierlab wrote, with only empty fields missing: "None" is a layout, not a missing value."""
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


def placement_now(run_dir: Path) -> dict:
    """Where each table's file is right now: path, st_dev, and the st_dev of the tier it should be on."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    tier_paths = {t["role"]: t["path"] for t in manifest["tiers"]}
    return {
        table: {"tier": info["tier"], "path": info["path"], "file_dev": os.stat(info["path"]).st_dev,
                "tier_dev": os.stat(tier_paths[info["tier"]]).st_dev}
        for table, info in manifest["layout"]["tables"].items()
    }


def cpus_allowed_now(root: str) -> dict[tuple[str, str], str]:
    """The CPUs each emulator and database server recorded under root may run on right now, by (kind, tier or
    instance)."""
    created = json.loads(Path(root, "state", "created.json").read_text())
    return {(e["kind"], e.get("tier") or e["instance"]):
            re.search(r"^Cpus_allowed_list:\t(.*)$", Path(f"/proc/{e['pid']}/status").read_text(), re.M).group(1)
            for e in created if e["kind"] in ("emulator", "process")}


def remove_torn_down_root(root: str) -> None:
    """Nothing tierlab made under root is left: its record is empty, and no loop device, mount, server or memory
    group of it remains. Then the root itself (the agent and its empty record) is removed."""
    record = Path(root) / "state" / "created.json"
    assert json.loads(record.read_text()) == [], "teardown left recorded objects behind"
    assert root not in command(["losetup", "-a"], "losetup", 60).stdout
    assert root not in Path("/proc/mounts").read_text()
    for program in ("tierlab-emu", "mariadbd", "postgres"):
        assert command(["pgrep", "-f", f"{program} .*{root}/"], "pgrep", 60).returncode == 1, \
            f"teardown left {program} running"
    memory = Path("/sys/fs/cgroup/memory")
    assert memory.is_dir(), "no cgroup v1 memory controller to look for the root's memory groups in"
    assert not list(memory.glob(f"{Path(root).name}-*")), "teardown left a memory group"
    shutil.rmtree(root)


def corun_marks(run_dir: Path, label: str) -> tuple[tuple[float, float], list[tuple[float, str]]]:
    """A traced query's window (its start and end marks) and its co-runner's marks, on the trace's clock."""
    markers = parse_ftrace_raw(run_dir / "raw" / "traces" / f"{label}.ftrace-raw").markers
    window = (next(ts for ts, text in markers if text == f"tierlab start {label}"),
              next(ts for ts, text in markers if text == f"tierlab end {label}"))
    return window, [(ts, text) for ts, text in markers if text.startswith("tierlab corun ")]
