"""The Star Schema Benchmark through the same study as TPC-H: tierlab's generator, every engine, the same answers."""

import json

import pandas as pd
import pytest
from answers import read_answer, same_answer

import tierlab
from tierlab.run_io import read_plan_accesses

# rows of each answer at scale factor 0.01 with seed 1, from pandas over the generated files: Q3.3 and Q3.4
# ask for suppliers in two British cities, which 20 suppliers do not have
ROWS = {"q1.1": 1, "q1.2": 1, "q1.3": 1, "q2.1": 173, "q2.2": 36, "q2.3": 7, "q3.1": 90, "q3.2": 35, "q3.3": 0,
        "q3.4": 0, "q4.1": 35, "q4.2": 59, "q4.3": 7}
QUERIES = ["q1.1", "q1.2", "q1.3", "q2.1", "q2.2", "q2.3", "q3.1", "q3.2", "q3.3", "q3.4", "q4.1", "q4.2", "q4.3"]


@pytest.fixture(scope="session")
def ssb_runs(study):
    """Every SSB query cold and traced on MariaDB with LINEORDER on the fast tier, and warm and untraced on
    PostgreSQL (its planner's own joins, and hash or index joins forced) and MySQL for their answers."""
    postgresql = {"engine": "postgresql", "queries": "all", "cold": False, "trace": False}
    return {"mariadb": study.run("LO", playbook="ssb.yml", queries="all"),
            "postgresql": study.run("LO", playbook="ssb.yml", **postgresql),
            "postgresql-hash": study.run("LO", playbook="ssb.yml", join_plan="hash", **postgresql),
            "postgresql-index": study.run("LO", playbook="ssb.yml", join_plan="index", fast_random_page_cost="1.1",
                                          capacity_effective_io_concurrency="32", **postgresql),
            "mysql": study.run("LO", playbook="ssb.yml", engine="mysql", queries="all", cold=False, trace=False)}


def test_an_ssb_run_is_named_for_its_workload_and_runs_each_query_by_its_id(ssb_runs):
    run_dir = ssb_runs["mariadb"]
    assert run_dir.name.endswith("_mariadb_ssb-sf0.01_LO")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "ok"
    assert manifest["workload"]["name"] == "ssb"
    assert set(manifest["layout"]["tables"]) == {"lineorder", "customer", "supplier", "part", "date"}
    queries = pd.read_csv(run_dir / "tables" / "queries.csv")
    assert list(queries["query"]) == QUERIES
    assert set(queries["status"]) == {"ok"}


@pytest.mark.parametrize("engine", ["postgresql", "postgresql-hash", "postgresql-index", "mysql"])
def test_every_ssb_query_returns_the_same_answer_as_on_mariadb(ssb_runs, engine):
    different = [query for query in QUERIES
                 if not same_answer(read_answer(ssb_runs[engine] / "raw" / "output" / f"{query}_try1.tsv"),
                              read_answer(ssb_runs["mariadb"] / "raw" / "output" / f"{query}_try1.tsv"))]
    assert different == []


def test_ssb_answers_have_the_rows_the_data_holds(ssb_runs):
    rows = {query: len(read_answer(ssb_runs["mariadb"] / "raw" / "output" / f"{query}_try1.tsv")) for query in QUERIES}
    assert rows == ROWS


def test_q1_1_reads_lineorder_on_the_fast_device_and_date_on_the_capacity_device(ssb_runs):
    requests = tierlab.load_run(ssb_runs["mariadb"]).requests()
    reads = requests[(requests["query"] == "q1.1") & (requests["op"] == "R")]
    assert "lineorder" in set(reads.loc[reads["tier"] == "optane", "object"])
    assert "lineorder" not in set(reads.loc[reads["tier"] == "nand", "object"])
    assert "date" in set(reads.loc[reads["tier"] == "nand", "object"])


def test_mariadb_s_reads_of_lineorder_s_indexes_are_the_lookups_its_plans_make(ssb_runs):
    plans = read_plan_accesses(ssb_runs["mariadb"], "mariadb", {"lineorder"})
    requests = tierlab.load_run(ssb_runs["mariadb"]).requests()
    reads = requests[requests["op"] == "R"]
    index_reads = {(query, name) for query, name in zip(reads["query"], reads["object"].astype(str), strict=True)
                   if name.startswith("lineorder_")}
    assert index_reads == set(zip(plans["query"], plans["index"], strict=True))


@pytest.mark.parametrize(("join_plan", "joins", "accesses"), [
    ("hash", {"enable_hashjoin": "on", "enable_mergejoin": "off", "enable_nestloop": "off"}, {"table scan"}),
    ("index", {"enable_hashjoin": "off", "enable_mergejoin": "off", "enable_nestloop": "on"},
     {"index lookup", "bitmap scan"})])
def test_a_forced_join_plan_scans_lineorder_or_looks_it_up_in_every_query(ssb_runs, join_plan, joins, accesses):
    run_dir = ssb_runs[f"postgresql-{join_plan}"]
    settings = json.loads((run_dir / "manifest.json").read_text())["engine"]["settings"]
    assert {name: settings[name] for name in joins} == joins
    plans = read_plan_accesses(run_dir, "postgresql", {"lineorder"})
    assert sorted(set(plans["query"])) == QUERIES
    assert set(plans["access"]) == accesses


def test_each_tablespace_has_its_tier_s_planner_costs_and_prefetch_depth(ssb_runs):
    tablespaces = json.loads((ssb_runs["postgresql-index"] / "manifest.json").read_text())["engine"]["tablespaces"]
    options = {name: set(tablespace["options"].split(",")) for name, tablespace in tablespaces.items()}
    assert options == {
        "tierlab_fast": {"seq_page_cost=1.0", "random_page_cost=1.1", "effective_io_concurrency=1"},
        "tierlab_capacity": {"seq_page_cost=1.0", "random_page_cost=4.0", "effective_io_concurrency=32"}}
