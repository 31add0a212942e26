"""A study file: what it may say, the points it makes, and what it refuses before any run starts."""

import io
import json

import pandas as pd
import pytest

from tierlab.cli import main
from tierlab.errors import InputError, RunDirError
from tierlab.studies import study
from tierlab.studies.study import fastest, inventory_hosts, points, read_study, read_study_record, run_study

STUDY = """
name: e5-plans
workload: ssb
variables:
  engine: postgresql
  scale_factor: 1
  queries: 1.1,3.4
matrix:
  layout: [None, ALL]
  join_plan: [optimizer, hash, index]
"""


def study_file(tmp_path, text: str):
    path = tmp_path / "study.yml"
    path.write_text(text)
    return path


def test_the_points_are_every_combination_the_last_variable_varying_fastest(tmp_path):
    study = read_study(study_file(tmp_path, STUDY))
    assert (study["name"], study["workload"], study["repetitions"]) == ("e5-plans", "ssb", 1)
    assert [(p["point"], p["variables"]["layout"], p["variables"]["join_plan"]) for p in points(study)] == [
        (1, "None", "optimizer"), (2, "None", "hash"), (3, "None", "index"),
        (4, "ALL", "optimizer"), (5, "ALL", "hash"), (6, "ALL", "index")]
    assert points(study)[0]["variables"] == {"engine": "postgresql", "scale_factor": "1", "queries": "1.1,3.4",
                                             "layout": "None", "join_plan": "optimizer"}


def test_repetitions_are_points_of_their_own(tmp_path):
    study = read_study(study_file(tmp_path, STUDY + "repetitions: 2\n"))
    assert [(p["point"], p["variables"]["join_plan"], p["repetition"]) for p in points(study)][:3] == [
        (1, "optimizer", 1), (2, "optimizer", 2), (3, "hash", 1)]


def test_set_gives_a_variable_another_value_in_every_point_and_repetitions_replace_the_file_s(tmp_path):
    study = read_study(study_file(tmp_path, STUDY + "repetitions: 3\n"), {"scale_factor": "0.1", "tries": "2"}, 1)
    assert (study["variables"], study["repetitions"]) == (
        {"engine": "postgresql", "scale_factor": "0.1", "queries": "1.1,3.4", "tries": "2"}, 1)
    assert len(points(study)) == 6


def test_set_refuses_a_variable_the_matrix_varies_and_a_value_the_playbook_would(tmp_path):
    path = study_file(tmp_path, STUDY)
    with pytest.raises(InputError) as err:
        read_study(path, {"layout": "ALL"})
    assert str(err.value) == ("--set layout: the study's matrix varies it; --set gives a variable one value in every "
                              "run")
    with pytest.raises(InputError) as err:
        read_study(path, {"scale_factor": "-1"})
    assert str(err.value).startswith(f"{path}: point 1 (layout=None join_plan=optimizer): scale_factor='-1' ")

def test_a_point_the_playbook_would_refuse_is_refused_before_any_run(tmp_path):
    path = study_file(tmp_path, STUDY.replace("engine: postgresql", "io_threads: 8").replace(
        "matrix:", "matrix:\n  engine: [mariadb, postgresql]").replace("join_plan: [optimizer, hash, index]", ""))
    with pytest.raises(InputError) as err:
        read_study(path)
    assert str(err.value) == (f"{path}: point 3 (engine=postgresql layout=None): io_threads='8' means nothing for "
                              "engine=postgresql; it applies to engine mariadb and mysql only. Leave it unset for postgresql")


def test_a_name_that_is_no_run_variable_is_refused_with_the_run_variables(tmp_path):
    path = study_file(tmp_path, STUDY.replace("queries:", "querys:"))
    with pytest.raises(InputError) as err:
        read_study(path)
    assert str(err.value).startswith(f"{path}: 'querys' is not a run variable; the run variables are engine, layout, "
                                     "queries, page_size, buffer_pool,")


def test_a_variable_in_both_variables_and_matrix_is_refused(tmp_path):
    path = study_file(tmp_path, STUDY.replace("  queries: 1.1,3.4", "  layout: ALL"))
    with pytest.raises(InputError) as err:
        read_study(path)
    assert str(err.value) == f"{path}: layout in both variables and matrix; give each in one of them"


def test_run_variables_are_refused_among_the_extra_vars(tmp_path):
    study = read_study(study_file(tmp_path, STUDY))
    with pytest.raises(InputError) as err:
        run_study(study, tmp_path / "s", {"tierlab_root": "/srv/tierlab", "scale_factor": 10})
    assert str(err.value).startswith("--extra-vars scale_factor: a run variable belongs in the study file")
    assert not (tmp_path / "s").exists()


def test_a_study_directory_of_another_study_is_not_resumed(tmp_path):
    first = read_study(study_file(tmp_path, STUDY))
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "study.json").write_text(json.dumps({"schema_version": 1, "study": first, "points": []}))
    other = read_study(study_file(tmp_path, STUDY.replace("1.1,3.4", "1.1")))
    with pytest.raises(InputError) as err:
        run_study(other, tmp_path / "s", {})
    assert str(err.value) == (f"{tmp_path / 's'} holds another study (its study.json differs from the study file); "
                              "resume it with the study file it was started with, or start a new study")


def test_a_study_past_its_stop_after_starts_no_point_and_leaves_them_all_to_resume(tmp_path):
    study = read_study(study_file(tmp_path, STUDY))
    out = io.StringIO()
    record = run_study(study, tmp_path / "s", {}, out=out, stop_after=0.0)
    assert record["points"] == [] and "ended_at" not in record
    assert out.getvalue() == "--stop-after 0 s has passed: no more points start; 6 of 6 points are left for --resume\n"
    assert json.loads((tmp_path / "s" / "study.json").read_text())["points"] == []


def test_a_study_with_every_point_ok_says_nothing_of_its_stop_after(tmp_path):
    study = read_study(study_file(tmp_path, STUDY))
    done = [{"point": p["point"], "status": "ok", "run_id": f"run-{p['point']}", "error": None, "seconds": 1.0}
            for p in points(study)]
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "study.json").write_text(json.dumps({"schema_version": 1, "study_id": "s", "study": study,
                                                           "points": done}))
    out = io.StringIO()
    assert run_study(study, tmp_path / "s", {}, out=out, stop_after=0.0)["points"] == done
    assert out.getvalue() == ""


def test_a_resumed_study_runs_its_points_with_the_extra_vars_it_started_with(tmp_path, monkeypatch):
    study_spec = read_study(study_file(tmp_path, STUDY))
    run_study(study_spec, tmp_path / "s", {"tiers_dilation": 5}, out=io.StringIO(), stop_after=0.0)
    # a playbook that fails before its run opens: the study stops after one point
    playbook = tmp_path / "ansible-playbook"
    playbook.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {tmp_path / 'args'}\nexit 2\n")
    playbook.chmod(0o755)
    monkeypatch.setattr(study, "ANSIBLE_PLAYBOOK", playbook)
    out = io.StringIO()
    run_study(study_spec, tmp_path / "s", {}, out=out)
    assert out.getvalue().splitlines()[:2] == [
        'every point with the --extra-vars the study started with: {"tiers_dilation": 5}',
        "point 1 of 6: layout=None join_plan=optimizer"]
    variables = json.loads((tmp_path / "args").read_text().splitlines()[-1])
    assert (variables["tiers_dilation"], variables["layout"]) == (5, "None")


def test_a_resume_with_other_extra_vars_is_refused(tmp_path):
    study_spec = read_study(study_file(tmp_path, STUDY))
    run_study(study_spec, tmp_path / "s", {"tiers_dilation": 5}, out=io.StringIO(), stop_after=0.0)
    with pytest.raises(InputError) as err:
        run_study(study_spec, tmp_path / "s", {"tiers_dilation": 6}, out=io.StringIO(), stop_after=0.0)
    assert str(err.value) == (f'--extra-vars {{"tiers_dilation": 6}}: {tmp_path / "s"} was started with --extra-vars '
                              '{"tiers_dilation": 5}, and its points run with the host variables it started with '
                              "(another tiers_dilation would make its runs incomparable); give those, or none")


@pytest.mark.parametrize("text", ["2", "h", "-1h", "0m", "31d", "inf h", "nanm", "1000h"])
def test_a_stop_after_without_a_unit_or_out_of_bounds_is_refused(tmp_path, text):
    with pytest.raises(SystemExit) as exit:
        main(["study", str(study_file(tmp_path, STUDY)), "--study-dir", str(tmp_path / "s"), f"--stop-after={text}"])
    assert exit.value.code == (f"tierlab study: --stop-after {text!r}: give a positive duration under 30 days with "
                               "its unit s, m or h, e.g. 2h or 90m")
    assert not (tmp_path / "s").exists()


def test_a_study_runs_on_the_inventory_s_hosts_in_its_order_those_of_its_groups_included(tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    node-b: {}\n  children:\n    rack1:\n      hosts:\n        node-a: {}\n"
                         "        node-c: {}\n")
    assert inventory_hosts(inventory) == ["node-b", "node-a", "node-c"]


def test_the_default_inventory_is_this_host():
    assert inventory_hosts(None) == ["localhost"]


def test_an_inventory_that_is_missing_or_names_no_host_is_refused(tmp_path):
    with pytest.raises(InputError) as err:
        inventory_hosts(tmp_path / "hosts.yml")
    assert str(err.value) == f"inventory {tmp_path / 'hosts.yml'}: no such file or directory"
    (tmp_path / "hosts.yml").write_text("all:\n  children:\n    rack1: {}\n")
    with pytest.raises(InputError) as err:
        inventory_hosts(tmp_path / "hosts.yml")
    assert str(err.value).startswith(f"inventory {tmp_path / 'hosts.yml'} has no hosts; give an inventory")


def test_a_study_of_an_unknown_schema_version_is_refused(tmp_path):
    (tmp_path / "study.json").write_text(json.dumps({"schema_version": 7}))
    with pytest.raises(RunDirError) as err:
        read_study_record(tmp_path)
    assert str(err.value) == f"{tmp_path / 'study.json'}: study schema_version 7 is not one this tierlab reads (it reads 1)"


def test_fastest_names_per_query_and_tier_the_plan_that_won_and_how_the_optimizer_s_own_did(tmp_path):
    study = read_study(study_file(tmp_path, STUDY))
    record = {"points": [{**point, "status": "ok", "run_id": f"run{point['point']}"} for point in points(study)]}
    # Q3.4 on the capacity tier (layout None): the planner's own index plan 15.8 s, hash 1.6 s, forced index 52 s
    seconds = {"run1": 15.8, "run2": 1.6, "run3": 52.0, "run4": 1.5, "run5": 1.7, "run6": 10.8}
    side = pd.DataFrame({"query": "q3.4", "run": list(seconds), "elapsed_s": list(seconds.values())})
    assert fastest(study, record, side).to_dict("records") == [
        {"query": "q3.4", "engine": "postgresql", "layout": "None", "fastest join_plan": "hash", "fastest_s": 1.6,
         "default join_plan": "optimizer", "default_s": 15.8, "default_over_fastest": pytest.approx(9.875)},
        {"query": "q3.4", "engine": "postgresql", "layout": "ALL", "fastest join_plan": "optimizer", "fastest_s": 1.5,
         "default join_plan": "optimizer", "default_s": 1.5, "default_over_fastest": 1.0}]


def test_fastest_judges_sysbench_tests_by_the_most_transactions_per_second(tmp_path):
    spec = study_file(tmp_path, "name: e4\nworkload: sysbench\nmatrix:\n  layout: [None]\n  threads: [4, 16]\n")
    study = read_study(spec)
    record = {"points": [{**point, "status": "ok", "run_id": f"run{point['point']}"} for point in points(study)]}
    side = pd.DataFrame({"query": "oltp_read_write", "run": ["run1", "run2"], "elapsed_s": [60.0, 60.0],
                         "tps": [500.0, 800.0]})
    assert fastest(study, record, side).to_dict("records") == [
        {"query": "oltp_read_write", "engine": "mariadb", "layout": "None", "fastest threads": "16", "fastest_tps": 800.0,
         "default threads": "4", "default_tps": 500.0, "default_over_fastest": 1.6}]


def test_fastest_keeps_each_engine_apart_when_the_matrix_varies_it(tmp_path):
    spec = study_file(tmp_path, "name: fs\nworkload: tpch\nvariables:\n  layout: None\n"
                                "matrix:\n  engine: [mariadb, postgresql]\n  compression: [none, zstd]\n")
    study = read_study(spec)
    record = {"points": [{**point, "status": "ok", "run_id": f"run{point['point']}"} for point in points(study)]}
    seconds = {"run1": 2.0, "run2": 1.5, "run3": 0.5, "run4": 0.6}
    side = pd.DataFrame({"query": "q01", "run": list(seconds), "elapsed_s": list(seconds.values())})
    assert fastest(study, record, side).to_dict("records") == [
        {"query": "q01", "engine": "mariadb", "fastest compression": "zstd", "fastest_s": 1.5,
         "default compression": "none", "default_s": 2.0, "default_over_fastest": pytest.approx(4 / 3)},
        {"query": "q01", "engine": "postgresql", "fastest compression": "none", "fastest_s": 0.5,
         "default compression": "none", "default_s": 0.5, "default_over_fastest": 1.0}]


def test_fastest_can_compare_the_engines_themselves(tmp_path):
    spec = study_file(tmp_path, "name: engines\nworkload: tpch\nmatrix:\n  engine: [mariadb, postgresql]\n")
    study = read_study(spec)
    record = {"points": [{**point, "status": "ok", "run_id": f"run{point['point']}"} for point in points(study)]}
    side = pd.DataFrame({"query": "q01", "run": ["run1", "run2"], "elapsed_s": [2.0, 0.5]})
    assert fastest(study, record, side).to_dict("records") == [
        {"query": "q01", "fastest engine": "postgresql", "fastest_s": 0.5, "default engine": "mariadb",
         "default_s": 2.0, "default_over_fastest": 4.0}]


def test_fastest_names_no_cache_the_default_of_a_study_of_caches(tmp_path):
    spec = study_file(tmp_path, "name: cache\nworkload: tpch\nvariables:\n  layout: None\n"
                                "matrix:\n  fast_cache: [none, 64M]\n")
    study = read_study(spec)
    record = {"points": [{**point, "status": "ok", "run_id": f"run{point['point']}"} for point in points(study)]}
    side = pd.DataFrame({"query": "q16", "run": ["run1", "run2"], "elapsed_s": [20.0, 8.0]})
    assert fastest(study, record, side).to_dict("records") == [
        {"query": "q16", "engine": "mariadb", "fastest fast_cache": "64M", "fastest_s": 8.0, "default fast_cache": "none",
         "default_s": 20.0, "default_over_fastest": 2.5}]


def test_a_failed_point_s_error_is_this_attempt_s_not_an_earlier_one_s_in_its_log(tmp_path, monkeypatch):
    # the point's first attempt failed bringing the tiers up; its resumed run is interrupted
    run_dir = tmp_path / "20261126T184210Z_mariadb_ssb-sf1_None"
    run_dir.mkdir()
    (run_dir / "manifest.json").write_text(json.dumps({"status": "partial"}))
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "point-009.log").write_text('fatal: [localhost]: FAILED! => {"msg": "Bring the tiers up"}\n')
    playbook = tmp_path / "ansible-playbook"
    playbook.write_text("#!/bin/sh\necho 'TASK [datagen : Keep the list]'\necho '[ERROR]: User interrupted execution'\nexit 99\n")
    playbook.chmod(0o755)
    monkeypatch.setattr(study, "ANSIBLE_PLAYBOOK", playbook)
    point = {"point": 9, "repetition": 1, "variables": {"layout": "None"}}
    result = study.run_point({"workload": "ssb"}, point, tmp_path, "localhost", None, run_dir.name, {}, print)
    assert (result["status"], result["run_id"]) == ("partial", run_dir.name)
    assert result["error"] == f"[ERROR]: User interrupted execution (log: {tmp_path / 'logs' / 'point-009.log'})"


def fake_playbook(tmp_path, monkeypatch):
    """An ansible-playbook that makes (or, resuming, finishes) an ok run of its point in the study's directory,
    named for the point's variables, and notes each call's variables."""
    playbook = tmp_path / "ansible-playbook"
    playbook.write_text(f"""#!/usr/bin/env python3
import json, pathlib, sys
variables = json.loads(sys.argv[sys.argv.index("-e") + 1])
with open({str(tmp_path / "calls")!r}, "a") as calls:
    calls.write(json.dumps(variables) + "\\n")
run = pathlib.Path(variables["results_dir"]) / variables.get("resume", f"new-{{variables['layout']}}-{{variables['join_plan']}}")
(run / "config").mkdir(parents=True, exist_ok=True)
(run / "config" / "run.json").write_text(json.dumps({{"host": {{"name": "localhost"}}, "settings": {{}}}}))
(run / "manifest.json").write_text(json.dumps({{"status": "ok"}}))
""")
    playbook.chmod(0o755)
    monkeypatch.setattr(study, "ANSIBLE_PLAYBOOK", playbook)
    return lambda: [json.loads(line) for line in (tmp_path / "calls").read_text().splitlines()]


def recorded(tmp_path, study_spec: dict, records: list[dict]) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "study.json").write_text(json.dumps({"schema_version": 1, "study_id": "s", "study": study_spec,
                                                           "extra_vars": {}, "points": records}))


def test_a_point_run_again_has_a_new_run_in_its_place_and_keeps_the_earlier_one_as_superseded(tmp_path, monkeypatch):
    study_spec = read_study(study_file(tmp_path, STUDY))
    earlier = [{**p, "host": "localhost", "status": "ok", "run_id": f"run-{p['point']}", "error": None, "seconds": 1.0}
               for p in points(study_spec)]
    recorded(tmp_path, study_spec, earlier)
    calls = fake_playbook(tmp_path, monkeypatch)
    out = io.StringIO()
    record = run_study(study_spec, tmp_path / "s", {}, out=out, again=frozenset({2}))
    # the only call runs point 2 anew (no resume of its ok run)
    assert [(call["layout"], call["join_plan"], "resume" in call) for call in calls()] == [("None", "hash", False)]
    assert out.getvalue().splitlines()[0] == "point 2 of 6: layout=None join_plan=hash"
    again = record["points"][1]
    assert (again["run_id"], again["status"], again["superseded"]) == ("new-None-hash", "ok", [earlier[1]])
    assert record["points"][:1] + record["points"][2:] == earlier[:1] + earlier[2:]
    assert json.loads((tmp_path / "s" / "study.json").read_text())["points"] == record["points"]


def test_a_point_run_again_that_failed_is_resumed_and_still_lists_the_run_it_superseded(tmp_path, monkeypatch):
    study_spec = read_study(study_file(tmp_path, STUDY))
    first = {**points(study_spec)[0], "host": "localhost", "status": "ok", "run_id": "run-1", "error": None,
             "seconds": 1.0}
    recorded(tmp_path, study_spec, [{**first, "status": "partial", "run_id": "new-None-optimizer", "superseded": [first]}])
    calls = fake_playbook(tmp_path, monkeypatch)
    record = run_study(study_spec, tmp_path / "s", {}, out=io.StringIO(), stop_after=None, again=frozenset())
    assert calls()[0]["resume"] == "new-None-optimizer"
    resumed = record["points"][0]
    assert (resumed["run_id"], resumed["status"], resumed["superseded"]) == ("new-None-optimizer", "ok", [first])


def test_again_names_only_points_the_study_has(tmp_path):
    study_spec = read_study(study_file(tmp_path, STUDY))
    recorded(tmp_path, study_spec, [])
    with pytest.raises(InputError) as err:
        run_study(study_spec, tmp_path / "s", {}, out=io.StringIO(), again=frozenset({7, 2}))
    assert str(err.value) == f"--again 7: {tmp_path / 's'} has points 1 to 6"


def test_a_study_given_points_runs_those_only_and_a_resume_runs_the_rest(tmp_path, monkeypatch):
    study_spec = read_study(study_file(tmp_path, STUDY))
    calls = fake_playbook(tmp_path, monkeypatch)
    record = run_study(study_spec, tmp_path / "s", {}, out=io.StringIO(), only=frozenset({2, 5}))
    assert [(call["layout"], call["join_plan"]) for call in calls()] == [("None", "hash"), ("ALL", "hash")]
    assert [(point["point"], point["status"]) for point in record["points"]] == [(2, "ok"), (5, "ok")]
    assert "ended_at" not in record
    record = run_study(study_spec, tmp_path / "s", {}, out=io.StringIO())
    assert [point["point"] for point in record["points"]] == [1, 2, 3, 4, 5, 6]
    assert len(calls()) == 6


def test_points_name_only_points_the_study_has(tmp_path):
    study_spec = read_study(study_file(tmp_path, STUDY))
    with pytest.raises(InputError) as err:
        run_study(study_spec, tmp_path / "s", {}, out=io.StringIO(), only=frozenset({9, 2}))
    assert str(err.value) == f"--points 9: {tmp_path / 's'} has points 1 to 6"


@pytest.mark.parametrize("args,said", [
    (["--again", "2"], "--again runs points of a study that ran: give it with --resume results/<study_id>"),
    (["--resume", "S", "--again", "8,x"], "--again '8,x': give the numbers of the points, as study.json and the "
                                          "study's output number them, joined by commas, a range as its first and "
                                          "last, e.g. 8,16 or 29-42"),
    (["--points", "5-3"], "--points '5-3': give the numbers of the points, as study.json and the study's output number "
                          "them, joined by commas, a range as its first and last, e.g. 8,16 or 29-42"),
])
def test_again_without_resume_or_with_other_than_point_numbers_is_refused(tmp_path, args, said):
    recorded(tmp_path, read_study(study_file(tmp_path, STUDY)), [])
    given = [str(tmp_path / "s") if arg == "S" else arg for arg in args]
    with pytest.raises(SystemExit) as exit:
        main(["study", *([] if "--resume" in given else [str(study_file(tmp_path, STUDY))]), *given])
    assert exit.value.code == f"tierlab study: {said}"


def a_run(run_dir, statuses: list[str]) -> None:
    """A run that ended ok with two tries of q01 expected, and a row per try with the statuses given."""
    (run_dir / "raw").mkdir(parents=True)
    rows = [{"query": "q01", "try": number, "status": status} for number, status in enumerate(statuses, 1)]
    (run_dir / "raw" / "queries.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    by_status = {status: statuses.count(status) for status in statuses}
    (run_dir / "manifest.json").write_text(json.dumps({"status": "ok", "queries": {
        "expected_tries": 2, "recorded_tries": len(statuses), "by_status": by_status}}))


@pytest.mark.parametrize(("statuses", "status", "error"), [
    (["ok", "error"], "failed", "1 of 2 tries failed, with no try in their place (q01_try2: tables/queries.csv says "
                                "why); --resume runs them again"),
    (["error", "error"], "failed", "2 of 2 tries failed, with no try in their place (q01_try1, q01_try2: "
                                   "tables/queries.csv says why); --resume runs them again"),
    (["ok", "timeout"], "ok", None),
    (["error", "ok", "ok"], "ok", None)])
def test_a_point_is_ok_when_each_of_its_tries_has_a_try_that_did_not_fail(tmp_path, statuses, status, error):
    a_run(tmp_path / "run-1", statuses)
    playbook = tmp_path / "ansible-playbook"
    playbook.write_text("#!/bin/sh\nexit 0\n")
    playbook.chmod(0o755)
    point = {"point": 1, "repetition": 1, "variables": {"layout": "None"}}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(study, "ANSIBLE_PLAYBOOK", playbook)
        result = study.run_point({"workload": "tpch"}, point, tmp_path, "localhost", None, "run-1", {}, print)
    log = tmp_path / "logs" / "point-001.log"
    assert (result["status"], result["error"]) == (status, error and f"{error} (log: {log})")


def test_a_resume_runs_again_the_failed_tries_of_a_point_recorded_ok(tmp_path, monkeypatch):
    study_spec = read_study(study_file(tmp_path, STUDY))
    recorded(tmp_path, study_spec, [{**p, "host": "localhost", "status": "ok", "run_id": f"run-{p['point']}",
                                     "error": None, "seconds": 1.0} for p in points(study_spec)])
    a_run(tmp_path / "s" / "run-1", ["ok", "error"])
    calls = fake_playbook(tmp_path, monkeypatch)
    record = run_study(study_spec, tmp_path / "s", {}, out=io.StringIO(), stop_after=None, again=frozenset())
    # only point 1, whose run lacks a try, runs: its run resumed with its failed try run again
    assert [(call["resume"], call["retry_failed"]) for call in calls()] == [("run-1", True)]
    assert (record["points"][0]["status"], record["points"][0]["run_id"]) == ("ok", "run-1")
    assert "superseded" not in record["points"][0]
