"""The Star Schema Benchmark through the same study as TPC-H: tierlab's generator, every engine, the same answers."""

import json

import pytest
from answers import read_answer, same_answer
from lab import corun_marks, read_csv

import tierlab
from tierlab.catalog.workloads import WORKLOADS
from tierlab.runs.results import read_plan_accesses

# rows of each answer at scale factor 0.01 with seed 1, from pandas over the generated files: Q3.3 and Q3.4
# ask for suppliers in two British cities, which 20 suppliers do not have
ROWS = {"q1.1": 1, "q1.2": 1, "q1.3": 1, "q2.1": 173, "q2.2": 36, "q2.3": 7, "q3.1": 90, "q3.2": 35, "q3.3": 0,
        "q3.4": 0, "q4.1": 35, "q4.2": 59, "q4.3": 7}
QUERIES = ["q1.1", "q1.2", "q1.3", "q2.1", "q2.2", "q2.3", "q3.1", "q3.2", "q3.3", "q3.4", "q4.1", "q4.2", "q4.3"]
ANSWERED = [query for query in QUERIES if ROWS[query]]

pytestmark = [pytest.mark.mariadb, pytest.mark.postgresql, pytest.mark.mysql]

COMPRESSION = {"mariadb": "zlib8", "mysql": "page"}


@pytest.fixture(scope="session")
def ssb_runs(lab):
    """Every SSB query cold and traced on MariaDB with LINEORDER on the fast tier, and warm and untraced on every
    engine with hash or index joins forced, for their answers and plans; Q2.1 cold and traced on PostgreSQL
    with a writer beside it. PostgreSQL's warm runs split every query into four subqueries, with index joins
    (by its driving dimension's key) and with hash joins (by LINEORDER's blocks): their plans are those of the
    forced joins, their answers the subqueries' together. A forced plan answers as the optimizer's would: a run of
    each optimizer's own joins would add a playbook's fixed cost and no answer the forced ones do not check. The
    MySQL family's forced plans run on a database of each engine's compression (ROW_FORMAT=COMPRESSED on MariaDB,
    page compression on MySQL), so that their answers are also a compressed database's."""
    warm = {"queries": "all", "cold": False, "trace": False}
    postgresql = {"engine": "postgresql", **warm}
    return {"mariadb": lab.run("LO", playbook="ssb.yml", queries="all"),
            "postgresql-writer": lab.run("LO", playbook="ssb.yml", engine="postgresql", queries="2.1", corun="writer",
                                         trace_backend="ftrace"),
            "postgresql-index": lab.run("LO", playbook="ssb.yml", subqueries="4", join_plan="index",
                                        fast_random_page_cost="1.1", capacity_effective_io_concurrency="32",
                                        **postgresql),
            "postgresql-hash": lab.run("LO", playbook="ssb.yml", subqueries="4", join_plan="hash", **postgresql),
            **{f"{engine}-{plan}": lab.run("LO", playbook="ssb.yml", engine=engine, join_plan=plan,
                                           compression=COMPRESSION[engine], **warm)
               for engine in ("mariadb", "mysql") for plan in ("hash", "index")}}


def test_an_ssb_run_is_named_for_its_workload_and_runs_each_query_by_its_id(ssb_runs):
    run_dir = ssb_runs["mariadb"]
    assert run_dir.name.endswith("_mariadb_ssb-sf0.01_LO")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "ok"
    assert manifest["workload"]["name"] == "ssb"
    assert set(manifest["layout"]["tables"]) == {"lineorder", "customer", "supplier", "part", "date"}
    queries = read_csv(run_dir / "tables" / "queries.csv")
    assert list(queries["query"]) == QUERIES
    assert set(queries["status"]) == {"ok"}


@pytest.mark.parametrize(("engine", "database", "row_format", "options"), [
    ("mariadb", "ssb_sf0_01_zlib8", "Compressed", "row_format=COMPRESSED key_block_size=8 DATA DIRECTORY="),
    ("mysql", "ssb_sf0_01_page", "Dynamic", 'COMPRESSION="zlib"'),
])
def test_a_compressed_run_loads_a_database_of_its_own_with_every_table_compressed(ssb_runs, engine, database,
                                                                                 row_format, options):
    load = json.loads((ssb_runs[f"{engine}-hash"] / "raw" / "load.json").read_text())
    assert (load["database"], load["compression"], load["loaded_in_this_run"]) == (
        database, COMPRESSION[engine], True)
    # the server states each table's options as it keeps them, MariaDB's with the table's DATA DIRECTORY
    assert {t["name"]: (t["format"], t["options"][:len(options)]) for t in load["table_formats"]} == {
        table: (row_format, options) for table in WORKLOADS["ssb"].tables()}


# PostgreSQL's runs split each query: their answers are their subqueries' together (below)
@pytest.mark.parametrize("engine", ["mariadb-hash", "mariadb-index", "mysql-hash", "mysql-index"])
def test_every_ssb_query_that_has_rows_returns_the_same_answer_as_on_mariadb(ssb_runs, engine):
    different = [query for query in ANSWERED
                 if not same_answer(read_answer(ssb_runs[engine] / "raw" / "output" / f"{query}_try1.tsv"),
                                    read_answer(ssb_runs["mariadb"] / "raw" / "output" / f"{query}_try1.tsv"))]
    assert different == []
    empty = [query for query in QUERIES if not read_answer(ssb_runs[engine] / "raw" / "output" / f"{query}_try1.tsv")]
    # Q3.3 and Q3.4 ask for suppliers in two British cities, which SF 0.01's 20 suppliers do not have
    assert empty == ["q3.3", "q3.4"]


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
    assert sorted(set(plans["query"])) == QUERIES
    requests = tierlab.load_run(ssb_runs["mariadb"]).requests()
    reads = requests[requests["op"] == "R"]
    index_reads = {(query, name) for query, name in zip(reads["query"], reads["object"].astype(str), strict=True)
                   if name.startswith("lineorder_")}
    lookups = {(query, index) for query, index in zip(plans["query"], plans["index"], strict=True)
               if isinstance(index, str) and index.startswith("lineorder_")}
    assert lookups and index_reads == lookups


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


@pytest.mark.parametrize(("engine", "setting", "value"), [
    ("mariadb", "join_cache_level", "4"), ("mysql", "optimizer_switch", "block_nested_loop=on")])
def test_a_forced_hash_plan_on_the_mysql_family_scans_lineorder_in_every_query(ssb_runs, engine, setting, value):
    run_dir = ssb_runs[f"{engine}-hash"]
    settings = json.loads((run_dir / "manifest.json").read_text())["engine"]["settings"]
    assert value in settings[setting].split(",")
    plans = read_plan_accesses(run_dir, engine, {"lineorder"})
    assert sorted(set(plans["query"])) == QUERIES
    assert set(plans["access"]) == {"table scan"}


@pytest.mark.parametrize(("engine", "setting", "value", "hash_join"), [
    ("mariadb", "join_cache_level", "0", '"block-nl-join"'),
    ("mysql", "optimizer_switch", "block_nested_loop=off", '"join_algorithm": "hash"')])
def test_a_forced_index_plan_on_the_mysql_family_joins_by_nested_loops_only(ssb_runs, engine, setting, value,
                                                                              hash_join):
    run_dir = ssb_runs[f"{engine}-index"]
    settings = json.loads((run_dir / "manifest.json").read_text())["engine"]["settings"]
    assert value in settings[setting].split(",")
    plans = {path.name: path.read_text() for path in sorted((run_dir / "raw" / "plans").glob("*.json"))}
    assert sorted(plans) == [f"{query}_try1.json" for query in QUERIES]
    assert [name for name, plan in plans.items() if hash_join in plan] == []
    # the hash run just before had the optimizer ignore LINEORDER's secondary indexes: this run looks it up by them
    accesses = read_plan_accesses(run_dir, engine, {"lineorder"})
    lookups = set(accesses.loc[accesses["access"] == "index lookup", "index"])
    assert {name for name in lookups if name.startswith("lineorder_")} != set()


def test_a_writer_writes_to_the_capacity_tier_from_the_query_s_start_to_its_end_and_its_transactions_are_counted(
        ssb_runs):
    run_dir = ssb_runs["postgresql-writer"]
    queries = read_csv(run_dir / "tables" / "queries.csv")
    assert queries[["query", "status", "corun"]].values.tolist() == [["q2.1", "ok", "writer"]]
    assert queries["corun_error"].isna().all()
    (start, end), marks = corun_marks(run_dir, "q2.1_try1")
    assert [text for _, text in marks] == ["tierlab corun start q2.1_try1 1", "tierlab corun end q2.1_try1 1"]
    assert start <= marks[0][0] < marks[1][0] <= end
    reports = [json.loads(line) for line in (run_dir / "raw" / "driver" / "q2.1_try1.corun.jsonl").read_text()
               .splitlines() if line.startswith("{")]
    # it was writing before the window opened (its first report came before), and what it reported after that
    # ended within the window, since the window's end stopped it (at SF 0.01 the window may be shorter than the
    # second a report takes, and count nothing)
    assert reports[0]["kind"] == "interval" and reports[0]["events"] > 0
    assert queries["corun_runs"].iloc[0] == sum(r["events"] for r in reports[1:])
    # the query reads; what writes on the capacity tier in its window is the writer (the WAL is on the system
    # tier, which is the capacity tier too)
    tiers = read_csv(run_dir / "tables" / "tier_metrics.csv").set_index("tier")
    capacity = next(t["name"] for t in json.loads((run_dir / "manifest.json").read_text())["tiers"]
                    if t["role"] == "capacity")
    assert tiers.loc[capacity, "write_requests"] > 0


def merged_answer(parts: list[list[list]], sql: str) -> list[list]:
    """Subqueries' answers as the query's: each group's sums added (SSB selects groups and SUMs of them), in
    the order of the groups; a subquery that found no rows of an ungrouped sum answers NULL."""
    select = sql[sql.index("SELECT") + len("SELECT"):sql.index("FROM")].split(",")
    summed = [column for column, expression in enumerate(select) if expression.strip().upper().startswith("SUM(")]
    groups = {}
    for row in (row for part in parts for row in part):
        if any(row[column] == "NULL" for column in summed):
            continue
        key = tuple(value for column, value in enumerate(row) if column not in summed)
        sums = groups.setdefault(key, [0.0] * len(summed))
        for n, column in enumerate(summed):
            sums[n] += row[column]
    rows = []
    for key, sums in sorted(groups.items()):
        values, row = iter(key), []
        for column in range(len(select)):
            row.append(sums[summed.index(column)] if column in summed else next(values))
        rows.append(row)
    return rows


@pytest.mark.parametrize("split", ["postgresql-index", "postgresql-hash"])
def test_the_subqueries_of_each_ssb_query_answer_it_together(ssb_runs, split):
    run_dir = ssb_runs[split]
    queries = read_csv(run_dir / "tables" / "queries.csv")
    assert list(queries["subqueries"]) == [4] * len(QUERIES)
    assert (queries["subquery_min_s"] <= queries["subquery_max_s"]).all()
    assert (queries["subquery_max_s"] <= queries["elapsed_s"]).all()
    parts = {query: [read_answer(run_dir / "raw" / "output" / f"{query}_try1.part{part}.tsv") for part in range(1, 5)]
             for query in QUERIES}
    different = []
    for query in ANSWERED:
        sql = (run_dir / "config" / "queries" / f"{query}.sql").read_text()
        whole = read_answer(ssb_runs["mariadb"] / "raw" / "output" / f"{query}_try1.tsv")
        if not same_answer(merged_answer(parts[query], sql), merged_answer([whole], sql)):
            different.append(query)
    assert different == []
    # Q3.3 and Q3.4 ask for suppliers in two British cities, which SF 0.01's 20 suppliers do not have
    assert [query for query in QUERIES if not any(parts[query])] == ["q3.3", "q3.4"]


def test_a_split_query_s_plan_is_its_first_subquery_s(ssb_runs):
    plan = json.loads((ssb_runs["postgresql-index"] / "raw" / "plans" / "q2.1_try1.json").read_text())
    assert "p_partkey >= 1 AND p_partkey < " in plan["Query Text"]


def test_under_hash_joins_each_subquery_scans_its_own_range_of_lineorder_s_blocks(ssb_runs):
    plan = json.loads((ssb_runs["postgresql-hash"] / "raw" / "plans" / "q2.1_try1.json").read_text())
    assert "WHERE lineorder.ctid >= '(0,0)' AND lineorder.ctid < '(" in plan["Query Text"]

    def nodes(node: dict):
        yield node
        for child in node.get("Plans", []):
            yield from nodes(child)

    scans = [n for n in nodes(plan["Plan"]) if n.get("Relation Name") == "lineorder"]
    assert [n["Node Type"] for n in scans] == ["Tid Range Scan"], scans
