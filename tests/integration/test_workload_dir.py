"""A workload of the user's own (docs/examples/shop: its schema, its generator, its queries with weights) run by
playbooks/workload.yml as TPC-H is: on PostgreSQL with the data its command prints, on MariaDB with the same data as
files (CSV, and Parquet for one table) with one of its queries running beside each; the tables placed by name, the
same answers on both, the reads attributed to its tables and indexes, and recommend's answer weighted as the
workload declares, with statements that name its tables. On PostgreSQL, a log of the shop's traffic, captured from
an instance of the test's own, is replayed by pgreplay as the run's last step."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from answers import read_answer, same_answer
from lab import ROOT, cli, corun_marks, read_csv
from own_instances import OwnPostgresql, own_dir, remove_own_dir

from tierlab.runs.workload_dir import read_workload_dir

SHOP = ROOT / "docs" / "examples" / "shop"
SCALE_FACTOR = "0.1"
TABLES = ("customers", "products", "orders", "order_lines")
QUERIES = ("customer_orders", "country_revenue", "category_sales")
CAPTURE_PORT = 6712
# the query that runs beside each of MariaDB's
CORUN = "customer_orders"
# two sessions at once, each running two of the shop's queries a second apart
CAPTURED_SESSIONS = (("customer_orders", "category_sales"), ("country_revenue", "customer_orders"))


def data_files(directory: Path) -> Path:
    """A copy of the shop whose data are the files its generator prints at SCALE_FACTOR, products' as Parquet."""
    shutil.copytree(SHOP, directory)
    (directory / "data").mkdir()
    for table in TABLES:
        with open(directory / "data" / f"{table}.csv", "w") as out:
            subprocess.run(["python3", "generate.py"], cwd=directory, stdout=out, check=True, timeout=300,
                           env={**os.environ, "TIERLAB_TABLE": table, "TIERLAB_SCALE_FACTOR": SCALE_FACTOR})
    products = directory / "data" / "products.csv"
    pq.write_table(pacsv.read_csv(products), products.with_suffix(".parquet"))
    products.unlink()
    declaration = (directory / "workload.yml").read_text()
    data = declaration[declaration.index("data:"):declaration.index("# queries/")]
    (directory / "workload.yml").write_text(declaration.replace(data, "data: {files: data}\n"))
    return directory


def captured_log(here: Path) -> Path:
    """The shop's traffic on an instance of the test's own, logged as a DBA captures a day for pgreplay: the schema
    made before statements are logged, then two sessions at once."""
    logs = here / "logs"
    logs.mkdir()
    shutil.chown(logs, "postgres", "postgres")
    instance = OwnPostgresql(here / "data", CAPTURE_PORT, settings={
        "logging_collector": "on", "log_destination": "csvlog", "log_directory": str(logs),
        "log_filename": "captured"})
    try:
        instance.sql("CREATE DATABASE shop")
        instance.sql((SHOP / "schema.sql").read_text(), "shop")
        for setting in ("log_statement = 'all'", "log_connections = on", "log_disconnections = on"):
            instance.sql(f"ALTER SYSTEM SET {setting}")
        instance.sql("SELECT pg_reload_conf()")
        sessions = [subprocess.Popen(
            ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", f"{instance.conninfo()} dbname=shop", "-c",
             (SHOP / "queries" / f"{first}.sql").read_text(), "-c", "SELECT pg_sleep(1)", "-c",
             (SHOP / "queries" / f"{second}.sql").read_text()], stdout=subprocess.DEVNULL)
            for first, second in CAPTURED_SESSIONS]
        assert [session.wait(timeout=120) for session in sessions] == [0, 0]
    finally:
        instance.stop()
    return logs / "captured.csv"


def replaying(directory: Path, here: Path) -> Path:
    """A copy of the shop that replays its captured traffic as a step of its own."""
    shutil.copytree(SHOP, directory)
    (directory / "logs").mkdir()
    shutil.copy(captured_log(here), directory / "logs" / "captured.csv")
    with open(directory / "workload.yml", "a") as declaration:
        declaration.write("replays: {logs: [logs/captured.csv]}\n")
    return directory


@pytest.fixture(scope="module")
def shop(lab, tmp_path_factory):
    """The shop with orders and its lines on the fast tier: on PostgreSQL, its data made by its command, and its
    captured traffic replayed after its queries; on MariaDB, from data files of the same rows (CSV, and Parquet for
    products), with customer_orders running beside each query."""
    here = own_dir("replay")
    try:
        replays = replaying(tmp_path_factory.mktemp("replay") / "shop", here)
    finally:
        remove_own_dir(here)
    files = data_files(tmp_path_factory.mktemp("shop") / "shop")
    return {"postgresql": lab.run("orders+order_lines", playbook="workload.yml", engine="postgresql",
                                  workload_dir=str(replays), scale_factor=SCALE_FACTOR, queries="all"),
            "mariadb": lab.run("orders+order_lines", playbook="workload.yml", engine="mariadb",
                               workload_dir=str(files), scale_factor="", queries="all", corun=CORUN,
                               trace_backend="ftrace"),
            "files": files}


@pytest.mark.postgresql
@pytest.mark.mariadb
def test_every_query_of_the_shop_runs_cold_and_traced_on_both_engines_with_the_same_non_empty_answer(shop):
    for engine, steps in (("postgresql", [*QUERIES, "captured"]), ("mariadb", list(QUERIES))):
        queries = read_csv(shop[engine] / "tables" / "queries.csv")
        assert list(queries["query"]) == steps, engine
        assert set(queries["status"]) == {"ok"}, engine
        assert queries["trace_complete"].all(), engine
    for query in QUERIES:
        name = f"{query}_try1.tsv"
        postgresql = read_answer(shop["postgresql"] / "raw" / "output" / name)
        assert postgresql, f"{query} returned no rows"
        assert same_answer(read_answer(shop["mariadb"] / "raw" / "output" / name), postgresql), query


@pytest.mark.postgresql
@pytest.mark.mariadb
def test_the_run_is_named_by_the_shop_its_scale_and_its_layout_of_table_names(shop):
    # the replayed log is no part of the data: the database is the shop's own, whatever replays it
    revision = read_workload_dir(SHOP).revision
    manifest = json.loads((shop["postgresql"] / "manifest.json").read_text())
    assert shop["postgresql"].name.endswith("_postgresql_shop-sf0.1_orders+order_lines")
    assert (manifest["workload"]["name"], manifest["settings"]["database"]) == ("shop", f"shop_sf0_1_{revision}")
    assert shop["mariadb"].name.endswith("_mariadb_shop-files_orders+order_lines")


@pytest.mark.postgresql
@pytest.mark.mariadb
def test_each_table_with_its_indexes_is_on_the_tier_its_name_in_the_layout_gives(shop):
    for engine in ("postgresql", "mariadb"):
        tables = json.loads((shop[engine] / "manifest.json").read_text())["layout"]["tables"]
        tiers = {table: {f["tier"] for f in info["files"]} for table, info in tables.items()}
        assert tiers == {"customers": {"nand"}, "products": {"nand"}, "orders": {"optane"},
                         "order_lines": {"optane"}}, engine
    postgresql = json.loads((shop["postgresql"] / "manifest.json").read_text())["layout"]["tables"]
    assert {(f["object"], f["tier"]) for f in postgresql["orders"]["files"] if f["kind"] == "index"} == {
        ("orders_pkey", "optane"), ("orders_customer", "optane")}


@pytest.mark.mariadb
def test_a_co_runner_runs_within_each_query_s_window_and_is_counted_in_its_row(shop):
    run_dir = shop["mariadb"]
    queries = read_csv(run_dir / "tables" / "queries.csv")
    assert list(queries["corun"]) == [CORUN] * len(QUERIES)
    assert queries["corun_error"].isna().all()
    for row in queries.itertuples():
        label = f"{row.query}_try1"
        (start, end), marks = corun_marks(run_dir, label)
        # its first run starts within the query's window, and every run it marked there ended within it
        assert marks[0][1] == f"tierlab corun start {label} 1" and start <= marks[0][0] <= end
        ended = [text for ts, text in marks if text.startswith(f"tierlab corun end {label} ") and ts <= end]
        assert row.corun_runs == len(ended)
        assert pd.isna(row.corun_elapsed_s) == (row.corun_runs == 0)
        assert same_answer(read_answer(run_dir / "raw" / "output" / f"{label}.corun.tsv"),
                           read_answer(run_dir / "raw" / "output" / f"{CORUN}_try1.tsv")), row.query


@pytest.mark.mariadb
def test_the_data_files_quoted_fields_and_nulls_load_as_written(lab, shop, tmp_path):
    database = json.loads((shop["mariadb"] / "manifest.json").read_text())["settings"]["database"]
    sql = ("SELECT (SELECT name FROM products WHERE id = 1), (SELECT name FROM customers WHERE id = 1), "
           "(SELECT COUNT(*) FROM customers WHERE country IS NULL)")
    done = lab.execute("mariadb-16k", sql, 60, tmp_path / "loaded.tsv", database)
    assert done["status"] == "ok", done
    nulls = (shop["files"] / "data" / "customers.csv").read_text().count(",NULL,")
    assert nulls > 0
    assert read_answer(tmp_path / "loaded.tsv") == [['Product "1"', "Customer 1, account 1", float(nulls)]]


@pytest.mark.postgresql
def test_the_reads_are_attributed_to_the_shop_s_tables_and_indexes(shop):
    metrics = read_csv(shop["postgresql"] / "tables" / "table_metrics.csv")
    reads = metrics.groupby(["query", "object"])["read_requests"].sum()
    # the scan of every order line and the products it joins
    assert reads["category_sales"]["order_lines"] > 0 and reads["category_sales"]["products"] > 0
    # a few customers' orders, found through the index on customer_id
    assert reads["customer_orders"]["orders_customer"] > 0


@pytest.mark.postgresql
def test_recommend_places_each_table_and_index_of_the_shop_apart_weighted_as_the_workload_declares(lab, shop, tmp_path):
    done = cli("recommend", str(shop["postgresql"]), "--fast-capacity", "1G", "--out", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    # a replay weighs as one run of it
    assert {e["query"]: e["weight"] for e in result["evidence"]} == {"customer_orders": 20.0, "country_revenue": 2.0,
                                                                     "category_sales": 1.0, "captured": 1.0}
    units = {u["unit"]: u for u in result["objects"]}
    assert {unit: u["kind"] for unit, u in units.items()} == {
        **dict.fromkeys(TABLES, "table"), "orders_customer": "index", "order_lines_product": "index",
        **{f"{table}_pkey": "index" for table in TABLES}}
    # customer_orders, weighed 20, finds a few customers' orders through orders_customer
    assert units["orders_customer"]["saving_s"] > 0 and units["orders_customer"]["io_time_s"] > 0
    # the traced layout's tables, and their indexes with them, were on the fast tier
    assert result["traced_layout"] == "order_lines+order_lines_pkey+order_lines_product+orders+orders_customer+orders_pkey"
    assert result["layout"] in set(read_csv(tmp_path / "layouts.csv")["layout"])
    manifest = json.loads((shop["postgresql"] / "manifest.json").read_text())
    database = manifest["settings"]["database"]

    def tiers_now() -> dict[str, str]:
        # the shop's tables and indexes (tierlab's own bookkeeping table lies beside them)
        now = lab.relation_tiers(database, manifest)
        return {unit: now.get(unit) for unit in units}

    start = tiers_now()
    assert start == {**dict.fromkeys(units, "capacity"), **dict.fromkeys(result["traced_layout"].split("+"), "fast")}
    end = {**start, **{s["table"]: s["to"] for s in result["migration"]["plan"]["steps"]}}
    assert end == {unit: "fast" if unit in result["layout"].split("+") else "capacity" for unit in units}
    for script, placement in (("migration.sql", end), ("migration-undo.sql", start)):
        applied = lab.psql(database, "-f", str(tmp_path / script))
        assert applied.returncode == 0, f"{script}: {applied.stderr}"
        assert tiers_now() == placement, script


def test_a_malformed_workload_directory_is_refused_before_anything_runs(lab, tmp_path):
    broken = Path(shutil.copytree(SHOP, tmp_path / "shop"))
    (broken / "queries" / "category_sales.sql").unlink()
    before = lab.run_ids()
    done = lab.playbook("workload.yml", check=False, workload_dir=str(broken), layout="orders")
    assert done.returncode != 0
    assert (f"{broken}/workload.yml: query category_sales has no file for the mysql dialect; write "
            f"{broken}/queries/category_sales.sql") in done.stdout
    assert lab.run_ids() == before


@pytest.mark.postgresql
def test_a_captured_log_replays_its_sessions_statements_and_pauses_on_the_loaded_shop(shop):
    queries = read_csv(shop["postgresql"] / "tables" / "queries.csv").set_index("query")
    assert (queries["status"]["captured"], queries["trace_complete"]["captured"]) == ("ok", True)
    report = (shop["postgresql"] / "raw" / "driver" / "captured_try1.txt").read_text()
    assert "SQL statements executed: 6\n(0 or 0.000% of these completed with error)" in report
    assert "Maximum number of concurrent connections: 2" in report
    # the second of pause between each session's queries, replayed as captured
    assert queries["elapsed_s"]["captured"] >= 1.0
    metrics = read_csv(shop["postgresql"] / "tables" / "table_metrics.csv")
    reads = metrics[metrics["query"] == "captured"].groupby("object")["read_requests"].sum()
    assert reads["order_lines"] > 0 and reads["orders_customer"] > 0


def dumped(lab, run: Path, engine: str, out: Path) -> None:
    """The data of the shop's tables in a run's database (not tierlab's mark of a complete load) as the engine's own
    dump tool writes it, data only."""
    database = json.loads((run / "manifest.json").read_text())["settings"]["database"]
    instance = {"postgresql": "postgresql-8k", "mariadb": "mariadb-16k"}[engine]
    spec = lab.serving(instance)
    if engine == "postgresql":
        cmd = [f"{spec['bindir']}/pg_dump", "--data-only", *(f"--table=public.{table}" for table in TABLES), "-d",
               f"host={spec['socket_dir']} port={spec['port']} user=postgres passfile={spec['password_file']} "
               f"dbname={database}"]
    else:
        cmd = ["mariadb-dump", f"--defaults-file={spec['client_file']}", "--no-create-info", "--skip-triggers", database,
               *TABLES]
    with open(out, "w") as dump:
        assert subprocess.run(cmd, stdout=dump, timeout=300).returncode == 0


@pytest.fixture(scope="module")
def from_dumps(lab, shop, tmp_path_factory):
    """The shop loaded from its own data-only dumps, on each engine (the layout runs' databases, dumped)."""
    directory = Path(shutil.copytree(SHOP, tmp_path_factory.mktemp("dumps") / "shop"))
    (directory / "dumps").mkdir()
    dumped(lab, shop["postgresql"], "postgresql", directory / "dumps" / "postgresql.sql")
    dumped(lab, shop["mariadb"], "mariadb", directory / "dumps" / "mysql.sql")
    declaration = (directory / "workload.yml").read_text()
    data = declaration[declaration.index("data:"):declaration.index("# queries/")]
    (directory / "workload.yml").write_text(declaration.replace(data, "data: {dump: dumps}\n"))
    # their answers are all that is checked: warm and untraced
    return {engine: lab.run("orders", playbook="workload.yml", engine=engine, workload_dir=str(directory),
                            scale_factor="", queries="all", cold=False, trace=False)
            for engine in ("postgresql", "mariadb")}


@pytest.mark.postgresql
@pytest.mark.mariadb
def test_the_shop_loaded_from_its_dumps_answers_as_it_did_on_each_engine(from_dumps, shop):
    for engine, run in from_dumps.items():
        queries = read_csv(run / "tables" / "queries.csv")
        assert set(queries["status"]) == {"ok"}, engine
        tables = json.loads((run / "manifest.json").read_text())["layout"]["tables"]
        assert {t: {f["tier"] for f in info["files"]} for t, info in tables.items()}["orders"] == {"optane"}
        for query in QUERIES:
            name = f"{query}_try1.tsv"
            assert same_answer(read_answer(run / "raw" / "output" / name),
                               read_answer(shop[engine] / "raw" / "output" / name)), (engine, query)
