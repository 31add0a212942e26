import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import tierlab
from conftest import ROOT, SCALE_FACTOR

LAYOUTS = {"None": set(), "ALL": {"customer", "orders", "lineitem", "partsupp", "part", "supplier", "nation", "region"},
           "C+O": {"customer", "orders"}}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_each_table_file_lives_on_the_tier_its_layout_says(layout_runs, layout):
    placement = layout_runs[layout]["placement"]
    for table, where in placement.items():
        expected = "fast" if table in LAYOUTS[layout] else "capacity"
        assert where["tier"] == expected, table
        assert where["file_dev"] == where["tier_dev"], f"{table}.ibd is not on the {expected} tier's device"
        assert f"/tiers/{'optane' if expected == 'fast' else 'nand'}/" in where["path"]


def test_q3_under_c_o_reads_customer_and_orders_on_the_fast_device_and_lineitem_on_the_capacity_device(layout_runs):
    run = tierlab.load_run(layout_runs["C+O"]["dir"])
    requests = run.requests()
    reads = requests[(requests["query"] == "q03") & (requests["op"] == "R")]
    fast_objects = set(reads.loc[reads["tier"] == "optane", "object"])
    capacity_objects = set(reads.loc[reads["tier"] == "nand", "object"])
    # InnoDB's secondary indexes are objects of their own, in their table's file and on its tier
    assert {"customer", "orders"} <= fast_objects <= {"customer", "customer_nationkey", "orders", "orders_custkey", "other"}
    assert "lineitem" in capacity_objects
    assert not {"customer", "orders"} & capacity_objects


def test_q3_under_c_o_has_the_device_model_s_counts_beside_the_trace_s(layout_runs):
    tiers = pd.read_csv(layout_runs["C+O"]["dir"] / "tables" / "tier_metrics.csv").set_index(["query", "tier"])
    nand, optane = tiers.loc[("q03", "nand")], tiers.loc[("q03", "optane")]
    # the emulator counts from just before the trace starts to just after it stops
    for tier in (nand, optane):
        modelled = tier["model_read_random_requests"] + tier["model_read_sequential_requests"]
        assert tier["read_requests"] <= modelled <= 1.05 * tier["read_requests"]
    assert nand["model_read_random_requests"] > nand["model_read_sequential_requests"]
    assert optane["model_read_sequential_requests"] == 0  # optane has no read-ahead buffer to hit


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_requested_query_has_a_row(layout_runs, layout):
    lines = (layout_runs[layout]["dir"] / "tables" / "queries.csv").read_text().splitlines()
    assert lines[0].startswith("query,try,status,error,elapsed_s,io_time_s,io_time_undilated_s,rows")
    rows = [line.split(",") for line in lines[1:]]
    assert [(r[0], r[1], r[2]) for r in rows] == [("q01", "1", "ok"), ("q03", "1", "ok")]
    assert [r[7] for r in rows] == ["4", "10"]


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_the_manifest_is_complete_and_its_checksums_match(layout_runs, layout):
    run_dir = layout_runs[layout]["dir"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "ok"
    assert manifest["error"] == ""
    assert manifest["run_id"] == run_dir.name
    assert re.fullmatch(r"\d{8}T\d{6}Z_mariadb_tpch-sf0\.01_" + re.escape(layout), run_dir.name)
    assert manifest["engine"]["settings"]["innodb_page_size"] == "16384"
    assert manifest["engine"]["version"].startswith("10.11")
    assert manifest["versions"]["tracer_backend"] in ("ftrace", "blktrace")
    assert {t["name"]: (t["emulation"], t["profile"]["name"]) for t in manifest["tiers"]} == {
        "optane": ("model", "optane"), "nand": ("model", "nand")}
    # 8 jobs on the device and 5 through the file system
    assert [(t["name"], len(t["jobs"])) for t in manifest["tiers_check"]["tiers"]] == [("optane", 13), ("nand", 13)]
    dilation = {t["calibration"]["dilation"] for t in manifest["tiers"]}
    assert manifest["tiers_fidelity"]["dilation"] == manifest["tiers_check"]["dilation"] == dilation.pop()
    assert not dilation
    assert manifest["tiers_fidelity"]["verdict"] in ("faithful", "degraded")
    assert set(manifest["layout"]["tables"]) == set(LAYOUTS["ALL"])
    assert set(manifest["attempts"][-1]["phase_s"]) == {"tiers", "engine", "data", "load", "run", "collect"}
    listed = {a["path"]: a["sha256"] for a in manifest["artifacts"]}
    on_disk = {str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file() and p.name != "manifest.json"}
    assert set(listed) == on_disk
    for path, digest in listed.items():
        assert hashlib.sha256((run_dir / path).read_bytes()).hexdigest() == digest, path
    assert "password" not in json.dumps(manifest).lower()


def test_a_second_provisioning_run_changes_nothing(lab, layout_runs):
    # the first run brings the host to C+O whatever ran before it (other tests move tables, set other buffer pools)
    lab.playbook("tpch.yml", "--tags", "tiers,engine,data,load", layout="C+O")
    done = lab.playbook("tpch.yml", "--tags", "tiers,engine,data,load", layout="C+O")
    recap = re.search(r"localhost\s+: ok=\d+\s+changed=(\d+)", done.stdout)
    assert recap and recap.group(1) == "0", done.stdout[-3000:]


def test_a_bad_layout_fails_before_anything_is_touched(lab, layout_runs):
    before = lab.run_ids()
    record = Path(lab.root, "state", "created.json").read_text()
    done = lab.playbook("tpch.yml", check=False, layout="C+X")
    assert done.returncode != 0
    assert "layout 'C+X': unknown table code(s) 'X'; allowed: None, ALL, or codes C O L PS P S N R joined by '+'" in done.stdout
    assert lab.run_ids() == before
    assert Path(lab.root, "state", "created.json").read_text() == record


def test_a_run_on_a_root_whose_query_loop_still_runs_is_refused_before_it_opens(lab, layout_runs):
    # what a playbook stopped while its queries ran leaves: its query loop running, and recorded
    run_id = "20261126T221455Z_mariadb_tpch-sf0.01_None"
    spec = str(Path(lab.root, "runs", run_id, "config", "run_spec.json"))
    loop = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(600)", spec],
                            stdout=subprocess.PIPE, text=True)
    assert loop.stdout.readline() == "ready\n"
    entry = {"kind": "query_loop", "pid": loop.pid, "marker": spec, "run_id": run_id}
    record_file = Path(lab.root, "state", "created.json")
    record_file.write_text(json.dumps([*json.loads(record_file.read_text()), entry]))
    before = lab.run_ids()
    try:
        done = lab.playbook("tpch.yml", check=False, layout="C+O")
    finally:
        loop.kill()
        loop.wait()
    assert done.returncode != 0
    assert (f"the query loop of run 20261126T221455Z_mariadb_tpch-sf0.01_None (pid {loop.pid}) still runs on this "
            "tierlab root") in done.stdout
    assert lab.run_ids() == before
    # the next run lets the record of the loop that is gone go
    lab.playbook("tpch.yml", "--tags", "tiers")
    assert entry not in json.loads(record_file.read_text())


def test_a_layout_too_big_for_the_fast_tier_shows_the_sizes(lab, layout_runs):
    done = lab.playbook("tpch.yml", check=False, layout="ALL", scale_factor=10)
    assert done.returncode != 0
    assert "layout 'ALL' at scale_factor=10 needs about" in done.stdout
    assert "lineitem 13.23 GiB" in done.stdout


def test_a_resumed_run_runs_only_the_queries_without_a_row(lab, layout_runs):
    # what an interrupted run leaves: the host's run directory with q01's row only, and a partial manifest
    run_dir = layout_runs["C+O"]["dir"]
    host_dir = Path(lab.root, "runs", run_dir.name)
    shutil.copytree(run_dir / "config", host_dir / "config")
    shutil.copytree(run_dir / "raw", host_dir / "raw")
    first, _ = (host_dir / "raw" / "queries.jsonl").read_text().splitlines()
    (host_dir / "raw" / "queries.jsonl").write_text(first + "\n")
    for path in host_dir.glob("raw/*/q03_try1.*"):
        path.unlink()
    q01_trace = (run_dir / "raw" / "traces" / "q01_try1.ftrace-raw").read_bytes()
    done = lab.playbook("tpch.yml", layout="C+O", resume=run_dir.name)
    assert re.search(r"q03_try1 \(1 of 1\): ok in \d+\.\d+ s; about 0 s left", done.stdout), done.stdout[-3000:]
    assert "q01_try1 (" not in done.stdout
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "ok"
    assert len(manifest["attempts"]) == 2
    rows = [json.loads(line) for line in (run_dir / "raw" / "queries.jsonl").read_text().splitlines()]
    assert [(r["query"], r["status"]) for r in rows] == [("q01", "ok"), ("q03", "ok")]
    assert (run_dir / "raw" / "traces" / "q01_try1.ftrace-raw").read_bytes() == q01_trace
    assert not host_dir.exists()


def test_a_query_loop_stopped_by_sigterm_keeps_its_rows_and_removes_its_tracing_instance(lab, layout_runs,
                                                                                        tmp_path):
    """The host agent's query loop on the C+O run's spec, warm, with two queries of its own: SELECT 1, then a
    30 s sleep that is under way when the loop gets SIGTERM."""
    spec = json.loads((layout_runs["C+O"]["dir"] / "config" / "run_spec.json").read_text())
    queries_dir = tmp_path / "queries"
    queries_dir.mkdir()
    (queries_dir / "q01.sql").write_text("SELECT 1;\n")
    (queries_dir / "q02.sql").write_text("SELECT SLEEP(30);\n")
    run_dir = tmp_path / "run"
    spec.update(run_dir=str(run_dir), queries_dir=str(queries_dir), queries=["q01", "q02"], cold=False)
    spec_file = tmp_path / "run_spec.json"
    spec_file.write_text(json.dumps(spec))
    record = Path(lab.root, "state", "created.json")
    agent = subprocess.Popen(["/usr/bin/python3", "-m", "tierlab_host", "run", str(spec_file)],
                             cwd=Path(lab.root, "agent"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "TIERLAB_STATE_DIR": str(Path(lab.root, "state"))})
    trace = run_dir / "raw" / "traces" / "q02_try1.ftrace-raw"
    while not trace.exists():
        assert agent.poll() is None, agent.communicate()
        time.sleep(0.1)
    (instance,) = [Path(e["path"]) for e in json.loads(record.read_text()) if e["kind"] == "tracing_instance"]
    assert instance.is_dir()
    client = f"mysql --defaults-file={spec['engine']['client_file']}"
    while subprocess.run(["pgrep", "-f", client], capture_output=True).returncode != 0:
        assert agent.poll() is None, agent.communicate()
        time.sleep(0.1)
    agent.send_signal(signal.SIGTERM)
    # long before the sleep would have ended
    stdout, stderr = agent.communicate(timeout=20)
    assert agent.returncode == 1, stdout + stderr
    said = "stopped by SIGTERM; the try under way, if any, has no row: resume the run to run it and the rest"
    assert said in stderr
    assert (run_dir / "raw" / "run.log").read_text().splitlines()[-1] == f"failed: {said}"
    rows = [json.loads(line) for line in (run_dir / "raw" / "queries.jsonl").read_text().splitlines()]
    assert [(row["query"], row["status"]) for row in rows] == [("q01", "ok")]
    assert not instance.exists()
    assert [e for e in json.loads(record.read_text()) if e["kind"] == "tracing_instance"] == []
    assert subprocess.run(["pgrep", "-f", client], capture_output=True).returncode == 1


def test_resume_with_other_variables_is_refused(lab, layout_runs):
    done = lab.playbook("tpch.yml", check=False, layout="None", resume=layout_runs["C+O"]["dir"].name)
    assert done.returncode != 0
    assert "that run was started with other variables" in done.stdout


def test_a_failing_or_timed_out_query_gets_a_row_with_its_error(lab, layout_runs, tmp_path):
    timed_out = lab.execute("mariadb-16k", "SELECT SLEEP(5);", 1, tmp_path / "sleep.tsv")
    assert timed_out["status"] == "timeout"
    assert "max_statement_time" in timed_out["error"]
    failed = lab.execute("mariadb-16k", "SELECT no_such_column FROM lineitem;", 1, tmp_path / "bad.tsv")
    assert failed["status"] == "error"
    assert "Unknown column 'no_such_column'" in failed["error"]


def test_the_run_report_renders_in_chromium_with_its_plots(layout_runs, tmp_path):
    report = layout_runs["C+O"]["dir"] / "report" / "report.html"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(["chromium", *flags, "--dump-dom", report.as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert "<h1>tierlab run " + layout_runs["C+O"]["dir"].name in dom
    assert dom.count("<svg") == 3
    for title in ("Sequential vs random reads per query", "Repeat access rate per query", "Read latency CDF per tier"):
        assert title in dom
    assert "<h3>q03 (try 1)</h3>" in dom
    assert "How the plan reads each table:" in dom
    assert "<h2>Tiers' fidelity</h2>" in dom
    assert "io_time_undilated_s the same divided by" in dom
    shot = tmp_path / "report.png"
    subprocess.run(["chromium", *flags, "--window-size=1200,2000", f"--screenshot={shot}", report.as_uri()],
                   capture_output=True, timeout=120, check=True)
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
def cache_study(lab, layout_runs, tmp_path_factory):
    """Q3 with every table on nand, without a cache and with a 4 MiB LRU cache of optane in front of nand."""
    spec = tmp_path_factory.mktemp("cache") / "cache.yml"
    spec.write_text(CACHE_STUDY)
    study_dir = lab.study(spec)
    record = json.loads((study_dir / "study.json").read_text())
    return study_dir, {p["variables"]["fast_cache"]: study_dir / p["run_id"] for p in record["points"]}


def test_a_fast_cache_run_counts_its_emulated_cache_s_hits_beside_the_cost_model_s(cache_study):
    _, runs = cache_study
    cache_run = runs["4M"]
    tier = pd.read_csv(cache_run / "tables" / "tier_metrics.csv").set_index("tier").loc["nand"]
    assert tier["model_cache_read_hits"] > 0 and tier["model_cache_read_misses"] > 0, tier
    query = pd.read_csv(cache_run / "tables" / "query_metrics.csv").iloc[0]
    # the same cache on the same requests (the emulator sees them after the loop device and FUSE)
    assert abs(query["cache_hit_pct_simulated"] - tier["model_cache_hit_pct"]) <= 5, (query, tier)
    manifest = json.loads((cache_run / "manifest.json").read_text())
    assert (manifest["settings"]["fast_cache_bytes"], manifest["settings"]["fast_cache_policy"]) == (4 << 20, "lru")


def test_validate_predicts_a_study_s_cache_from_its_run_without_one_beside_what_the_cache_measured(cache_study):
    study_dir, runs = cache_study
    done = subprocess.run([str(ROOT / ".venv/bin/tierlab"), "validate", str(study_dir)], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    assert not (study_dir / "validation.csv").exists()
    page = (study_dir / "validation.html").read_text()
    assert "Caches: predicted against measured" in page and "Layouts" not in page
    assert page.count("<svg") == 1
    (row,) = pd.read_csv(study_dir / "cache_validation.csv", keep_default_na=False).to_dict("records")
    assert (row["query"], row["traced_layout"], row["run_id"], row["fast_cache"], row["policy"], row["runs"]) == (
        "q03", "None", runs["none"].name, "4M", "lru", 1)
    measured = pd.read_csv(runs["4M"] / "tables" / "queries.csv").iloc[0]
    tier = pd.read_csv(runs["4M"] / "tables" / "tier_metrics.csv").set_index("tier").loc["nand"]
    assert (row["measured_s"], row["measured_hit_pct"]) == pytest.approx((measured["elapsed_s"], tier["model_cache_hit_pct"]))
    # the CSV keeps 6 significant digits: the error is checked in the form they hold to that precision
    assert row["predicted_s"] == pytest.approx(row["measured_s"] * (1 + row["error_pct"] / 100), rel=1e-5)
    # a cold 4 MiB cache serves Q3 some of its reads, by the model and by the emulator
    assert 0 < row["predicted_hit_pct"] < 100 and 0 < row["simulated_hit_pct"] < 100
    # the hits are replayed on the fast tier: the cache is predicted faster than the run without it measured
    base = pd.read_csv(runs["none"] / "tables" / "queries.csv").iloc[0]
    assert row["predicted_s"] < base["elapsed_s"]


def test_a_fast_cache_with_tables_on_the_fast_tier_fails_before_anything_is_touched(lab, layout_runs):
    done = lab.playbook("tpch.yml", check=False, layout="C+O", fast_cache="4M")
    assert done.returncode != 0
    assert "fast_cache=4M makes the fast tier a cache of the capacity tier" in done.stdout
