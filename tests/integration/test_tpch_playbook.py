"""TPC-H on MariaDB through the playbook: the layouts study's runs, the refusals before anything is touched, a
resumed run, a stopped query loop, the report, and the fast tier as a cache."""

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from lab import LAYOUTS, PLAYBOOK_TIMEOUT_S, ROOT, SCALE_FACTOR, cli, command, count_study, read_csv

import tierlab as analysis

pytestmark = pytest.mark.mariadb

TABLES = {"customer", "orders", "lineitem", "partsupp", "part", "supplier", "nation", "region"}
FAST = {"None": set(), "ALL": TABLES, "C+O": {"customer", "orders"}}


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())


@pytest.mark.parametrize("layout", LAYOUTS)
def test_each_table_s_files_were_on_the_tier_its_layout_says_when_its_queries_ran(layout_runs, layout):
    """By the extent map taken before the run's first query: the device each file's extents were on."""
    run = manifest(layout_runs[layout])
    tier_of_device = {t["device"]: t["name"] for t in run["tiers"]}
    for table, where in run["layout"]["tables"].items():
        expected = "optane" if table in FAST[layout] else "nand"
        assert (where["tier"], where["tier_name"], tier_of_device[where["device"]]) == (
            "fast" if table in FAST[layout] else "capacity", expected, expected), table
        assert {f["tier"] for f in where["files"]} == {expected}, table
        assert f"/tiers/{expected}/mariadb-16k/tables/" in where["path"]


def test_the_last_layout_s_files_are_on_its_tiers_now(layouts):
    """The study ran ALL last: every table's file sits on the fast tier's device right now."""
    last = layouts["record"]["points"][-1]
    assert (last["variables"]["layout"], last["repetition"]) == ("ALL", 2)
    for table, where in layouts["placement_after"].items():
        assert (where["tier"], where["file_dev"]) == ("fast", where["tier_dev"]), table


def test_the_emulators_and_the_database_server_a_run_started_may_run_on_every_cpu(layouts):
    """Ansible's Mitogen pins what it starts to CPUs of its choosing unless told not to (on two CPUs, all to CPU 1):
    what ran when the layouts study's last run ended."""
    online = Path("/sys/devices/system/cpu/online").read_text().strip()
    allowed = layouts["cpus_after"]
    assert {("emulator", "optane"), ("emulator", "nand"), ("process", "mariadb-16k")} <= set(allowed)
    assert allowed == {what: online for what in allowed}


def test_q3_under_c_o_reads_customer_and_orders_on_the_fast_device_and_lineitem_on_the_capacity_device(layout_runs):
    requests = analysis.load_run(layout_runs["C+O"]).requests()
    reads = requests[(requests["query"] == "q03") & (requests["op"] == "R")]
    fast, capacity = reads[reads["tier"] == "optane"], reads[reads["tier"] == "nand"]
    # InnoDB's secondary indexes are objects of their own, in their table's file and on its tier
    # beside them the fast tier's file system reads its own blocks (inodes and extent trees of the files opened)
    assert set(fast["object"]) <= {"customer", "customer_nationkey", "orders", "orders_custkey", "other"}
    assert {"customer", "orders", "orders_custkey"} <= set(fast["object"])
    assert "lineitem" in set(capacity["object"])
    assert not {"customer", "customer_nationkey", "orders", "orders_custkey"} & set(capacity["object"])
    # what no table owns (file system blocks, the system tablespace, the redo log) is a sliver of the reads: at
    # this scale factor Q3 makes about 150 reads, and a cold open of each file reads its inode once
    assert (reads["object"] == "other").mean() <= 0.1


def test_q3_under_c_o_has_the_device_model_s_counts_beside_the_trace_s(layout_runs):
    tiers = read_csv(layout_runs["C+O"] / "tables" / "tier_metrics.csv").set_index(["query", "tier"])
    nand, optane = tiers.loc[("q03", "nand")], tiers.loc[("q03", "optane")]
    # the emulator counts from just before the trace starts to just after it stops
    for tier in (nand, optane):
        modelled = tier["model_read_random_requests"] + tier["model_read_sequential_requests"]
        assert tier["read_requests"] <= modelled <= 1.05 * tier["read_requests"]
    assert nand["model_read_random_requests"] > nand["model_read_sequential_requests"]
    assert optane["model_read_sequential_requests"] == 0  # optane has no read-ahead buffer to hit


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_requested_query_has_a_row_with_its_answer_s_rows(layout_runs, layout):
    lines = (layout_runs[layout] / "tables" / "queries.csv").read_text().splitlines()
    assert lines[0].startswith("query,try,status,error,elapsed_s,io_time_s,io_time_undilated_s,rows")
    rows = [line.split(",") for line in lines[1:]]
    # Q1 groups by return flag and line status (4 groups); Q3 keeps its 10 most valuable orders
    assert [(r[0], r[1], r[2], r[7]) for r in rows] == [("q01", "1", "ok", "4"), ("q03", "1", "ok", "10")]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_manifest_is_complete_and_its_checksums_match(layout_runs, layout, lab):
    run_dir = layout_runs[layout]
    run = manifest(run_dir)
    assert (run["status"], run["error"], run["run_id"]) == ("ok", "", run_dir.name)
    assert re.fullmatch(r"\d{8}T\d{6}Z_mariadb_tpch-sf0\.01_" + re.escape(layout), run_dir.name)
    assert run["engine"]["settings"]["innodb_page_size"] == "16384"
    assert run["engine"]["version"].startswith("10.11")
    # the study asks for ftrace: the files the tests read are ftrace windows
    assert run["versions"]["tracer_backend"] == "ftrace"
    assert {t["name"]: (t["emulation"], t["profile"]["name"]) for t in run["tiers"]} == {
        "optane": ("model", "optane"), "nand": ("model", "nand")}
    # the self-check the tiers role took when it brought them up
    assert run["tiers_check"] == lab.tiers_check
    dilation = {t["calibration"]["dilation"] for t in run["tiers"]}
    assert run["tiers_fidelity"]["dilation"] == run["tiers_check"]["dilation"] == dilation.pop()
    assert not dilation
    assert run["tiers_fidelity"]["verdict"] == run["tiers_check"]["fidelity"]["verdict"]
    assert set(run["layout"]["tables"]) == TABLES
    assert set(run["attempts"][-1]["phase_s"]) == {"tiers", "engine", "data", "load", "run", "collect"}
    listed = {a["path"]: a["sha256"] for a in run["artifacts"]}
    on_disk = {str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file() and p.name != "manifest.json"}
    assert set(listed) == on_disk
    for path, digest in listed.items():
        assert hashlib.sha256((run_dir / path).read_bytes()).hexdigest() == digest, path
    assert "password" not in json.dumps(run).lower()


def refused_before_anything(lab, **extra) -> str:
    """A playbook run with these variables, refused before it touches anything: its output."""
    before = lab.run_ids()
    record = Path(lab.root, "state", "created.json").read_text()
    done = lab.playbook("tpch.yml", check=False, **extra)
    assert done.returncode != 0
    assert lab.run_ids() == before
    assert Path(lab.root, "state", "created.json").read_text() == record
    return done.stdout


# the validation's refusals, each with its message, are unit tests (test_run_settings.py, test_layout.py); these
# show the playbook makes them before it touches anything
def test_a_bad_layout_fails_before_anything_is_touched(lab, layouts):
    said = refused_before_anything(lab, layout="C+X")
    assert "layout 'C+X': unknown table code(s) 'X'; allowed: None, ALL, or codes C O L PS P S N R joined by '+'" in said


def test_a_buffer_pool_larger_than_the_host_s_memory_is_refused_by_the_host_check_before_anything_is_touched(lab, layouts):
    said = refused_before_anything(lab, layout="None", buffer_pool="1T")
    assert ("lacks what this run needs (tierlab doctor shows every check): [1] memory, needed for "
            "innodb_buffer_pool_size 1024.00 GiB (buffer_pool=1024.00 GiB): MemTotal ") in said


def test_resume_with_other_variables_is_refused(lab, layout_runs):
    run_dir = layout_runs["C+O"]
    # the layouts study's variables but the layout
    said = refused_before_anything(lab, layout="None", trace_backend="ftrace", resume=run_dir.name,
                                   results_dir=str(run_dir.parent))
    assert ("that run was started with other variables (layout was 'C+O', now 'None'); give the same -e values "
            "again") in said


@pytest.fixture(scope="module")
def resumed(lab, layouts, tmp_path_factory):
    """What an interrupted run leaves, resumed: the host's run directory with q01's row only, and a partial
    manifest; a copy of the study's second C+O run, so the study keeps its own. The resumed run's output, its
    directory, its host directory, and q01's trace before the resume."""
    results_dir = tmp_path_factory.mktemp("resumed")
    run_dir = results_dir / layouts["runs"][("C+O", 2)].name
    shutil.copytree(layouts["runs"][("C+O", 2)], run_dir)
    host_dir = Path(lab.root, "runs", run_dir.name)
    shutil.copytree(run_dir / "config", host_dir / "config")
    shutil.copytree(run_dir / "raw", host_dir / "raw")
    first, _ = (host_dir / "raw" / "queries.jsonl").read_text().splitlines()
    (host_dir / "raw" / "queries.jsonl").write_text(first + "\n")
    for path in host_dir.glob("raw/*/q03_try1.*"):
        path.unlink()
    q01_trace = (run_dir / "raw" / "traces" / "q01_try1.ftrace-raw").read_bytes()
    done = lab.playbook("tpch.yml", layout="C+O", queries="1,3", trace_backend="ftrace", resume=run_dir.name,
                        results_dir=str(results_dir))
    return {"output": done.stdout, "run_dir": run_dir, "host_dir": host_dir, "q01_trace": q01_trace}


def test_a_resumed_run_runs_only_the_queries_without_a_row(resumed):
    assert re.search(r"q03_try1 \(1 of 1\): ok in \d+\.\d+ s; about 0 s left", resumed["output"]), \
        resumed["output"][-3000:]
    assert "q01_try1 (" not in resumed["output"]
    run = manifest(resumed["run_dir"])
    assert (run["status"], len(run["attempts"])) == ("ok", 2)
    rows = [json.loads(line) for line in (resumed["run_dir"] / "raw" / "queries.jsonl").read_text().splitlines()]
    assert [(r["query"], r["status"]) for r in rows] == [("q01", "ok"), ("q03", "ok")]
    assert (resumed["run_dir"] / "raw" / "traces" / "q01_try1.ftrace-raw").read_bytes() == resumed["q01_trace"]
    assert not resumed["host_dir"].exists()


def test_provisioning_the_layout_a_run_just_ran_on_changes_nothing(lab, resumed):
    """The resumed run brought the host to C+O (whatever ran before it: other tests move tables, set other buffer
    pools); the provisioning phases again with the same variables find everything as they want it."""
    done = lab.playbook("tpch.yml", "--tags", "tiers,engine,data,load", layout="C+O")
    recap = re.search(r"localhost\s+: ok=\d+\s+changed=(\d+)", done.stdout)
    assert recap and recap.group(1) == "0", done.stdout[-3000:]


def wait_for(what: str, ready, agent: subprocess.Popen, limit_s: float = 120) -> None:
    deadline = time.monotonic() + limit_s
    while not ready():
        assert agent.poll() is None, agent.communicate(timeout=60)
        assert time.monotonic() < deadline, f"{what}: not after {limit_s} s"
        time.sleep(0.1)


def test_a_run_on_a_root_whose_query_loop_runs_is_refused_and_the_loop_stopped_by_sigterm_keeps_its_rows(
        lab, layout_runs, tmp_path):
    """The host agent's query loop on the C+O run's spec, warm, with two queries of its own: SELECT 1, then a 600 s
    sleep. While the sleep runs, a playbook on the root is refused, naming the loop's run; then the loop gets
    SIGTERM."""
    spec = json.loads((layout_runs["C+O"] / "config" / "run_spec.json").read_text())
    queries_dir = tmp_path / "queries"
    queries_dir.mkdir()
    (queries_dir / "q01.sql").write_text("SELECT 1;\n")
    (queries_dir / "q02.sql").write_text("SELECT SLEEP(600);\n")
    run_dir = tmp_path / "20261127T000000Z_mariadb_tpch-sf0.01_C+O"
    spec.update(run_dir=str(run_dir), queries_dir=str(queries_dir), queries=["q01", "q02"], cold=False)
    spec_file = tmp_path / "run_spec.json"
    spec_file.write_text(json.dumps(spec))
    record = Path(lab.root, "state", "created.json")
    agent = subprocess.Popen(["/usr/bin/python3", "-m", "tierlab_host", "run", str(spec_file)],
                             cwd=Path(lab.root, "agent"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "TIERLAB_STATE_DIR": str(Path(lab.root, "state"))})
    try:
        client = f"mysql --defaults-file={spec['engine']['client_file']}"
        rows = run_dir / "raw" / "queries.jsonl"

        def sleeping() -> bool:
            """q01 has its row, and q02's client runs in its traced window."""
            tracing = [e for e in json.loads(record.read_text()) if e["kind"] == "tracing_instance"]
            return (rows.exists() and len(rows.read_text().splitlines()) == 1 and len(tracing) == 1
                    and command(["pgrep", "-f", client], "pgrep", 60).returncode == 0)

        wait_for("the sleep's client in its traced window", sleeping, agent)
        (instance,) = [Path(e["path"]) for e in json.loads(record.read_text()) if e["kind"] == "tracing_instance"]
        (loop,) = [e for e in json.loads(record.read_text()) if e["kind"] == "query_loop"]
        assert (loop["pid"], loop["run_id"]) == (agent.pid, run_dir.name)
        said = refused_before_anything(lab, layout="C+O")
        assert (f"the query loop of run {run_dir.name} (pid {agent.pid}) still runs on this tierlab root") in said
        agent.send_signal(signal.SIGTERM)
        # long before the sleep would have ended
        stdout, stderr = agent.communicate(timeout=20)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.communicate(timeout=60)
    assert agent.returncode == 1, stdout + stderr
    said = "stopped by SIGTERM; the try under way, if any, has no row: resume the run to run it and the rest"
    assert said in stderr
    assert (run_dir / "raw" / "run.log").read_text().splitlines()[-1] == f"failed: {said}"
    rows = [json.loads(line) for line in (run_dir / "raw" / "queries.jsonl").read_text().splitlines()]
    assert [(row["query"], row["status"]) for row in rows] == [("q01", "ok")]
    assert not instance.exists()
    assert [e for e in json.loads(record.read_text()) if e["kind"] in ("tracing_instance", "query_loop")] == []
    assert command(["pgrep", "-f", client], "pgrep", 60).returncode == 1


def test_a_playbook_on_a_root_a_study_holds_is_refused_and_the_study_s_lock_taken_over_once_it_has_ended(
        cache_study):
    """tpch.yml while the cache study held the root's lock; tiers.yml once it had ended (a study keeps its lock to
    its end)."""
    held, pid = cache_study["held"], cache_study["pid"]
    assert cache_study["refused"].returncode != 0
    # Ansible prints the refusal as JSON, the study's own command line (its --extra-vars) escaped
    refusal = cache_study["refused"].stdout.replace('\\"', '"')
    # the holder is the study, named with the run its point was making when it took the lock
    assert (f"this tierlab root is locked by `{held['command']}` (pid {pid}, run {held['run_id']}, since "
            f"{held['taken_at']}), which still runs: wait for it to end") in refusal
    # the refused playbook made nothing: the study's directory is all that is new
    assert cache_study["new"] == {cache_study["dir"].name}
    assert (cache_study["dir"] / held["run_id"]).is_dir()
    assert held["kind"] == "study" and cache_study["left"] == held
    assert (f"took over the root's lock from `{held['command']}` (pid {pid}, run {held['run_id']}, since "
            f"{held['taken_at']}), which no longer runs") in cache_study["after"].replace('\\"', '"')
    assert not cache_study["lock_after"]


def test_a_failing_or_timed_out_query_gets_a_row_with_its_error(lab, layouts, tmp_path):
    timed_out = lab.execute("mariadb-16k", "SELECT SLEEP(5);", 1, tmp_path / "sleep.tsv")
    assert timed_out["status"] == "timeout"
    assert "max_statement_time" in timed_out["error"]
    failed = lab.execute("mariadb-16k", "SELECT no_such_column FROM lineitem;", 1, tmp_path / "bad.tsv")
    assert failed["status"] == "error"
    assert "Unknown column 'no_such_column'" in failed["error"]


def test_the_run_report_renders_in_chromium_with_its_plots(layout_runs, tmp_path):
    report = layout_runs["C+O"] / "report" / "report.html"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = command(["chromium", *flags, "--dump-dom", report.as_uri()], "chromium", 120).stdout
    assert "<h1>tierlab run " + layout_runs["C+O"].name in dom
    assert dom.count("<svg") == 4
    for title in ("I/O time summed over the steps (s)", "Sequential vs random reads per query", "Repeat access rate per query",
                  "Read latency CDF per tier"):
        assert title in dom
    assert dom.index("<h2>Where the I/O time goes</h2>") < dom.index("<h2>Caveats</h2>") < dom.index("<h2>Run</h2>")
    assert "<h2>Objects</h2>" in dom
    assert "<summary>q03 try 1: " in dom
    assert "How the plan reads each table:" in dom
    assert "<h2>Tiers' fidelity</h2>" in dom
    assert "io_time_undilated_s the same divided by" in dom
    shot = tmp_path / "report.png"
    command(["chromium", *flags, "--window-size=1200,2000", f"--screenshot={shot}", report.as_uri()], "chromium", 120)
    # a page of plots and tables, not a blank one (which is about 5 KB at this size)
    assert shot.stat().st_size > 50_000


CACHE_STUDY = f"""
name: cache
workload: tpch
variables:
  engine: mariadb
  scale_factor: {SCALE_FACTOR}
  queries: "3"
  layout: None
  fast_cache_policy: lru
matrix:
  fast_cache: [none, 4M]
"""


@pytest.fixture(scope="module")
def cache_study(lab, layouts, tmp_path_factory):
    """Q3 with every table on nand, without a cache and with a 4 MiB LRU cache of optane in front of nand. While the
    study holds the root's lock, tpch.yml on the same root; once it has ended, tiers.yml."""
    spec = tmp_path_factory.mktemp("cache") / "cache.yml"
    spec.write_text(CACHE_STUDY)
    lock = Path(lab.root, "state", "root-lock.json")
    before = lab.run_ids()
    study = subprocess.Popen(lab.study_command(str(spec), "--results-dir", str(lab.results_dir)), cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for("the study's lock", lambda: lock.exists() and json.loads(lock.read_text())["pid"] == study.pid, study,
                 limit_s=300)
        held = json.loads(lock.read_text())
        refused = lab.playbook("tpch.yml", check=False, layout="C+O")
        said, _ = study.communicate(timeout=PLAYBOOK_TIMEOUT_S)
    finally:
        if study.poll() is None:
            study.kill()
            study.communicate(timeout=60)
    assert study.returncode == 0, said
    new = lab.run_ids() - before
    study_dir = lab.results_dir / next(name for name in new if name.endswith("_cache"))
    count_study(study_dir)
    left = json.loads(lock.read_text())
    after = lab.playbook("tiers.yml")
    record = json.loads((study_dir / "study.json").read_text())
    return {"dir": study_dir, "runs": {p["variables"]["fast_cache"]: study_dir / p["run_id"] for p in record["points"]},
            "pid": study.pid, "held": held, "refused": refused, "new": new, "left": left, "after": after.stdout,
            "lock_after": lock.exists()}


def test_a_fast_cache_run_counts_its_emulated_cache_s_hits_beside_the_cost_model_s(cache_study):
    runs = cache_study["runs"]
    tier = read_csv(runs["4M"] / "tables" / "tier_metrics.csv").set_index("tier").loc["nand"]
    assert tier["model_cache_read_hits"] > 0 and tier["model_cache_read_misses"] > 0, tier
    query = read_csv(runs["4M"] / "tables" / "query_metrics.csv").iloc[0]
    # the same cache on the same requests (the emulator sees them after the loop device and FUSE)
    assert abs(query["cache_hit_pct_simulated"] - tier["model_cache_hit_pct"]) <= 5, (query, tier)
    assert (manifest(runs["4M"])["settings"]["fast_cache_bytes"], manifest(runs["4M"])["settings"]["fast_cache_policy"]) \
        == (4 << 20, "lru")


def blktrace_writes_its_files(devices: list[str], out: Path) -> bool:
    """blktrace itself, for a second on the devices (major:minor): it writes a file per CPU where the kernel opens
    its relay files, and none (still exiting 0, or hanging) where lockdown refuses them."""
    debugfs = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines() if line.split()[2] == "debugfs"]
    if not debugfs:
        return False
    names = [f"/dev/{Path('/sys/dev/block', device).resolve().name}" for device in devices]
    done = command(["timeout", "10", "blktrace", "-r", debugfs[0], "-w", "1", "-D", str(out),
                    *[arg for name in names for arg in ("-d", name)]], "blktrace", 60)
    return done.returncode == 0 and "FAILED" not in done.stdout + done.stderr and any(out.iterdir())


def test_auto_traces_with_blktrace_where_its_relay_files_open_and_with_ftrace_elsewhere(cache_study, tmp_path):
    """The cache study's runs leave the backend to choose (trace_backend auto): beside them, blktrace run by the
    test on the same devices."""
    runs = cache_study["runs"]
    devices = json.loads((runs["none"] / "raw" / "trace_backend.json").read_text())["devices"]
    (traced,) = [json.loads(line)["trace_files"] for line in (runs["none"] / "raw" / "queries.jsonl").read_text().splitlines()]
    if blktrace_writes_its_files(devices, tmp_path):
        assert manifest(runs["none"])["versions"]["tracer_backend"] == "blktrace"
        assert traced and all(name.startswith("q03_try1/") and ".blktrace." in name for name in traced)
    else:
        assert manifest(runs["none"])["versions"]["tracer_backend"] == "ftrace"
        assert traced == ["q03_try1.ftrace-raw"]


def test_validate_predicts_a_study_s_cache_from_its_run_without_one_beside_what_the_cache_measured(cache_study):
    study_dir, runs = cache_study["dir"], cache_study["runs"]
    done = cli("validate", str(study_dir))
    assert done.returncode == 0, done.stderr
    assert not (study_dir / "validation.csv").exists()
    page = (study_dir / "validation.html").read_text()
    assert "Caches: predicted against measured" in page and "Layouts" not in page
    assert page.count("<svg") == 1
    (row,) = read_csv(study_dir / "cache_validation.csv").to_dict("records")
    assert (row["query"], row["traced_layout"], row["run_id"], row["fast_cache"], row["policy"], row["runs"]) == (
        "q03", "None", runs["none"].name, "4M", "lru", 1)
    measured = read_csv(runs["4M"] / "tables" / "queries.csv").iloc[0]
    tier = read_csv(runs["4M"] / "tables" / "tier_metrics.csv").set_index("tier").loc["nand"]
    cached = read_csv(runs["4M"] / "tables" / "query_metrics.csv").iloc[0]
    # what the cache run measured, and what the cost model's cache made of its own trace, as that run's tables hold them
    assert (row["measured_s"], row["measured_hit_pct"], row["simulated_hit_pct"]) == pytest.approx(
        (measured["elapsed_s"], tier["model_cache_hit_pct"], cached["cache_hit_pct_simulated"]), rel=1e-5)
    # the cache predicted from the run without one: hits replayed on the fast tier, so faster than that run measured
    base = read_csv(runs["none"] / "tables" / "queries.csv").iloc[0]
    assert row["predicted_s"] < base["elapsed_s"]
    assert row["error_pct"] == pytest.approx(100 * (row["predicted_s"] / measured["elapsed_s"] - 1), abs=1e-3)
    # the same cache on the run without one's trace serves what it served on the cache run's, within 5 points
    assert abs(row["predicted_hit_pct"] - row["simulated_hit_pct"]) <= 5
