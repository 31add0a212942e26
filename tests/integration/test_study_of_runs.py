"""A study of many runs: a 2 x 2 matrix run point by point, stopped by an interrupt and resumed; a study spread
over two hosts."""

import json
import os
import signal
import subprocess
from pathlib import Path

import pandas as pd
import yaml

from conftest import ROOT, SCALE_FACTOR, assert_torn_down

STUDY = f"""
name: sweep
workload: tpch
variables:
  engine: mariadb
  scale_factor: {SCALE_FACTOR}
  queries: "3"
matrix:
  layout: [None, ALL]
  buffer_pool: [5%, 20%]
"""


def test_an_interrupted_study_keeps_its_finished_point_and_resumes_with_the_rest(lab, tmp_path):
    spec = tmp_path / "sweep.yml"
    spec.write_text(STUDY)
    child = subprocess.Popen(lab.study_command(str(spec), "--results-dir", str(lab.results_dir)), cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    study_dir = Path(child.stdout.readline().removeprefix("study ").strip())
    assert (study_dir.parent, study_dir.name[16:]) == (lab.results_dir, "_sweep")
    assert child.stdout.readline().strip() == "point 1 of 4: layout=None buffer_pool=5%"
    child.send_signal(signal.SIGINT)
    output = child.communicate(timeout=1800)[0]
    assert child.returncode == 1, output
    assert "interrupted: the study stops when the points that run have ended" in output
    assert f"3 of 4 points have no ok run (study.json says why, where one ran); run them with: tierlab study " \
           f"--resume {study_dir}" in output
    record = json.loads((study_dir / "study.json").read_text())
    assert [(p["point"], p["status"]) for p in record["points"]] == [(1, "ok")]
    first_run = record["points"][0]["run_id"]

    resumed = subprocess.run(lab.study_command("--resume", str(study_dir)), cwd=ROOT, capture_output=True,
                             text=True)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    record = json.loads((study_dir / "study.json").read_text())
    assert [(p["point"], p["status"]) for p in record["points"]] == [(1, "ok"), (2, "ok"), (3, "ok"), (4, "ok")]
    assert record["points"][0]["run_id"] == first_run
    ran = {}
    for point in record["points"]:
        settings = json.loads((study_dir / point["run_id"] / "config" / "run.json").read_text())["settings"]
        ran[point["point"]] = (settings["layout"], settings["buffer_pool"]["percent"])
    assert ran == {1: ("None", 5.0), 2: ("None", 20.0), 3: ("ALL", 5.0), 4: ("ALL", 20.0)}
    compared = pd.read_csv(study_dir / "compare" / "compare.csv")
    assert sorted(compared["run"].unique()) == sorted(point["run_id"] for point in record["points"])
    best = pd.read_csv(study_dir / "fastest.csv", keep_default_na=False)
    assert best[["query", "layout", "default buffer_pool"]].values.tolist() == [["q03", "None", "5%"], ["q03", "ALL", "5%"]]


def test_validate_ranks_a_study_s_layouts_from_each_of_its_runs(lab):
    (study_dir,) = [p for p in lab.results_dir.iterdir() if p.name.endswith("_sweep")]
    done = subprocess.run([str(ROOT / ".venv/bin/tierlab"), "validate", str(study_dir)], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(study_dir / "validation.csv", keep_default_na=False)
    assert table[["buffer_pool", "query", "traced_layout", "layouts"]].values.tolist() == [
        ["5%", "q03", "None", 2], ["5%", "q03", "ALL", 2], ["20%", "q03", "None", 2], ["20%", "q03", "ALL", 2]]
    assert set(table["spearman"]) <= {1.0, -1.0}
    # one run per layout: how well the measurement ranks them against itself is not known
    assert set(table["repeat_spearman"]) == {""}
    assert (table["regret_pct"] >= 0).all()
    assert set(table["measured_fastest"]) <= {"None", "ALL"}
    layouts = pd.read_csv(study_dir / "validation_layouts.csv", keep_default_na=False)
    assert sorted(layouts[["buffer_pool", "query", "layout", "runs"]].values.tolist()) == [
        ["20%", "q03", "ALL", 1], ["20%", "q03", "None", 1], ["5%", "q03", "ALL", 1], ["5%", "q03", "None", 1]]
    # one run per layout: its measured range is that run
    assert (layouts["measured_min_s"] == layouts["measured_max_s"]).all()
    page = (study_dir / "validation.html").read_text()
    assert "Layouts: predicted against measured" in page
    assert "Each layout: its runs and its predictions" in page


def test_advise_names_the_buffer_pool_knee_of_each_layout_with_its_runs(lab):
    (study_dir,) = [p for p in lab.results_dir.iterdir() if p.name.endswith("_sweep")]
    done = subprocess.run([str(ROOT / ".venv/bin/tierlab"), "advise", str(study_dir)], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    advice = pd.read_csv(study_dir / "advice" / "advice.csv", keep_default_na=False)
    assert advice[["setting", "context", "step", "value"]].values.tolist() == [
        ["buffer_pool", "layout=None", "all queries", "5%"], ["buffer_pool", "layout=None", "all queries", "20%"],
        ["buffer_pool", "layout=ALL", "all queries", "5%"], ["buffer_pool", "layout=ALL", "all queries", "20%"]]
    record = json.loads((study_dir / "study.json").read_text())
    runs = {(p["variables"]["layout"], p["variables"]["buffer_pool"]): p["run_id"] for p in record["points"]}
    assert [runs[(context.removeprefix("layout="), value)] for context, value in advice[["context", "value"]].values] \
        == list(advice["runs"])
    for context, rows in advice.groupby("context"):
        assert sorted(rows["verdict"].str.split(", ").sum()) in (["best", "knee"], ["", "best", "knee"]), context
    assert "buffer_pool for all queries (layout=None): " in done.stdout
    assert (study_dir / "advice" / "report.html").read_text().count("<svg") == 2



# what is tested here is the spreading: the tiers are plain loop devices (no emulator to build and calibrate on
# each host) with a short self-check; the emulated tiers' fidelity is tested elsewhere
SPREAD_HOST = {"tiers_emulation": "throttle", "tiers_check_runtime_s": 0.5}


def test_a_study_spreads_its_points_over_the_inventory_s_hosts_and_gathers_their_runs(tmp_path):
    """Two hosts on this machine, each with a root, tiers and ports of its own, a point each at once."""
    local = yaml.safe_load((ROOT / "playbooks" / "inventory" / "two-local.yml").read_text())
    for host, number in (("node-a", 37), ("node-b", 39)):
        local["all"]["hosts"][host] = {"tierlab_root": f"/var/lib/tierlab-{host}", "postgresql_port": number * 100 + 16,
                                       "mysql_port_base": {"mariadb": number * 100, "mysql": number * 100 + 50}}
    inventory = tmp_path / "two-hosts.yml"
    inventory.write_text(yaml.safe_dump(local))
    spec = tmp_path / "spread.yml"
    spec.write_text(STUDY.replace("name: sweep", "name: spread").replace('"3"', '"6"').replace("  buffer_pool: [5%, 20%]\n", ""))
    try:
        done = subprocess.run([str(ROOT / ".venv/bin/tierlab"), "study", "-i", str(inventory), str(spec), "--results-dir",
                               str(tmp_path / "results"), "--extra-vars", json.dumps(SPREAD_HOST)],
                              cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        (study_dir,) = (tmp_path / "results").iterdir()
        record = json.loads((study_dir / "study.json").read_text())
        assert sorted((p["host"], p["status"]) for p in record["points"]) == [("node-a", "ok"), ("node-b", "ok")]
        assert sorted(line.split(" point ")[0] for line in done.stdout.splitlines() if " of 2: ok in " in line) == [
            "[node-a]", "[node-b]"]
        for point in record["points"]:
            run_dir = study_dir / point["run_id"]
            assert point["run_id"].endswith(f"_{point['variables']['layout']}_{point['host']}")
            assert json.loads((run_dir / "config" / "run.json").read_text())["host"]["name"] == point["host"]
            tiers = json.loads((run_dir / "manifest.json").read_text())["tiers"]
            assert {t["path"] for t in tiers} == {f"/var/lib/tierlab-{point['host']}/tiers/{name}" for name in ("optane", "nand")}
        compared = pd.read_csv(study_dir / "compare" / "compare.csv")
        assert sorted(compared["run"].unique()) == sorted(p["run_id"] for p in record["points"])
    finally:
        teardown = subprocess.run([str(ROOT / ".venv/bin/ansible-playbook"), "-i", str(inventory), "playbooks/teardown.yml",
                                   "-e", "purge=true"], cwd=ROOT, capture_output=True, text=True,
                                  env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")})
    assert teardown.returncode == 0, teardown.stdout[-3000:]
    for host in ("node-a", "node-b"):
        assert_torn_down(f"/var/lib/tierlab-{host}")
