"""Which run directories tierlab reads, and those it refuses and why."""

import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tierlab.cli import main
from tierlab.errors import RunDirError
from tierlab.runs.analyze import analyze
from tierlab.runs.results import REQUEST_COLUMNS, load_run, request_chunks
from tiny_run import add_query, make_run, read


def run_dir(tmp_path, manifest_text: str):
    path = tmp_path / "20261123T092837Z_mariadb_tpch-sf0.1_C+O"
    (path / "config").mkdir(parents=True)
    (path / "manifest.json").write_text(manifest_text)
    return path


def test_a_run_of_an_unknown_schema_version_is_refused_with_what_to_do(tmp_path):
    path = run_dir(tmp_path, json.dumps({"schema_version": 4, "run_id": "x"}))
    with pytest.raises(RunDirError) as err:
        load_run(path)
    assert str(err.value) == (f"{path}: results schema_version 4 is not one this tierlab reads (it reads 1, 2, 3); read it "
                              "with the tierlab version that wrote it (versions.tierlab_git in its manifest)")


def test_a_run_in_the_format_before_engines_is_read(tmp_path):
    run = make_run(tmp_path, read(1.0, 64) + read(1.1, 96), schema_version=1)
    tables = analyze(load_run(run))
    assert tables["table_metrics"][["query", "object", "read_requests"]].values.tolist() == [["q03", "lineitem", 2]]
    assert tables["plan_accesses"].empty


def test_a_damaged_manifest_is_named_with_the_parse_error(tmp_path):
    path = run_dir(tmp_path, '{"schema_version": 2,')
    with pytest.raises(RunDirError) as err:
        load_run(path)
    assert str(err.value).startswith(f"{path}/manifest.json is not valid JSON (Expecting property name enclosed in "
                                     "double quotes: line 1 column 22 (char 21)); it was damaged after the run wrote it")


def test_a_damaged_query_row_is_named_by_its_file_and_line(tmp_path):
    run = make_run(tmp_path, read(1.0, 64))
    rows = run / "raw" / "queries.jsonl"
    rows.write_text(rows.read_text() + '{"query": "q05", "try": 1, "sta\n')
    with pytest.raises(RunDirError) as err:
        load_run(run)
    assert str(err.value) == (f"{rows}:2: not a query row (Unterminated string starting at: line 1 column 28 (char 27)): "
                              "each line is one JSON object as the query loop writes it; it was damaged after the run "
                              "wrote it (remove the line and resume the run to measure that query again)")


def test_a_last_row_torn_in_its_write_is_left_out_as_a_try_not_run(tmp_path):
    run = make_run(tmp_path, read(1.0, 64))
    rows = run / "raw" / "queries.jsonl"
    rows.write_text(rows.read_text() + '{"query": "q05", "try": 1, "sta')
    queries = load_run(run).queries
    assert list(zip(queries["query"], queries["try"], queries["status"], strict=True)) == [("q03", 1, "ok")]


def test_a_missing_trace_is_named_before_any_window_is_read(tmp_path):
    run = make_run(tmp_path, read(1.0, 64))
    add_query(run, "q05", read(2.0, 64))
    (run / "raw" / "traces" / "q05_try1.ftrace").unlink()
    (run / "tables").mkdir()
    with pytest.raises(RunDirError) as err:
        analyze(load_run(run), requests_path=run / "tables" / "requests.parquet")
    assert str(err.value) == (f"{run / 'raw' / 'traces'}: 1 trace file(s) that raw/queries.jsonl lists are missing "
                              "(q05_try1.ftrace): they were moved or deleted after the run; put them back, or remove "
                              "those tries' rows from raw/queries.jsonl and resume the run to measure them again")
    assert list((run / "tables").iterdir()) == []


def test_a_file_given_as_a_run_directory_is_refused(tmp_path):
    path = tmp_path / "report.html"
    path.write_text("<html>")
    with pytest.raises(RunDirError) as err:
        load_run(path)
    assert str(err.value) == f"{path} is not a directory; give a run directory, results/<run_id>"


def test_compare_refuses_the_same_run_given_twice(tmp_path, capsys):
    first = run_dir(tmp_path / "a", json.dumps({"schema_version": 2, "run_id": "20261123T092837Z_mariadb_tpch-sf0.1_C+O"}))
    copy = run_dir(tmp_path / "b", json.dumps({"schema_version": 2, "run_id": "20261123T092837Z_mariadb_tpch-sf0.1_C+O"}))
    (first / "tables").mkdir()
    (first / "tables" / "queries.csv").write_text("query,try,status\n")
    (first / "tables" / "query_metrics.csv").write_text("\n")
    (first / "tables" / "plan_accesses.csv").write_text("\n")
    with pytest.raises(SystemExit) as done:
        main(["compare", str(first), str(copy)])
    assert str(done.value) == (f"tierlab compare: run 20261123T092837Z_mariadb_tpch-sf0.1_C+O is given twice ({copy} "
                               "and an earlier argument); give each run once")


def test_compare_refuses_a_run_of_an_unknown_schema_version(tmp_path):
    known = run_dir(tmp_path / "a", json.dumps({"schema_version": 2, "run_id": "20261123T092837Z_mariadb_tpch-sf0.1_C+O"}))
    unknown = run_dir(tmp_path / "b", json.dumps({"schema_version": 4, "run_id": "20261124T092837Z_mariadb_tpch-sf0.1_C+O"}))
    with pytest.raises(SystemExit) as done:
        main(["compare", str(known), str(unknown)])
    assert str(done.value) == (f"tierlab compare: {unknown}: results schema_version 4 is not one this tierlab reads (it "
                               "reads 1, 2, 3); read it with the tierlab version that wrote it (versions.tierlab_git in "
                               "its manifest)")


def test_compare_puts_each_engine_s_plan_beside_its_time(tmp_path):
    plans = {"mariadb": "query,try,table,index,access\nq03,1,customer,,table scan\n"
                        "q03,1,orders,orders_custkey,index lookup\nq03,1,lineitem,PRIMARY,index lookup\n",
             "postgresql": "query,try,table,index,access\nq03,1,lineitem,,table scan\nq03,1,orders,,table scan\n"
                           "q03,1,customer,,table scan\n"}
    dirs = []
    for engine, accesses in plans.items():
        path = run_dir(tmp_path / engine, json.dumps({"schema_version": 2,
                                                       "run_id": f"20261123T090000Z_{engine}_tpch-sf0.1_ALL"}))
        (path / "tables").mkdir()
        (path / "tables" / "queries.csv").write_text("query,try,status,elapsed_s\nq03,1,ok,2.5\n")
        (path / "tables" / "query_metrics.csv").write_text("\n")
        (path / "tables" / "plan_accesses.csv").write_text(accesses)
        dirs.append(str(path))
    main(["compare", *dirs, "--out", str(tmp_path / "compared")])
    side = (tmp_path / "compared" / "compare.csv").read_text().splitlines()
    assert side == [
        "query,elapsed_s,speedup,plan,run",
        "q03,2.5,1,customer table scan; orders index lookup (orders_custkey); lineitem index lookup (PRIMARY),"
        "20261123T090000Z_mariadb_tpch-sf0.1_ALL",
        "q03,2.5,1,lineitem table scan; orders table scan; customer table scan,"
        "20261123T090000Z_postgresql_tpch-sf0.1_ALL"]


def test_compare_gives_the_requests_in_flight_on_the_tier_that_served_most_of_each_query(tmp_path):
    path = run_dir(tmp_path / "run", json.dumps({"schema_version": 2, "run_id": "20261125T090000Z_postgresql_ssb-sf1_None"}))
    (path / "tables").mkdir()
    (path / "tables" / "queries.csv").write_text("query,try,status,elapsed_s\nq2.1,1,ok,52.3\nq3.4,1,ok,16.4\n")
    (path / "tables" / "query_metrics.csv").write_text("\n")
    (path / "tables" / "plan_accesses.csv").write_text("\n")
    (path / "tables" / "tier_metrics.csv").write_text(
        "query,try,tier,requests,inflight_mean\nq2.1,1,nand,9000,1.9\nq2.1,1,optane,12,1.0\n"
        "q3.4,1,nand,40,1.0\nq3.4,1,optane,7000,2.7\n")
    main(["compare", str(path), "--out", str(tmp_path / "compared")])
    assert (tmp_path / "compared" / "compare.csv").read_text().splitlines() == [
        "query,elapsed_s,speedup,inflight_mean,run",
        "q2.1,52.3,1,1.9,20261125T090000Z_postgresql_ssb-sf1_None",
        "q3.4,16.4,1,2.7,20261125T090000Z_postgresql_ssb-sf1_None"]


def test_compare_refuses_runs_whose_modelled_time_was_dilated_differently(tmp_path):
    dirs = []
    for name, dilation in (("a", 9.0), ("b", 7.4)):
        run_id = f"20261123T09000{len(dirs)}Z_mariadb_tpch-sf0.1_C+O"
        path = run_dir(tmp_path / name, json.dumps({"schema_version": 2, "run_id": run_id,
                                                     "tiers_fidelity": {"dilation": dilation}}))
        (path / "tables").mkdir()
        (path / "tables" / "queries.csv").write_text("query,try,status\n")
        (path / "tables" / "query_metrics.csv").write_text("\n")
        (path / "tables" / "plan_accesses.csv").write_text("\n")
        dirs.append(str(path))
    with pytest.raises(SystemExit) as done:
        main(["compare", *dirs])
    assert str(done.value) == ("tierlab compare: these runs' modelled time was dilated differently "
                               "(20261123T090000Z_mariadb_tpch-sf0.1_C+O 9x, 20261123T090001Z_mariadb_tpch-sf0.1_C+O 7.4x), "
                               "so their times cannot be compared; run them on tiers brought up with the same tiers_dilation")


def test_a_query_s_requests_are_read_from_its_own_row_groups_of_the_requests_analyze_wrote(tmp_path):
    run = make_run(tmp_path, read(1.0, 64) + read(1.1, 96))
    add_query(run, "q01", read(2.0, 0) + read(2.1, 32) + read(2.2, 4096))
    (run / "tables").mkdir()
    analyze(load_run(run), requests_path=run / "tables" / "requests.parquet")
    chunks = list(request_chunks(run, "q01", 1))
    assert len(chunks) == 1
    assert chunks[0]["sector"].tolist() == [0, 32, 4096]
    assert list(chunks[0].columns) == list(REQUEST_COLUMNS)


def test_a_query_s_requests_spread_over_row_groups_shared_with_other_windows_are_read_in_order(tmp_path):
    run = tmp_path / "run"
    (run / "tables").mkdir(parents=True)
    rows = [("q01", 1, 0), ("q01", 1, 1), ("q03", 1, 2), ("q03", 1, 3), ("q03", 1, 4), ("q03", 2, 5), ("q05", 1, 6)]
    frame = pd.DataFrame({"ts_s": [float(n) for _, _, n in rows], "device": "7:1", "tier": "nand", "op": "R",
                          "sector": [n * 32 for _, _, n in rows], "request_size_sectors": 32, "piece": 0,
                          "object": "lineitem", "sequential": False,
                          "query": [q for q, _, _ in rows], "try": [t for _, t, _ in rows]})
    # row groups of two: (q01, q01), (q03, q03), (q03 try 1, q03 try 2), (q05)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), run / "tables" / "requests.parquet", row_group_size=2)
    chunks = list(request_chunks(run, "q03", 1))
    assert [c["sector"].tolist() for c in chunks] == [[64, 96], [128]]


def analyzed_run(tmp_path, run_id: str, queries: str, **tables: str) -> str:
    """A run directory of run_id with its analysed tables: queries.csv's rows, no metrics or plans unless given."""
    path = run_dir(tmp_path / run_id, json.dumps({"schema_version": 2, "run_id": run_id}))
    (path / "tables").mkdir()
    (path / "tables" / "queries.csv").write_text("query,try,status,elapsed_s\n" + queries)
    for name, text in {"query_metrics": "\n", "plan_accesses": "\n", **tables}.items():
        (path / "tables" / f"{name}.csv").write_text(text)
    return str(path)


def test_compare_gives_each_query_s_speedup_over_the_first_run_given(tmp_path):
    dirs = [analyzed_run(tmp_path, f"20261123T090000Z_mariadb_tpch-sf1_{layout}", times)
            for layout, times in (("None", "q01,1,ok,3.0\nq03,1,ok,10.0\n"), ("ALL", "q01,1,ok,2.0\nq03,1,ok,2.5\n"))]
    main(["compare", *dirs, "--out", str(tmp_path / "compared")])
    assert (tmp_path / "compared" / "compare.csv").read_text().splitlines() == [
        "query,elapsed_s,speedup,run",
        "q01,3,1,20261123T090000Z_mariadb_tpch-sf1_None",
        "q03,10,1,20261123T090000Z_mariadb_tpch-sf1_None",
        "q01,2,1.5,20261123T090000Z_mariadb_tpch-sf1_ALL",
        "q03,2.5,4,20261123T090000Z_mariadb_tpch-sf1_ALL"]


def test_compare_gives_a_timed_test_s_speedup_by_its_throughput_and_none_where_the_first_run_lacks_the_step(tmp_path):
    dirs = [analyzed_run(tmp_path, "20261123T090000Z_mariadb_sysbench-8x1000_None", "oltp_read_only,1,ok,60.0\n",
                         throughput="query,try,tps,latency_pct_ms\noltp_read_only,1,500.0,8.0\n"),
            analyzed_run(tmp_path, "20261123T090000Z_mariadb_sysbench-8x1000_ALL",
                         "oltp_read_only,1,ok,60.0\noltp_write_only,1,ok,60.0\n",
                         throughput="query,try,tps,latency_pct_ms\noltp_read_only,1,2000.0,8.0\n"
                                    "oltp_write_only,1,900.0,4.0\n")]
    main(["compare", *dirs, "--out", str(tmp_path / "compared")])
    assert (tmp_path / "compared" / "compare.csv").read_text().splitlines() == [
        "query,elapsed_s,speedup,tps,latency_pct_ms,run",
        "oltp_read_only,60,1,500,8,20261123T090000Z_mariadb_sysbench-8x1000_None",
        "oltp_read_only,60,4,2000,8,20261123T090000Z_mariadb_sysbench-8x1000_ALL",
        "oltp_write_only,60,,900,4,20261123T090000Z_mariadb_sysbench-8x1000_ALL"]
