"""The lead of a run's report: where the I/O time goes, what on the capacity tier to move, the run's caveats."""

import pandas as pd
import pytest
from object_frames import CAPACITY, GIB, SIZED, TWO_STEPS, layout, metrics

from tierlab.report.lead import (
    caveats,
    lead,
    observation_caveats,
    plot_top_objects,
    recommend_options,
    what_to_move,
    where_time_goes,
)
from tierlab.report.objects import object_io
from tierlab.report.run import write_run_report
from tierlab.runs.analyze import analyze
from tierlab.runs.results import load_run
from tiny_run import line, make_run, read

ROLES = {"optane": "fast", "nand": "capacity"}
TIERS = [{"name": "optane", "role": "fast"}, {"name": "nand", "role": "capacity"}]
RUN_ID = "20261123T092837Z_mariadb_tpch-sf0.1_C+O"


def queries(*rows) -> pd.DataFrame:
    """queries rows: (query, try), ok with a complete trace unless a row gives (status, trace_complete) after them."""
    full = [(*row, "ok", True) if len(row) == 2 else row for row in rows]
    return pd.DataFrame(full, columns=["query", "try", "status", "trace_complete"])


def test_the_lead_names_the_objects_that_hold_most_of_the_io_time_with_their_tier_and_pattern():
    assert where_time_goes(object_io(TWO_STEPS, {}), ROLES, 2, 6.6) == [
        "The run's 2 steps spent 10 s in I/O, summed over the objects they read and wrote (each object's time with "
        "a request in flight, measured, on tiers dilated 6.6x).",
        "Most of it went to lineitem on nand (capacity tier): 50% (5 s), random repeated (100% of its time); then "
        "orders on optane (fast tier): 30% (3 s), random repeated (100% of its time).",
        "The other object holds 10%; requests of no object (other) 10%."]


def test_the_lead_names_at_most_five_objects():
    objects = object_io(metrics(*[("q1", 1, f"t{n}", "nand", 1.0) for n in range(10)]), {})
    named = where_time_goes(objects, ROLES, 1, None)[1]
    assert [name for name in (f"t{n} on" for n in range(10)) if name in named] == ["t0 on", "t1 on", "t2 on",
                                                                                   "t3 on", "t4 on"]


def test_the_objects_named_hold_most_of_the_objects_time_however_much_the_requests_of_no_object_hold():
    objects = object_io(metrics(("q1", 1, "lineitem", "nand", 40.0), ("q1", 1, "orders", "optane", 20.0),
                                ("q1", 1, "customer", "optane", 10.0), ("q1", 1, "other", "nand", 30.0)), {})
    assert where_time_goes(objects, ROLES, 1, None)[1:] == [
        "Most of it went to lineitem on nand (capacity tier): 40% (40 s), random repeated (100% of its time); then "
        "orders on optane (fast tier): 20% (20 s), random repeated (100% of its time).",
        "The other object holds 10%; requests of no object (other) 30%."]


HUNDREDS = metrics(("q1", 1, "big", "nand", 50.0), ("q1", 1, "second", "optane", 20.0),
                   ("q1", 1, "third", "nand", 15.0), ("q1", 1, "other", "nand", 0.2),
                   *[("q1", 1, f"index{n:03}", "optane", 0.05) for n in range(296)])


def test_a_run_of_hundreds_of_objects_names_the_top_ones_and_says_what_the_rest_hold():
    lines = where_time_goes(object_io(HUNDREDS, {}), ROLES, 1, None)
    assert lines[1].startswith("Most of it went to big on nand (capacity tier): 50% (50 s), ")
    assert "; then third on nand (capacity tier): 15% (15 s), " in lines[1]
    assert lines[2] == "The 296 other objects hold 15%; requests of no object (other) 0.2%."


def test_the_chart_shows_the_top_fifteen_objects_and_what_they_hold():
    chart = plot_top_objects(object_io(HUNDREDS, {}), ROLES)
    assert "The 15 objects with the most I/O time, of 299 (86% of it; requests of no object 0.2%)" in chart
    assert "index011 (optane)" in chart and "index012 (optane)" not in chart


def test_what_to_move_says_what_the_candidates_hold_and_points_to_recommend_with_a_size():
    sized = layout(lineitem=("capacity", GIB, GIB), partsupp=("capacity", GIB // 4, GIB // 4),
                   part=("capacity", 2**20, 2**20), nation=("capacity", 4096, 4096),
                   orders=("fast", 100 * 2**20, 100 * 2**20))
    lines, _ = what_to_move(object_io(CAPACITY, sized), ROLES, sized, RUN_ID)
    assert lines == [
        "On the capacity tier, the objects that hold the most I/O time per GiB: part (1 s, 10%, 1024 s per GiB of "
        "its 1.0 MiB); partsupp (2 s, 20%, 8 s per GiB of its 256.0 MiB); lineitem (6 s, 60%, 6 s per GiB of its "
        "1.00 GiB).",
        "The other object there holds 0.5%.",
        f"`tierlab recommend results/{RUN_ID} --fast-capacity 1381M` predicts the time of the best layout for a fast "
        "tier that holds what it holds now and these objects' tables, and its capacity curve other sizes: the gain is its "
        "prediction; this report computes none."]


def test_objects_of_unknown_size_are_said_to_come_after_those_of_known_size():
    lines, _ = what_to_move(object_io(CAPACITY, SIZED), ROLES, SIZED, RUN_ID)
    assert lines[0] == (
        "On the capacity tier, the objects that hold the most I/O time per GiB (those of unknown size after them, by "
        "their I/O time): partsupp (2 s, 20%, 8 s per GiB of its 256.0 MiB); lineitem (6 s, 60%, 6 s per GiB of its "
        "1.00 GiB); part (1 s, 10%, size unknown).")


def test_recommend_is_given_no_size_where_a_candidate_s_table_has_none():
    lines, _ = what_to_move(object_io(CAPACITY, SIZED), ROLES, SIZED, RUN_ID)
    assert lines[-1].startswith(f"`tierlab recommend results/{RUN_ID} --fast-capacity SIZE` predicts")


def test_nothing_is_to_move_when_no_object_of_the_capacity_tier_holds_one_percent():
    objects = object_io(metrics(("q1", 1, "orders", "optane", 99.5), ("q1", 1, "nation", "nand", 0.5)), {})
    assert what_to_move(objects, ROLES, {}, RUN_ID)[0] == [
        "No object on the capacity tier holds 1.0% of the I/O time or more; together they hold 0.5%."]


# a run with no caveat: two tries of each step, every one ok with its whole trace, requests of no object 5% of the
# I/O time, faithful tiers
CLEAN_METRICS = metrics(("q1", 1, "lineitem", "nand", 19.0), ("q1", 1, "other", "nand", 1.0),
                        ("q1", 2, "lineitem", "nand", 19.0), ("q1", 2, "other", "nand", 1.0))
CLEAN_QUERIES = queries(("q1", 1), ("q1", 2), ("q2", 1), ("q2", 2))
CLEAN_COUNTS = pd.DataFrame({"query": ["q1", "q1"], "try": [1, 2], "lost_events": [0, 0], "lost_pages": [0, 0]})
FAITHFUL = {"tiers": TIERS, "tiers_check": {"fidelity": {"verdict": "faithful", "tiers": {"optane": "faithful",
                                                                                            "nand": "faithful"}}}}


def found(manifest=FAITHFUL, table_metrics=CLEAN_METRICS, query_rows=CLEAN_QUERIES, counts=CLEAN_COUNTS) -> list[str]:
    return caveats(manifest, query_rows, counts, object_io(table_metrics, {}))


def test_a_run_with_nothing_to_warn_of_has_no_caveat():
    assert found() == []


def test_a_window_cut_short_is_a_caveat():
    assert found(query_rows=queries(("q1", 1, "ok", False), ("q1", 2), ("q2", 1), ("q2", 2))) == [
        "The traces of q1 try 1 were cut short (no end marker): their figures miss the requests after the cut "
        "(tables/queries.csv, trace_complete)."]


def test_a_trace_that_lost_events_is_a_caveat():
    counts = CLEAN_COUNTS.assign(lost_events=[0, 12])
    assert found(counts=counts) == ["Suspect traces: q1 try 2: 12 events lost by the tracer (their requests are "
                                    "missing) (tables/trace_counts.csv)."]


def test_a_step_that_did_not_end_ok_is_a_caveat():
    assert found(query_rows=queries(("q1", 1), ("q1", 2), ("q2", 1), ("q2", 2, "timeout", True))) == [
        "q2 try 2 (timeout) did not end ok: the run's figures miss what it would have read and written "
        "(tables/queries.csv, status and error)."]


def test_requests_of_no_object_above_five_percent_of_the_io_time_are_a_caveat():
    table_metrics = CLEAN_METRICS.assign(io_time_s=[9.0, 1.0, 9.0, 1.0])
    assert found(table_metrics=table_metrics) == [
        "10% of the I/O time is of requests of no object (other: logs, temporary files, the system tablespace, or "
        "files the extent map missed), which the objects' ranking does not hold (tables/table_metrics.csv)."]


def test_emulated_tiers_not_faithful_are_a_caveat():
    degraded = {"tiers": TIERS, "tiers_check": {"fidelity": {"verdict": "not faithful", "tiers": {
        "optane": "not faithful", "nand": "faithful"}}}}
    assert found(manifest=degraded) == [
        "The emulated tiers of this run were not faithful (optane not faithful): their measured contrasts differ "
        "from the device models' by more than 20%, so times on them do not stand for the modelled devices; "
        "\"Tiers' fidelity\" gives the reasons (manifest.json, tiers_fidelity)."]


def test_tiers_without_a_self_check_are_no_caveat():
    assert found(manifest={"tiers": TIERS, "tiers_check": None}) == []


def test_a_run_of_single_tries_is_a_caveat():
    assert found(query_rows=queries(("q1", 1), ("q2", 1))) == [
        "Every step ran once: nothing shows how much their figures vary from try to try (tables/queries.csv)."]


def test_the_steps_tried_once_in_a_run_of_several_tries_are_named():
    assert found(query_rows=queries(("q1", 1), ("q1", 2), ("q2", 1))) == [
        "q2 ran once: nothing shows how much its figures vary from try to try (tables/queries.csv)."]


def test_an_observation_s_intervals_had_once_are_no_caveat():
    observed = {**FAITHFUL, "workload": {"name": "observed"}}
    assert found(manifest=observed, query_rows=queries(("i0001", 1), ("i0002", 1))) == []


def test_an_observation_s_warnings_and_its_tracing_cost_are_caveats():
    tables = {"observation_warnings": pd.DataFrame([{"warning": "the instance did no work in the window",
                                                      "evidence": "tables/intervals.csv work_per_s"}]),
              "observation": pd.DataFrame([{"untraced_intervals": 2, "untraced_work_per_s": 100.0,
                                            "traced_work_per_s": 97.0, "overhead_pct": 3.0}])}
    assert observation_caveats(tables) == [
        "The instance did no work in the window (tables/intervals.csv work_per_s).",
        "Tracing cost the instance 3.0% of its rate of work, measured on its own traffic in 2 untraced interval(s) "
        "against their traced neighbours; a negative figure is the traffic's own variation (tables/observation.csv)."]


def test_recommend_is_told_the_profiles_of_real_devices_and_an_observed_instance_s_fast_location():
    real = [{"name": "sdb", "role": "capacity"}]
    modelled = [{**tier, "profile": {"text": "name = 'nand'"}} for tier in TIERS]
    assert recommend_options({"tiers": modelled}) == ""
    assert recommend_options({"tiers": real, "workload": {"name": "tpch"}, "engine": {"name": "postgresql"}}) == \
        " --profiles fast=PROFILE,capacity=PROFILE"
    assert recommend_options({"tiers": real, "workload": {"name": "observed"}, "engine": {"name": "postgresql"}}) == \
        " --profiles fast=PROFILE,capacity=PROFILE --fast-location DIR"


def test_a_run_without_traced_requests_says_so_and_still_gives_its_caveats():
    sections, md, _ = lead({"tiers": TIERS}, {"table_metrics": pd.DataFrame(), "queries": queries(("q1", 1))})
    assert md == ["## Where the I/O time goes", "",
                  "No step of this run has traced requests (tables/table_metrics.csv is empty): there is no I/O time "
                  "to share out.", "", "## Caveats", "",
                  "- Every step ran once: nothing shows how much its figures vary from try to try (tables/queries.csv).",
                  ""]


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[str, str, str]:
    """A one-query run of lineitem on the capacity tier, analyzed and reported: its id, report.html, summary.md."""
    tmp_path = tmp_path_factory.mktemp("lead")
    run = make_run(tmp_path, line(1.0, "tracing_mark_write: tierlab start q03_try1") + read(1.1, 0) + read(1.2, 32)
                   + line(1.3, "tracing_mark_write: tierlab end q03_try1"))
    manifest = {"run_id": run.name, "engine": {"name": "mariadb"}, "tiers": [{"name": "nand", "role": "capacity"}]}
    write_run_report(tmp_path / "report", manifest, analyze(load_run(run)))
    return run.name, (tmp_path / "report" / "report.html").read_text(), (tmp_path / "report" / "summary.md").read_text()


def test_the_report_leads_with_the_answer_then_the_tables(report):
    _, page, _ = report
    order = ["<h2>Where the I/O time goes</h2>", "<svg", "<h2>What to move</h2>", "<h2>Caveats</h2>", "<h2>Run</h2>",
             "<h2>Queries</h2>", "<h2>Objects</h2>", "<details><summary>q03 try 1: "]
    assert [page.index(heading) for heading in order] == sorted(page.index(heading) for heading in order)


def test_the_summary_leads_with_the_answer(report):
    run_id, _, summary = report
    assert summary.startswith(f"# tierlab run {run_id}\n\n## Where the I/O time goes\n\nThe run's 1 step spent ")


def test_each_step_s_objects_are_folded_into_its_line(report):
    _, page, _ = report
    assert "<td>lineitem</td>" in page[page.index("<details>"):page.index("</details>")]


def test_the_report_gives_the_recommend_command_as_code_with_profiles_for_its_real_device(report):
    run_id, page, _ = report
    assert (f"<code>tierlab recommend results/{run_id} --fast-capacity SIZE --profiles fast=PROFILE,capacity=PROFILE"
            "</code>") in page
