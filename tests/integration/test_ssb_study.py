"""The Star Schema Benchmark through the same study as TPC-H: tierlab's generator, every engine, the same answers."""

import json

import pandas as pd
import pytest
from answers import read_answer, same_answer

import tierlab

# rows of each answer at scale factor 0.01 with seed 1, from pandas over the generated files: Q3.3 and Q3.4
# ask for suppliers in two British cities, which 20 suppliers do not have
ROWS = {"q1.1": 1, "q1.2": 1, "q1.3": 1, "q2.1": 173, "q2.2": 36, "q2.3": 7, "q3.1": 90, "q3.2": 35, "q3.3": 0,
        "q3.4": 0, "q4.1": 35, "q4.2": 59, "q4.3": 7}
QUERIES = ["q1.1", "q1.2", "q1.3", "q2.1", "q2.2", "q2.3", "q3.1", "q3.2", "q3.3", "q3.4", "q4.1", "q4.2", "q4.3"]


@pytest.fixture(scope="session")
def ssb_runs(study):
    """Every SSB query cold and traced on MariaDB with LINEORDER on the fast tier, and warm and untraced on
    PostgreSQL and MySQL for their answers."""
    return {"mariadb": study.run("LO", playbook="ssb.yml", queries="all"),
            "postgresql": study.run("LO", playbook="ssb.yml", engine="postgresql", queries="all", cold=False,
                                    trace=False),
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


@pytest.mark.parametrize("engine", ["postgresql", "mysql"])
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
