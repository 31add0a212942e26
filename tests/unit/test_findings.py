"""The findings page: its sentences from a study's figures, and the committed page written again, the same, from
the committed tables under docs/findings/."""

import json
from pathlib import Path

import pandas as pd
import pytest

from tierlab.errors import InputError
from tierlab.report.findings import write_findings_page
from tierlab.runs.results import READ_VERSIONS
from tierlab.studies.findings import (
    _queries,
    _recommended,
    answers,
    engine_contrasts,
    figures_table,
    gather,
    recommend_lines,
    study_findings,
    ties,
    write_gathered,
)
from tierlab.studies.published import carry_published
from tierlab.studies.setup import setup_line
from tierlab.studies.study import SCHEMA_VERSION

DOCS = Path(__file__).resolve().parents[2] / "docs"


def figures(rows: list[tuple]) -> pd.DataFrame:
    """_figures' frame from (engine, layout, query, seconds, category, plan)."""
    return pd.DataFrame([{"engine": engine, "layout": layout, "query": query, "figure": seconds, "low": seconds,
                          "high": seconds, "runs": 1, "sequential_pct": 50.0, "repeat_access_rate": 1.0,
                          "category": category, "plan": plan}
                         for engine, layout, query, seconds, category, plan in rows])


TWO_ENGINES = figures([
    ("mariadb", "None", "q01", 10.0, "1 random repeated", "orders index lookup (PRIMARY)"),
    ("mariadb", "ALL", "q01", 2.0, "1 random repeated", "orders index lookup (PRIMARY)"),
    ("mariadb", "None", "q02", 4.0, "3 sequential", "lineitem table scan"),
    ("mariadb", "ALL", "q02", 4.0, "3 sequential", "lineitem table scan"),
    ("postgresql", "None", "q01", 6.0, "3 sequential", "orders table scan"),
    ("postgresql", "ALL", "q01", 4.0, "3 sequential", "orders table scan"),
    ("postgresql", "None", "q02", 3.0, "3 sequential", "lineitem table scan"),
    ("postgresql", "ALL", "q02", 2.0, "3 sequential", "lineitem table scan"),
])


def test_the_answer_names_the_fastest_value_its_speedup_over_the_first_and_the_speedup_by_category():
    assert answers(TWO_ENGINES, "layout", ["None", "ALL"], ["engine"], "s") == [
        "engine=mariadb: layout=ALL ran its 2 queries in 6 s, 2.33x as fast as layout=None (14 s); per query "
        "1.00x (q02) to 5.00x (q01). By category at layout=None: 1 random repeated 5.00x (1), 3 sequential 1.00x (1)",
        "engine=postgresql: layout=ALL ran its 2 queries in 6 s, 1.50x as fast as layout=None (9 s); per query "
        "1.50x each. By category at layout=None: 3 sequential 1.50x (2)"]


def test_where_the_first_value_is_fastest_the_answer_sets_it_against_the_next_best():
    slower = TWO_ENGINES[TWO_ENGINES["engine"] == "mariadb"].assign(
        figure=[10.0, 20.0, 4.0, 8.0])
    assert answers(slower, "layout", ["None", "ALL"], ["engine"], "s")[0].startswith(
        "engine=mariadb: layout=None ran its 2 queries in 14 s, 2.00x as fast as layout=ALL (28 s)")


def test_engines_apart_are_named_with_each_engine_s_speedup_category_and_plan():
    assert engine_contrasts(TWO_ENGINES, "layout", ["None", "ALL"], ["engine"], "s") == [
        "q01: mariadb 5.00x (1 random repeated; plan: orders index lookup (PRIMARY)); postgresql 1.50x "
        "(3 sequential; plan: orders table scan)",
        "q02: mariadb 1.00x (3 sequential; plan: lineitem table scan); postgresql 1.50x (3 sequential; plan: "
        "lineitem table scan)"]


def test_a_query_whose_every_try_timed_out_keeps_its_row_with_the_seconds_its_quickest_try_was_stopped_after(
        tmp_path):
    tables = tmp_path / "run" / "tables"
    tables.mkdir(parents=True)
    (tables / "queries.csv").write_text(
        "query,try,status,error,elapsed_s\n"
        "q14,1,ok,,7.5\n"
        "q15,1,timeout,client killed after 1803.2 s,1803.2\n"
        "q15,2,timeout,client killed after 1802.1 s,1802.1\n"
        "q16,1,ok,,3.0\n"
        "q16,2,timeout,client killed after 1801.0 s,1801.0\n")
    (tables / "query_metrics.csv").write_text("")
    (tables / "plan_accesses.csv").write_text("")
    rows = _queries(tmp_path, "run").set_index("query")
    assert rows["tries"].to_dict() == {"q14": 1, "q15": 0, "q16": 1}
    assert rows["elapsed_s"].fillna(-1).to_dict() == {"q14": 7.5, "q15": -1, "q16": 3.0}
    # q16 has a time: its timed-out try is not a bound on it
    assert rows["timed_out_after_s"].fillna(-1).to_dict() == {"q14": -1, "q15": 1802.1, "q16": -1}


# MariaDB's Q15 at SF 1 on the capacity tier: every try stopped at the 1800 s timeout
TIMED_OUT = pd.concat([TWO_ENGINES[TWO_ENGINES["engine"] == "mariadb"].assign(timed_out_after_s=float("nan")),
                       figures([("mariadb", "None", "q15", float("nan"), "", ""),
                                ("mariadb", "ALL", "q15", 640.0, "2 random", "lineitem index scan (lineitem_suppkey)")])
                       .assign(timed_out_after_s=[1802.1, float("nan")])], ignore_index=True)


def test_a_query_that_timed_out_is_left_out_of_the_answer_s_totals_and_named_with_its_bound():
    assert answers(TIMED_OUT, "layout", ["None", "ALL"], ["engine"], "s") == [
        "engine=mariadb: layout=ALL ran its 2 queries in 6 s, 2.33x as fast as layout=None (14 s); per query "
        "1.00x (q02) to 5.00x (q01). By category at layout=None: 1 random repeated 5.00x (1), 3 sequential 1.00x "
        "(1). Left out, timed out: q15 at layout=None (over 1802 s)"]


def test_the_figures_table_shows_a_timed_out_query_s_bound_and_its_speedup_as_at_least_the_bound_s():
    table = figures_table(TIMED_OUT, "layout", ["None", "ALL"], ["engine"], "s").set_index("query")
    assert table.loc["q15", ["layout=None (s)", "layout=ALL (s)", "ALL vs None"]].tolist() == [
        "over 1802 (timed out)", "640", "over 2.82x"]
    assert table.loc["q01", "ALL vs None"] == "5.00x"


def test_a_sysbench_study_is_answered_per_test_by_its_transactions_per_second():
    tps = figures([("mariadb", "16k", "oltp_read_only", 100.0, "2 random", ""),
                   ("mariadb", "4k", "oltp_read_only", 250.0, "2 random", "")]).rename(columns={"layout": "page_size"})
    assert answers(tps, "page_size", ["16k", "4k"], ["engine"], "tps") == [
        "engine=mariadb, oltp_read_only: page_size=4k ran most, 250 tps, 2.50x page_size=16k's"]


def test_a_sysbench_test_that_ran_at_one_value_only_is_too_few_to_compare():
    tps = figures([("mysql", "16k", "oltp_read_only", 599.0, "2 random", "")]).rename(columns={"layout": "page_size"})
    assert answers(tps, "page_size", ["4k", "16k"], ["engine"], "tps") == [
        "engine=mysql, oltp_read_only: too few runs ok to compare page_size (only page_size=16k, 599 tps)"]


def test_the_committed_findings_page_is_written_again_the_same_from_the_committed_tables(tmp_path):
    write_findings_page(DOCS / "findings", tmp_path)
    assert (tmp_path / "findings.md").read_text() == (DOCS / "findings.md").read_text()
    assert (tmp_path / "findings.html").read_text() == (DOCS / "findings.html").read_text()


def test_a_sysbench_study_s_tables_without_plans_or_access_patterns_make_its_findings():
    study = {"name": "e4-threads", "workload": "sysbench", "variables": {}, "matrix": {"threads": ["1", "4"]},
             "repetitions": 1}
    tables = {"study": {"study_id": "20261128T000000Z_e4-threads", "study": study, "started_at": "then",
                        "ended_at": None, "points": 2, "ok": 2, "unanswered": []},
              "runs": pd.DataFrame({"point": [1, 2], "repetition": [1, 1], "status": ["ok", "ok"],
                                    "run_id": ["run-1", "run-4"], "threads": ["1", "4"]}),
              "queries": pd.DataFrame({"query": ["oltp_read_only"] * 2, "run_id": ["run-1", "run-4"],
                                       "elapsed_s": [60.0, 60.0], "tps": [100.0, 300.0], "tries": [1, 1],
                                       "elapsed_min_s": [60.0, 60.0], "elapsed_max_s": [60.0, 60.0]})}
    found = study_findings(tables)
    assert found["answers"] == ["the study, oltp_read_only: threads=4 ran most, 300 tps, 3.00x threads=1's"]
    assert found["table"].columns.tolist() == ["query", "threads=1 (tps)", "threads=4 (tps)", "4 vs 1", "category",
                                                "sequential %", "repeat access", "plan"]


def test_where_the_first_value_has_no_ok_run_the_answer_sets_the_best_against_the_first_that_ran():
    three = figures([("mariadb", layout, "q01", seconds, "2 random", "") for layout, seconds in
                     (("C", 4.0), ("ALL", 2.0))])
    assert answers(three, "layout", ["None", "C", "ALL"], ["engine"], "s")[0].startswith(
        "engine=mariadb: layout=ALL ran its 1 queries in 2 s, 2.00x as fast as layout=C (4 s)")


def test_a_predicted_layout_ties_the_fastest_when_its_quickest_run_is_no_slower_than_the_fastest_s_slowest():
    ranges = pd.DataFrame({"query": ["q10"] * 3, "layout": ["C+O", "C+N", "O"], "runs": [3, 3, 3],
                           "measured_min_s": [5.19, 5.36, 9.3], "measured_max_s": [5.44, 5.65, 9.6]})
    rows = pd.DataFrame({"query": ["q10"] * 3, "predicted_fastest": ["C+O", "C+N", "O"],
                         "measured_fastest": ["C+O"] * 3})
    assert ties(rows, ranges, []) == 2
    assert ties(rows, ranges.assign(runs=[3, 1, 3]), []) is None


def test_the_setup_says_which_points_ran_more_at_once_than_the_host_has_cpus():
    study = {"name": "e5-subqueries", "workload": "ssb", "variables": {"parallel_workers": "0"},
             "matrix": {"subqueries": ["1", "2", "4", "16"]}, "repetitions": 1}
    runs = pd.DataFrame({"point": [1, 2, 3, 4], "repetition": 1, "status": "ok", "run_id": ["r1", "r2", "r4", "r16"],
                         "subqueries": ["1", "2", "4", "16"], "engine": "postgresql", "engine_version": "15.14",
                         "buffer_pool": "5%", "buffer_pool_bytes": 80 << 20, "data_bytes": 1600 << 20,
                         "fidelity": "faithful", "dilation": 4.6, "scale_factor": "1", "host": "localhost", "cpus": 2,
                         "memory_bytes": 24 << 30, "kernel": "6.18"})
    tables = {"study": {"study_id": "s", "study": study, "started_at": "then", "ended_at": "now", "points": 4, "ok": 4,
                        "unanswered": []}, "runs": runs}
    assert ("host localhost: 2 CPUs, 24 GiB, kernel 6.18; subqueries 4, 16: more at once than the host's 2 CPUs, so "
            "those points measure CPU contention as well as the devices; 1 repetition(s)") in setup_line(tables)


def test_a_sysbench_setup_names_its_tables_and_the_engine_versions_of_the_runs_that_reached_their_engine():
    # a run that failed moving its tables (its fast tier full) recorded no engine version
    study = {"name": "e4-page-size", "workload": "sysbench", "variables": {"tables": 8, "table_size": 1000000},
             "matrix": {"engine": ["mariadb", "mysql"], "page_size": ["4k", "16k"]}, "repetitions": 1}
    runs = pd.DataFrame({"point": [1, 2, 3], "repetition": 1, "status": ["ok", "failed", "ok"], "run_id": ["a", "b", "c"],
                         "engine": ["mariadb", "mariadb", "mysql"], "page_size": ["4k", "16k", "4k"],
                         "engine_version": ["10.11.19-MariaDB", float("nan"), "9.7.4-2"], "buffer_pool": "32M",
                         "buffer_pool_bytes": 32 << 20, "data_bytes": 2000 << 20, "fidelity": "faithful",
                         "dilation": 5.0, "scale_factor": float("nan"), "host": "localhost", "cpus": 2,
                         "memory_bytes": 24 << 30, "kernel": "6.18"})
    tables = {"study": {"study_id": "s", "study": study, "started_at": "then", "ended_at": "now", "points": 4, "ok": 2,
                        "unanswered": []}, "runs": runs}
    assert setup_line(tables).startswith("sysbench with 8 tables of 1000000 rows; mariadb 10.11.19-MariaDB, mysql 9.7.4-2; ")
    # the catalog's defaults where the study file gives none
    study["variables"] = {}
    assert setup_line(tables).startswith("sysbench with 4 tables of 100000 rows; ")


def test_a_study_stopped_half_way_counts_its_points_against_the_whole_matrix(tmp_path):
    study = {"name": "e1-tpch-engines", "workload": "tpch", "variables": {"scale_factor": "1"},
             "matrix": {"engine": ["postgresql", "mariadb", "mysql"], "layout": ["None", "ALL"]}, "repetitions": 1}
    point = {"point": 1, "repetition": 1, "status": "failed", "run_id": None,
             "variables": {"scale_factor": "1", "engine": "postgresql", "layout": "None"}}
    (tmp_path / "study.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION, "study_id": "s", "study": study,
                                                      "started_at": "then", "ended_at": None, "points": [point]}))
    summary = gather(tmp_path)["study"]
    assert (summary["points"], summary["ok"]) == (6, 0)


def test_recommend_is_unanswered_for_each_engine_without_a_run_with_nothing_on_the_fast_tier(tmp_path):
    study = {"name": "e1-tpch-engines", "workload": "tpch", "variables": {"scale_factor": "1"},
             "matrix": {"engine": ["mariadb", "mysql"], "layout": ["None", "ALL"]}, "repetitions": 1}
    runs = pd.DataFrame({"point": [2, 4], "repetition": 1, "status": "ok", "run_id": ["m_ALL", "y_ALL"],
                         "engine": ["mariadb", "mysql"], "layout": "ALL", "data_bytes": 1600 << 20})
    for run_id in runs["run_id"]:
        (tmp_path / run_id).mkdir()
        (tmp_path / run_id / "manifest.json").write_text(json.dumps({
            "schema_version": max(READ_VERSIONS), "settings": {"layout": "ALL", "fast_cache_bytes": 0}}))
    found, missing = _recommended(tmp_path, study, runs)
    assert found == {}
    assert missing == [f"engine={engine}: no ok run with nothing on the fast tier (layout None, no cache) to ask "
                       "recommend from" for engine in ("mariadb", "mysql")]


def test_the_setup_says_how_long_the_study_s_runs_took_where_its_record_kept_their_seconds(tmp_path):
    study = {"name": "e4-threads", "workload": "sysbench", "variables": {}, "matrix": {"threads": ["1", "2"]},
             "repetitions": 1}
    failed = [{"point": number, "repetition": 1, "status": "failed", "run_id": None, "variables": {"threads": str(number)},
               "seconds": seconds} for number, seconds in ((1, 1510.4), (2, 289.6))]
    (tmp_path / "study.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION, "study_id": "s", "study": study,
                                                      "started_at": "then", "ended_at": "now", "points": failed}))
    summary = gather(tmp_path)["study"]
    assert summary["run_s"] == 1800.0
    runs = pd.DataFrame({"point": [1, 2, 3, 4], "repetition": 1, "status": "ok", "run_id": "a", "engine": "mariadb",
                         "threads": "1", "engine_version": "10.11.19-MariaDB", "buffer_pool": "32M",
                         "buffer_pool_bytes": 32 << 20, "data_bytes": 2000 << 20, "fidelity": "faithful",
                         "dilation": 5.0, "scale_factor": float("nan"), "host": "localhost", "cpus": 2,
                         "memory_bytes": 24 << 30, "kernel": "6.18"})
    tables = {"study": {**summary, "ok": 1}, "runs": runs}
    assert setup_line(tables).endswith("1 of 2 points ok; study s (then to now; its runs took 30 min)")
    # a summary committed before summaries carried run_s
    del tables["study"]["run_s"]
    assert setup_line(tables).endswith("1 of 2 points ok; study s (then to now)")


def test_the_setup_names_the_points_run_again_and_counts_the_runs_that_took_their_place(tmp_path):
    study = {"name": "e4-compression", "workload": "sysbench", "variables": {}, "matrix": {"compression": ["none", "page"]},
             "repetitions": 1}
    # point 2's first run was ok, its run again failed (the gathering reads no run directory)
    earlier = {"point": 2, "repetition": 1, "status": "ok", "run_id": "r2", "variables": {"compression": "page"},
               "seconds": 600.0}
    points = [{"point": 1, "repetition": 1, "status": "failed", "run_id": None, "variables": {"compression": "none"},
               "seconds": 300.0}, {**earlier, "status": "failed", "run_id": None, "seconds": 240.0, "superseded": [earlier]}]
    (tmp_path / "study.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION, "study_id": "s", "study": study,
                                                      "started_at": "then", "ended_at": "now", "points": points}))
    summary = gather(tmp_path)["study"]
    assert (summary["again"], summary["run_s"]) == ([2], 540.0)
    runs = pd.DataFrame({"point": [2], "repetition": 1, "status": "ok", "run_id": "a", "engine": "mariadb",
                         "compression": "page", "engine_version": "10.11.19-MariaDB", "buffer_pool": "32M",
                         "buffer_pool_bytes": 32 << 20, "data_bytes": 2000 << 20, "fidelity": "faithful",
                         "dilation": 5.0, "scale_factor": float("nan"), "host": "localhost", "cpus": 2,
                         "memory_bytes": 24 << 30, "kernel": "6.18"})
    assert setup_line({"study": {**summary, "ok": 1}, "runs": runs}).endswith(
        "1 of 2 points ok; study s (then to now; its runs took 9 min; point(s) 2 run again, their earlier runs "
        "superseded)")


def test_the_capacity_curve_names_the_ranges_of_capacities_where_a_cache_beats_placement():
    mib = 2**20
    advice = pd.DataFrame([{
        "engine": "postgresql", "run_id": "r1", "fast_capacity_bytes": 400 * mib, "layout": "C+O", "fast_bytes": 300 * mib,
        "predicted_s": 510.0, "traced_layout": "None", "traced_s": 668.0, "cache_predicted_s": 470.0,
        "cache_hit_pct": 44.0, "verdict": "cache", "migration_tables": "customer+orders", "migration_bytes": 300 * mib,
        "migration_s": 0.9}])
    verdicts = [(1, "placement"), (2, "cache"), (3, "cache"), (4, "cache"), (5, "placement"), (6, "cache"),
                (7, "placement"), (8, "cache"), (9, "cache")]
    curve = pd.DataFrame([{"engine": "postgresql", "capacity_bytes": size * mib, "verdict": verdict}
                          for size, verdict in reversed(verdicts)])
    tables = {"study": {"study": {"matrix": {"engine": ["postgresql"], "layout": ["None", "ALL"]}}},
              "recommend": advice, "cache_curve": curve}
    assert recommend_lines(tables)[1] == (
        "engine=postgresql: over the capacity curve (9 capacities), a cache beats the best placement that fits at 6 of "
        "them: 2.0 MiB to 4.0 MiB, 6.0 MiB, 8.0 MiB to 9.0 MiB")
    tables["cache_curve"] = curve.assign(verdict="placement")
    assert recommend_lines(tables)[1] == ("engine=postgresql: over the capacity curve (9 capacities), a cache beats "
                                          "the best placement that fits at none of them")


THREADS = {"name": "e4-threads", "workload": "sysbench", "variables": {"duration_s": "60"},
           "matrix": {"engine": ["mariadb", "postgresql"], "threads": ["1", "2"]}, "repetitions": 1}


def threads_tables(study_id: str, runs: dict[int, str], tps: dict[int, float]) -> dict:
    """A threads study's gathered tables: the points given with their runs (ok), the others not run; a test per
    run, and advise's rows per engine."""
    every = [("mariadb", "1"), ("mariadb", "2"), ("postgresql", "1"), ("postgresql", "2")]
    rows = [{"point": number, "repetition": 1, "status": "ok", "run_id": run, "engine": every[number - 1][0],
             "threads": every[number - 1][1], "host": "localhost"} for number, run in runs.items()]
    queries = pd.DataFrame([{"query": "oltp_read_only", "tps": tps[number], "run_id": run} for number, run in runs.items()])
    advice = pd.DataFrame([{"setting": "threads", "context": f"engine={every[number - 1][0]}", "step": "oltp_read_only",
                            "value": every[number - 1][1], "figure": tps[number], "runs": run}
                           for number, run in runs.items()])
    return {"study": {"study_id": study_id, "study": THREADS, "started_at": f"{study_id} start",
                      "ended_at": f"{study_id} end", "points": 4, "ok": len(runs), "run_s": 60.0 * len(runs),
                      "again": [], "unanswered": []},
            "runs": pd.DataFrame(rows), "queries": queries, "advice": advice}


def test_points_a_directory_did_not_run_keep_their_published_rows_and_say_where_they_ran(tmp_path):
    write_gathered(threads_tables("first", {1: "m1", 2: "m2", 3: "p1", 4: "p2"}, {1: 10, 2: 20, 3: 30, 4: 40}),
                   tmp_path)
    again = carry_published(threads_tables("second", {3: "p1b", 4: "p2b"}, {3: 33, 4: 44}), tmp_path)
    assert list(zip(again["runs"]["point"], again["runs"]["run_id"], strict=True)) == [
        (1, "m1"), (2, "m2"), (3, "p1b"), (4, "p2b")]
    # in the order of the points, as a directory that ran them all writes them
    assert list(zip(again["queries"]["run_id"], again["queries"]["tps"], strict=True)) == [
        ("m1", 10), ("m2", 20), ("p1b", 33), ("p2b", 44)]
    assert list(again["advice"]["runs"]) == ["m1", "m2", "p1b", "p2b"]
    assert (again["study"]["ok"], again["study"]["carried"]) == (4, [
        {"study_id": "first", "started_at": "first start", "ended_at": "first end", "run_s": 240.0, "points": [1, 2]}])
    out = write_gathered(again, tmp_path)
    assert json.loads((out / "study.json").read_text())["carried"][0]["points"] == [1, 2]
    # published again: a third directory whose points all failed carries each point from the study it ran in
    third = threads_tables("third", {3: "p1c"}, {3: 0})
    third["runs"]["status"] = "failed"
    third = carry_published({**third, "queries": third["queries"].iloc[0:0], "advice": third["advice"].iloc[0:0]},
                            tmp_path)
    assert list(third["runs"]["run_id"]) == ["m1", "m2", "p1b", "p2b"]
    assert [(part["study_id"], part["points"]) for part in third["study"]["carried"]] == [("first", [1, 2]),
                                                                                          ("second", [3, 4])]


E1 = {"name": "e1-tpch-engines", "workload": "tpch", "variables": {"scale_factor": "1"},
      "matrix": {"engine": ["postgresql", "mariadb"], "layout": ["None", "ALL"]}, "repetitions": 1}


def e1_tables(study_id: str, runs: dict[int, str], seconds: dict[str, float]) -> dict:
    """E1's gathered tables for the points given (ok): validate's per-layout table, whose runs is how many runs a
    layout had (not the runs' ids, as advice's is), and recommend's answer from each engine's run with layout None,
    whose layout is the answer (C+O), not the layout the run had."""
    every = [("postgresql", "None"), ("postgresql", "ALL"), ("mariadb", "None"), ("mariadb", "ALL")]
    points = {number: every[number - 1] for number in runs}
    rows = [{"point": number, "repetition": 1, "status": "ok", "run_id": run, "engine": points[number][0],
             "layout": points[number][1], "host": "localhost"} for number, run in runs.items()]
    return {"study": {"study_id": study_id, "study": E1, "started_at": f"{study_id} start",
                      "ended_at": f"{study_id} end", "points": 4, "ok": len(runs), "run_s": 60.0 * len(runs),
                      "again": [], "unanswered": []},
            "runs": pd.DataFrame(rows),
            "validation_layouts": pd.DataFrame([{"engine": engine, "query": "q01", "layout": layout, "runs": 1,
                                                 "measured_s": seconds[engine]} for engine, layout in points.values()]),
            "recommend": pd.DataFrame([{"engine": points[number][0], "run_id": run, "layout": "C+O",
                                        "predicted_s": seconds[points[number][0]]}
                                       for number, run in runs.items() if points[number][1] == "None"])}


def test_validate_s_and_recommend_s_rows_are_carried_with_the_points_they_rest_on(tmp_path):
    write_gathered(e1_tables("first", {1: "p1", 2: "p2"}, {"postgresql": 2.0}), tmp_path)
    again = carry_published(e1_tables("second", {3: "m1", 4: "m2"}, {"mariadb": 5.0}), tmp_path)
    layouts = again["validation_layouts"]
    assert list(zip(layouts["engine"], layouts["layout"], layouts["measured_s"], strict=True)) == [
        ("postgresql", "None", 2.0), ("postgresql", "ALL", 2.0), ("mariadb", "None", 5.0), ("mariadb", "ALL", 5.0)]
    assert list(zip(again["recommend"]["run_id"], again["recommend"]["predicted_s"], strict=True)) == [
        ("p1", 2.0), ("m1", 5.0)]


def test_the_setup_names_the_points_published_from_another_study_s_directory_and_each_kernel_s_points():
    runs = pd.DataFrame({"point": [1, 2, 3, 4], "repetition": 1, "status": "ok", "run_id": "a", "engine": "mariadb",
                         "threads": "1", "engine_version": "10.11.19-MariaDB", "buffer_pool": "32M",
                         "buffer_pool_bytes": 32 << 20, "data_bytes": 2000 << 20, "fidelity": "faithful",
                         "dilation": 5.0, "scale_factor": float("nan"), "host": "localhost", "cpus": 2,
                         "memory_bytes": 24 << 30, "kernel": ["6.18-a", "6.18-a", "6.18-b", "6.18-a"]})
    summary = {"study_id": "s", "study": THREADS, "started_at": "then", "ended_at": None, "points": 4, "ok": 4,
               "carried": [{"study_id": "first", "started_at": "before", "ended_at": "after", "run_s": 600.0,
                            "points": [1, 2, 4]}]}
    line = setup_line({"study": summary, "runs": runs})
    assert "24 GiB, kernels 6.18-a (points 1-2, 4), 6.18-b (point 3); " in line
    assert line.endswith(
        "4 of 4 points ok; point 3 in study s (from then, not ended); points 1-2, 4 published from study first "
        "(before to after; its runs took 10 min)")


def test_a_context_measured_partly_here_and_partly_in_the_published_points_is_refused(tmp_path):
    write_gathered(threads_tables("first", {1: "m1", 2: "m2", 3: "p1", 4: "p2"}, {1: 10, 2: 20, 3: 30, 4: 40}),
                   tmp_path)
    with pytest.raises(InputError) as err:
        carry_published(threads_tables("second", {3: "p1b"}, {3: 33}), tmp_path)
    assert str(err.value) == (
        f"{tmp_path / 'e4-threads'}: advice.csv's advice on threads at engine=postgresql (oltp_read_only) rests on runs "
        "of this directory and of the published points; run every point of that context in one directory (tierlab "
        "study --points), or the study whole")


def test_the_tables_of_another_study_of_the_same_name_are_not_carried(tmp_path):
    write_gathered(threads_tables("first", {1: "m1", 2: "m2", 3: "p1", 4: "p2"}, {1: 10, 2: 20, 3: 30, 4: 40}),
                   tmp_path)
    other = threads_tables("second", {3: "p1b", 4: "p2b"}, {3: 33, 4: 44})
    other["study"]["study"] = {**THREADS, "variables": {"duration_s": "120"}}
    assert carry_published(other, tmp_path) is other
