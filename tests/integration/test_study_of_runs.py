"""Studies of many runs: the layouts study stopped by an interrupt and resumed, its layouts ranked by validate
against what they measured, a buffer pool study advised on, and a study spread over two hosts."""

import json
import re
import statistics

import pytest
from lab import LAYOUTS, SCALE_FACTOR, cli, read_csv

pytestmark = pytest.mark.mariadb


def test_an_interrupted_study_keeps_its_finished_point_and_resumes_with_the_rest(layouts, lab):
    study_dir = layouts["dir"]
    assert (study_dir.parent, study_dir.name[16:]) == (lab.results_dir, "_layouts")
    assert layouts["first_lines"][1].strip() == "point 1 of 6: layout=None (repetition 1)"
    assert layouts["interrupted_code"] == 1, layouts["interrupted"]
    assert "interrupted: the study stops when the points that run have ended" in layouts["interrupted"]
    assert (f"5 of 6 points have no ok run (study.json says why, where one ran); run them with: tierlab study "
            f"--resume {study_dir}") in layouts["interrupted"]
    assert [(p["point"], p["status"]) for p in layouts["after_interrupt"]["points"]] == [(1, "ok")]
    # each query try as it ends, passed on from the playbook
    assert re.search(r"^    q01_try1 \(1 of 2\): ok in \d+\.\d+ s; about \d+ s left", layouts["resumed"], re.M), \
        layouts["resumed"][-3000:]
    points = layouts["record"]["points"]
    assert [(p["point"], p["status"]) for p in points] == [(n, "ok") for n in range(1, 7)]
    assert points[0]["run_id"] == layouts["after_interrupt"]["points"][0]["run_id"]
    ran = [json.loads((study_dir / p["run_id"] / "config" / "run.json").read_text())["settings"]["layout"] for p in points]
    assert ran == ["None", "None", "C+O", "C+O", "ALL", "ALL"]
    compared = read_csv(study_dir / "compare" / "compare.csv")
    assert sorted(compared["run"].unique()) == sorted(p["run_id"] for p in points)
    best = read_csv(study_dir / "fastest.csv")
    assert best[["query", "default layout"]].values.tolist() == [["q01", "None"], ["q03", "None"]]


def q03_seconds(layouts) -> dict[str, list[float]]:
    """Each layout's measured Q3 seconds, from its runs' tables."""
    seconds: dict[str, list[float]] = {}
    for (layout, _), run_dir in sorted(layouts["runs"].items()):
        queries = read_csv(run_dir / "tables" / "queries.csv").set_index("query")
        seconds.setdefault(layout, []).append(float(queries.loc["q03", "elapsed_s"]))
    return seconds


def test_q3_s_layouts_are_apart_by_more_than_their_runs_spread(layouts):
    """What the validation below rests on: every table the fast tier gains takes Q3 time off, by more than a layout's
    two runs differ."""
    seconds = q03_seconds(layouts)
    assert min(seconds["None"]) > max(seconds["C+O"]) and min(seconds["C+O"]) > max(seconds["ALL"]), seconds


def test_validate_ranks_q3_s_layouts_as_they_ran_from_each_of_its_runs(layouts):
    study_dir = layouts["dir"]
    done = cli("validate", str(study_dir))
    assert done.returncode == 0, done.stderr
    table = read_csv(study_dir / "validation.csv")
    q03 = table[table["query"] == "q03"]
    assert sorted(q03["traced_layout"]) == sorted(layout for layout in LAYOUTS for _ in range(2))
    # from any of the six runs, the model ranks the three layouts as they measured: ALL, C+O, None
    assert (q03["layouts"] == 3).all()
    assert (q03["spearman"] == 1.0).all()
    assert set(q03["predicted_fastest"]) == set(q03["measured_fastest"]) == {"ALL"}
    assert (q03["regret_pct"] == 0).all()
    # the measurement ranks them alike in both repetitions
    assert (q03["repeat_spearman"] == 1.0).all()
    layouts_table = read_csv(study_dir / "validation_layouts.csv").set_index(["query", "layout"])
    seconds = q03_seconds(layouts)
    for layout in LAYOUTS:
        row = layouts_table.loc[("q03", layout)]
        assert (row["runs"], row["measured_min_s"], row["measured_max_s"]) == pytest.approx(
            (2, min(seconds[layout]), max(seconds[layout])), rel=1e-5)
        assert row["measured_s"] == pytest.approx(statistics.median(seconds[layout]), rel=1e-5)
    page = (study_dir / "validation.html").read_text()
    assert "Layouts: predicted against measured" in page
    assert "Each layout: its runs and its predictions" in page


BUFFER_POOL_STUDY = f"""
name: buffer-pool
workload: tpch
variables:
  engine: mariadb
  scale_factor: {SCALE_FACTOR}
  queries: "3"
  layout: None
matrix:
  buffer_pool: [8M, 64M]
"""


@pytest.fixture(scope="module")
def buffer_pool_study(lab, layouts, tmp_path_factory):
    """Q3 with every table on nand and the smallest buffer pool, then one that holds the whole database (about 20 MB)."""
    spec = tmp_path_factory.mktemp("buffer_pool") / "buffer-pool.yml"
    spec.write_text(BUFFER_POOL_STUDY)
    return lab.study(spec)


def test_advise_names_the_best_buffer_pool_and_its_knee_with_the_runs_it_rests_on(buffer_pool_study):
    study_dir = buffer_pool_study
    done = cli("advise", str(study_dir))
    assert done.returncode == 0, done.stderr
    record = json.loads((study_dir / "study.json").read_text())
    runs = {p["variables"]["buffer_pool"]: p["run_id"] for p in record["points"]}
    seconds = {size: float(read_csv(study_dir / run / "tables" / "queries.csv")["elapsed_s"].iloc[0])
               for size, run in runs.items()}
    advice = read_csv(study_dir / "advice" / "advice.csv")
    assert advice[["setting", "context", "step", "value", "runs"]].values.tolist() == [
        ["buffer_pool", "all runs", "all queries", "8M", runs["8M"]],
        ["buffer_pool", "all runs", "all queries", "64M", runs["64M"]]]
    assert advice["figure"].tolist() == pytest.approx([seconds["8M"], seconds["64M"]], rel=1e-5)
    # a buffer pool that holds the database reads each page once: the best, and the knee (the smallest within 10%)
    assert seconds["64M"] < seconds["8M"] / 1.1, seconds
    assert advice["verdict"].fillna("").tolist() == ["", "best, knee"]
    assert [line for line in done.stdout.splitlines() if line.startswith("buffer_pool for all queries (all runs): ")
            ][0].startswith("buffer_pool for all queries (all runs): 64M (64 MiB) is best, ")
    assert (study_dir / "advice" / "report.html").read_text().count("<svg") == 1


def test_findings_publish_the_two_studies_answers_advice_and_validation_from_tables_that_write_the_page_again(
        layouts, buffer_pool_study, tmp_path):
    done = cli("findings", str(layouts["dir"]), str(buffer_pool_study), "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "findings" / "layouts").iterdir()) == [
        "cache_curve.csv", "queries.csv", "recommend.csv", "runs.csv", "study.json", "validation.csv",
        "validation_layouts.csv"]
    assert sorted(p.name for p in (tmp_path / "findings" / "buffer-pool").iterdir()) == [
        "advice.csv", "queries.csv", "runs.csv", "study.json"]
    # each layout's time per query: the median of its two runs, read from the runs themselves
    medians = {layout: {query: statistics.median(
        float(read_csv(layouts["runs"][layout, repetition] / "tables" / "queries.csv").set_index("query")
              .loc[query, "elapsed_s"]) for repetition in (1, 2)) for query in ("q01", "q03")} for layout in LAYOUTS}
    totals = {layout: sum(times.values()) for layout, times in medians.items()}
    best = min(totals, key=totals.get)
    against = "None" if best != "None" else sorted(totals, key=totals.get)[1]
    page = (tmp_path / "findings.md").read_text()
    assert (f"- the study: layout={best} ran its 2 queries in {totals[best]:.3g} s, "
            f"{totals[against] / totals[best]:.2f}x as fast as layout={against} ({totals[against]:.3g} s); ") in page
    validation = read_csv(tmp_path / "findings" / "layouts" / "validation.csv")
    assert len(validation) == 12
    hits = int((validation["predicted_fastest"] == validation["measured_fastest"]).sum())
    assert f"recommend named the measured fastest layout in {hits} of 12 (query, run) pairs" in page
    assert "\n- buffer_pool for all queries (all runs): 64M (64 MiB) is best, " in page
    # recommend asked from the first run with nothing on the fast tier, for a quarter of its data
    first_bare = layouts["runs"]["None", 1]
    stored = sum(t["stored_bytes"] for t in json.loads((first_bare / "manifest.json").read_text())["layout"]["tables"]
                 .values())
    advised = read_csv(tmp_path / "findings" / "layouts" / "recommend.csv")
    assert advised[["run_id", "fast_capacity_bytes", "traced_layout"]].values.tolist() == [
        [first_bare.name, int(stored * 0.25) >> 20 << 20, "None"]]
    assert f"Evidence: run {first_bare.name}" in page
    for run_dir in layouts["runs"].values():
        assert f"| {run_dir.name} |" in page
    written = {name: (tmp_path / name).read_text() for name in ("findings.md", "findings.html")}
    assert written["findings.html"].count("<svg") == 2
    again = cli("findings", "--out", str(tmp_path))
    assert again.returncode == 0, again.stderr
    assert {name: (tmp_path / name).read_text() for name in written} == written


@pytest.mark.postgresql
def test_a_study_spreads_its_points_over_the_inventory_s_hosts_and_gathers_their_runs(two_hosts):
    record, study_dir = two_hosts["record"], two_hosts["dir"]
    assert sorted((p["host"], p["status"]) for p in record["points"]) == [("node-a", "ok"), ("node-b", "ok")]
    for point in record["points"]:
        run_dir = study_dir / point["run_id"]
        assert point["run_id"].endswith(f"_{point['host']}")
        assert json.loads((run_dir / "config" / "run.json").read_text())["host"]["name"] == point["host"]
        tiers = json.loads((run_dir / "manifest.json").read_text())["tiers"]
        assert {t["path"] for t in tiers} == {f"/var/lib/tierlab-{point['host']}/tiers/{name}" for name in ("optane", "nand")}
    compared = read_csv(study_dir / "compare" / "compare.csv")
    assert sorted(compared["run"].unique()) == sorted(p["run_id"] for p in record["points"])


@pytest.mark.postgresql
def test_a_host_cut_in_the_middle_of_its_point_fails_that_point_only_and_the_others_are_kept(two_hosts):
    assert two_hosts["sessions_cut"] and two_hosts["cut_code"] == 1
    after = {p["host"]: p for p in two_hosts["after_cut"]["points"]}
    assert (after["node-b"]["status"], after["node-b"]["error"]) == ("ok", None)
    # the run it had opened is kept, partial, to resume
    assert after["node-a"]["status"] == "partial" and after["node-a"]["run_id"]
    assert "fatal: [node-a]: UNREACHABLE!" in after["node-a"]["error"]
    assert f"run them with: tierlab study --resume {two_hosts['dir']}" in two_hosts["cut_said"]


@pytest.mark.postgresql
def test_resume_finishes_the_cut_point_in_its_own_run_on_its_host_and_leaves_the_other_as_it_was(two_hosts):
    after = {p["host"]: p for p in two_hosts["after_cut"]["points"]}
    now = {p["host"]: p for p in two_hosts["record"]["points"]}
    assert now["node-b"] == after["node-b"]
    assert now["node-a"]["run_id"] == after["node-a"]["run_id"]
    assert [line for line in two_hosts["said"].splitlines() if line.startswith("[node-b]")] == []
    run_dir = two_hosts["dir"] / now["node-a"]["run_id"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    # the cut attempt never reached the collect that records an attempt: the resumed one is the run's record
    assert (manifest["status"], manifest["attempts"][-1]["status"]) == ("ok", "ok")
    rows = [json.loads(line) for line in (run_dir / "raw" / "queries.jsonl").read_text().splitlines()]
    assert [(row["query"], row["status"]) for row in rows] == [("q01", "ok"), ("q06", "ok"), ("q14", "ok")]


@pytest.mark.postgresql
def test_doctor_probes_an_inventory_host_over_ssh_as_its_become_user_under_that_host_s_root(two_hosts):
    done = cli("doctor", "-i", str(two_hosts["inventory"]), "--host", "node-a", "-e", "engine=postgresql", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert (report["inventory_host"], report["probe"]["root"]) == ("node-a", "/var/lib/tierlab-node-a")
    assert report["probe"]["uid"] == 0
    assert {item["name"]: item["verdict"] for item in report["items"]}["engine package"] == "ok"
