"""A workload directory (docs/workload-dir.md) read into a run's workload and settings, and every mistake in it refused
by name before anything runs."""

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tierlab.catalog.layout import layout_name, parse_layout
from tierlab.catalog.workloads import workload_of
from tierlab.errors import InputError
from tierlab.runs.settings import estimated_table_bytes, validate
from tierlab.runs.workload_dir import read_workload_dir

SHOP = Path(__file__).resolve().parents[2] / "docs" / "examples" / "shop"


@pytest.fixture
def shop(tmp_path) -> Path:
    """A copy of the example, to change."""
    return Path(shutil.copytree(SHOP, tmp_path / "shop"))


def declare(directory: Path, text: str) -> Path:
    (directory / "workload.yml").write_text(text)
    return directory


def with_files(directory: Path) -> Path:
    """The shop with its data as files: a row each (a header, then the row)."""
    data = directory / "data"
    data.mkdir()
    for table in ("customers", "products", "orders", "order_lines"):
        (data / f"{table}.csv").write_text("id\n1\n")
    return declare(directory, "name: shop\ntables: [customers, products, orders, order_lines]\ndata: {files: data}\n")


def refusal(directory: Path) -> str:
    with pytest.raises(InputError) as err:
        read_workload_dir(directory)
    return str(err.value)


def test_the_example_declares_its_tables_as_layout_codes_its_queries_with_weights_and_its_one_schema():
    workload = read_workload_dir(SHOP)
    assert workload.codes == {t: t for t in ("customers", "products", "orders", "order_lines")}
    assert workload.weights == {"customer_orders": 20.0, "country_revenue": 2.0, "category_sales": 1.0}
    assert workload.schema_files == {"mysql": str(SHOP / "schema.sql"), "postgresql": str(SHOP / "schema.sql")}
    assert workload.index_files == {"mysql": str(SHOP / "indexes.sql"), "postgresql": str(SHOP / "indexes.sql")}
    assert (workload.generator, workload.data_source, workload.data_format) == ("csv_command", "python3 generate.py", "csv")
    assert workload.query_files("customer_orders", "postgresql") == (
        f"{SHOP}/queries/postgresql/customer_orders.sql", f"{SHOP}/queries/customer_orders.sql")


def test_a_dialect_s_own_schema_is_taken_over_the_shared_one(shop):
    (shop / "schema").mkdir()
    (shop / "schema" / "postgresql.sql").write_text("CREATE TABLE customers (id int);\n")
    workload = read_workload_dir(shop)
    assert workload.schema_files == {"mysql": str(shop / "schema.sql"), "postgresql": str(shop / "schema" / "postgresql.sql")}


def test_a_table_s_size_is_its_csv_bytes_at_scale_factor_1_one_and_a_half_times():
    assert read_workload_dir(SHOP).bytes_at_sf1["orders"] == int(6027767 * 1.5)


def test_a_run_of_the_directory_names_its_database_by_workload_scale_and_revision_and_places_tables_by_name():
    settings = validate({"workload": "workload_dir", "workload_dir": str(SHOP), "layout": "orders+customers",
                         "scale_factor": "0.5"})
    revision = read_workload_dir(SHOP).revision
    assert (settings["workload"], settings["scale"], settings["database"], settings["data_cache"]) == (
        "shop", "sf0.5", f"shop_sf0_5_{revision}", f"shop/sf0.5-{revision}")
    assert settings["placement"] == {"customers": "fast", "products": "capacity", "orders": "fast",
                                     "order_lines": "capacity"}
    assert settings["layout"] == "customers+orders"
    assert workload_of(settings) == read_workload_dir(SHOP)
    assert estimated_table_bytes(settings)["orders"] == int(int(6027767 * 1.5) * 0.5 * 1.25)


def test_a_change_to_the_schema_gives_the_database_another_name_and_a_change_of_weights_does_not(shop):
    before = read_workload_dir(shop).revision
    declare(shop, (shop / "workload.yml").read_text().replace("customer_orders: 20", "customer_orders: 5"))
    assert read_workload_dir(shop).revision == before
    (shop / "indexes.sql").write_text("CREATE INDEX orders_status ON orders (status);\n")
    assert read_workload_dir(shop).revision != before


def test_data_files_have_no_scale_factor_and_their_sizes_are_measured(shop):
    with_files(shop)
    settings = validate({"workload": "workload_dir", "workload_dir": str(shop), "layout": "None"})
    assert (settings["scale_factor"], settings["scale"], settings["data_cache"][:11]) == (None, "files", "shop/files-")
    assert estimated_table_bytes(settings)["orders"] == int(len("id\n1\n") * 1.5)


def test_without_declared_queries_every_query_file_runs_once_each(shop):
    declare(shop, (shop / "workload.yml").read_text().split("queries:")[0])
    assert read_workload_dir(shop).weights == {"category_sales": 1.0, "country_revenue": 1.0, "customer_orders": 1.0}


def test_a_layout_names_the_directory_s_tables_and_nothing_else():
    with pytest.raises(InputError) as err:
        parse_layout("orders+C", read_workload_dir(SHOP))
    assert str(err.value) == ("layout 'orders+C': unknown table code(s) 'C'; allowed: None, ALL, or codes customers "
                              "products orders order_lines joined by '+'")


def test_the_playbook_without_a_directory_says_to_give_one():
    with pytest.raises(InputError) as err:
        validate({"workload": "workload_dir"})
    assert str(err.value) == ("playbooks/workload.yml runs a workload of your own: give its directory, "
                              "-e workload_dir=/path/to/it (docs/workload-dir.md shows what it holds)")


def test_a_scale_factor_for_data_files_is_refused(shop):
    with_files(shop)
    with pytest.raises(InputError) as err:
        validate({"workload": "workload_dir", "workload_dir": str(shop), "scale_factor": "2"})
    assert str(err.value) == (f"scale_factor='2' means nothing for workload shop: its data are the files in "
                              f"{shop}/data; leave it unset, or give the workload a data command")


def test_a_workload_directory_for_tpch_is_refused():
    with pytest.raises(InputError) as err:
        validate({"workload": "tpch", "workload_dir": str(SHOP)})
    assert str(err.value).startswith(f"workload_dir={str(SHOP)!r} means nothing for workload=tpch")


def test_a_relative_directory_is_refused():
    assert refusal(Path("shop")) == "workload_dir='shop' is not an absolute path; give the directory's full path"


def test_a_directory_without_a_declaration_is_refused(tmp_path):
    assert refusal(tmp_path) == f"workload_dir={tmp_path}: there is no workload.yml in it; docs/workload-dir.md shows one"


@pytest.mark.parametrize(("text", "said"), [
    ("name: [shop\n", "is not YAML"),
    ("- shop\n", ": expected a mapping with data, name, queries, replays, tables"),
    ("name: shop\ntables: [orders]\nweights: {}\n", ": unknown key(s) weights; allowed: data, name, queries, replays, tables"),
    ("name: Shop\n", ": name 'Shop' is not allowed; allowed: lowercase letters, digits and '_', starting with a letter"),
    ("name: tpch\n", ": name 'tpch' is tierlab's own; choose another (not tpch, ssb, sysbench, observed)"),
    ("name: shop\ntables: orders\n", ": tables must be a list of the workload's table names"),
    ("name: shop\ntables: [orders, order-lines]\n", ": table name(s) 'order-lines' not allowed"),
    ("name: shop\ntables: [orders, orders]\n", ": table(s) orders listed more than once"),
    ("name: shop\ntables: [orders]\ndata: {}\n", ": data must be a mapping with one of files"),
    ("name: shop\ntables: [orders]\ndata: {files: data, command: x}\n", ": data must be a mapping with one of files"),
    ("name: shop\ntables: [orders]\ndata: {files: ../elsewhere}\n", ": data files '../elsewhere' is not a directory inside"),
    ("name: shop\ntables: [orders]\ndata: {command: python3 generate.py}\n", ": data csv_bytes_at_sf1 must give every table's"),
    ("name: shop\ntables: [orders]\ndata: {command: x, csv_bytes_at_sf1: {orders: 0}}\n", ": data csv_bytes_at_sf1 must"),
    ("name: shop\ntables: [orders]\ndata: {command: x, csv_bytes_at_sf1: {orders: 1}}\nqueries: {Top: 1}\n",
     ": query id 'Top' not allowed"),
    ("name: shop\ntables: [orders]\ndata: {command: x, csv_bytes_at_sf1: {orders: 1}}\nqueries: {customer_orders: 0}\n",
     ": query customer_orders: weight 0 is not a number above 0"),
    ("name: shop\ntables: [orders]\ndata: {command: x, csv_bytes_at_sf1: {orders: 1}}\nqueries: {missing: 1}\n",
     ": query missing has no file for the mysql dialect; write"),
])
def test_a_malformed_declaration_is_refused_with_what_is_allowed(shop, text, said):
    assert said in refusal(declare(shop, text))


def test_a_missing_data_file_is_named(shop):
    with_files(shop)
    (shop / "data" / "orders.csv").unlink()
    assert refusal(shop) == (f"{shop}/workload.yml: data files: orders in {shop}/data must each have one file, "
                             "<table>.csv or <table>.parquet (found none)")


def test_a_missing_schema_is_named(shop):
    (shop / "schema.sql").unlink()
    assert refusal(shop) == (f"{shop}/workload.yml: no schema for the mysql dialect; write {shop}/schema.sql (or "
                             "schema/mysql.sql where the engines differ)")


def with_replay(directory: Path, replays: str) -> Path:
    (directory / "logs").mkdir()
    shutil.copy(Path(__file__).with_name("postgresql_logs") / "captured.csv", directory / "logs" / "monday.csv")
    return declare(directory, (directory / "workload.yml").read_text() + replays)


def test_a_replay_is_a_step_after_the_queries_of_weight_one_replaying_the_workload_s_database(shop):
    workload = read_workload_dir(with_replay(shop, "replays: {logs: [logs/monday.csv]}\n"))
    assert workload.queries == ("customer_orders", "country_revenue", "category_sales", "monday")
    assert (workload.weights["monday"], workload.replay_database) == (1.0, "shop")
    assert workload.query_files("monday", "postgresql") == (str(shop / "logs" / "monday.csv"),)


def test_a_replay_s_log_does_not_change_the_database_s_revision(shop):
    before = read_workload_dir(shop).revision
    assert read_workload_dir(with_replay(shop, "replays: {database: crm, logs: [logs/monday.csv]}\n")).revision == before


def test_a_replay_on_mariadb_is_refused_naming_the_queries_that_can_run(shop):
    with_replay(shop, "replays: {logs: [logs/monday.csv]}\n")
    with pytest.raises(InputError) as err:
        validate({"workload": "workload_dir", "workload_dir": str(shop), "engine": "mariadb"})
    assert str(err.value) == ("monday of workload shop replay a PostgreSQL log, which engine=mariadb cannot run; use "
                              "engine=postgresql, or leave them out: queries=customer_orders,country_revenue,"
                              "category_sales")


@pytest.mark.parametrize(("replays", "said"), [
    ("replays: [logs/monday.csv]\n", "replays must be a mapping with logs"),
    ("replays: {logs: [logs/tuesday.csv]}\n", "replay 'logs/tuesday.csv' is not a .csv file inside"),
    ("replays: {logs: [workload.yml]}\n", "replay 'workload.yml' is not a .csv file inside"),
    ("replays: {logs: [./logs/monday.csv, logs/monday.csv]}\n", "its name 'monday' is its step's id"),
    ("replays: {database: 'a b', logs: [logs/monday.csv]}\n", "replays database 'a b' is not a PostgreSQL database"),
])
def test_a_malformed_replay_is_refused(shop, replays, said):
    assert said in refusal(with_replay(shop, replays))


def test_a_replay_that_is_not_a_csvlog_is_refused(shop):
    with_replay(shop, "replays: {logs: [logs/monday.csv]}\n")
    (shop / "logs" / "monday.csv").write_text("id,name\n1,x\n")
    assert refusal(shop).endswith(": replay logs/monday.csv: its first line is not a PostgreSQL csvlog line "
                                  "(log_destination=csvlog: 23 or more fields, a time first); docs/workload-dir.md "
                                  "says how to capture one")


def test_a_replay_named_as_a_query_is_refused(shop):
    (shop / "logs").mkdir()
    shutil.copy(Path(__file__).with_name("postgresql_logs") / "captured.csv", shop / "logs" / "category_sales.csv")
    declare(shop, (shop / "workload.yml").read_text() + "replays: {logs: [logs/category_sales.csv]}\n")
    assert refusal(shop).endswith(": category_sales is both a query and a replay; name each step once")


def test_a_run_s_recorded_workload_read_back_with_sorted_keys_names_layouts_in_load_order():
    settings = validate({"workload": "workload_dir", "workload_dir": str(SHOP), "layout": "orders+order_lines"})
    recorded = json.loads(json.dumps(settings, sort_keys=True))
    assert layout_name(settings["placement"], workload_of(recorded)) == "orders+order_lines"


def test_a_table_s_data_file_may_be_parquet_sized_by_its_rows_uncompressed(shop):
    with_files(shop)
    (shop / "data" / "orders.csv").unlink()
    # four row groups of 250 rows, each of the same size uncompressed
    orders = pa.table({"id": list(range(1000)), "status": ["paid"] * 1000})
    pq.write_table(orders, shop / "data" / "orders.parquet", row_group_size=250)
    workload = read_workload_dir(shop)
    assert workload.data_files == {"customers": "customers.csv", "products": "products.csv",
                                   "orders": "orders.parquet", "order_lines": "order_lines.csv"}
    metadata = pq.ParquetFile(shop / "data" / "orders.parquet").metadata
    assert metadata.num_row_groups == 4
    # 1000 ids of 8 bytes at least, however the groups encode them
    assert workload.generated_fixed_bytes["orders"] == 4 * metadata.row_group(0).total_byte_size >= 8000


def test_a_table_with_both_a_csv_and_a_parquet_file_is_refused(shop):
    with_files(shop)
    (shop / "data" / "orders.parquet").write_bytes(b"not parquet")
    assert refusal(shop) == (f"{shop}/workload.yml: data files: orders in {shop}/data must each have one file, "
                             "<table>.csv or <table>.parquet (found orders.csv, orders.parquet)")


def test_a_parquet_file_that_is_not_parquet_is_refused(shop):
    with_files(shop)
    (shop / "data" / "orders.csv").unlink()
    (shop / "data" / "orders.parquet").write_text("id\n1\n")
    assert refusal(shop).startswith(f"{shop}/data/orders.parquet is not a Parquet file: ")


def with_dumps(directory: Path, dialects: tuple[str, ...]) -> Path:
    """The shop with its data as data-only dumps (tests/unit/dumps: a real mariadb-dump --no-create-info and pg_dump
    --data-only of customers and orders)."""
    (directory / "dumps").mkdir()
    for dialect in dialects:
        shutil.copy(Path(__file__).with_name("dumps") / f"{dialect}.sql", directory / "dumps")
    return declare(directory, "name: shop\ntables: [customers, products, orders, order_lines]\ndata: {dump: dumps}\n")


def test_a_data_only_dump_per_dialect_is_the_data_and_each_table_is_sized_by_its_rows_in_it(shop):
    workload = read_workload_dir(with_dumps(shop, ("mysql", "postgresql")))
    assert (workload.generator, workload.data_source) == ("sql_dump", str(shop / "dumps"))
    assert workload.data_files == {"mysql": "mysql.sql", "postgresql": "postgresql.sql"}
    # the INSERT and its value lines, up to UNLOCK TABLES (the mysql dialect's dump, the first there is)
    assert workload.generated_fixed_bytes == {"customers": 141, "products": 0, "orders": 144, "order_lines": 0}
    settings = validate({"workload": "workload_dir", "workload_dir": str(shop), "engine": "postgresql"})
    assert (settings["scale_factor"], settings["scale"]) == (None, "files")


def test_a_run_on_an_engine_whose_dialect_has_no_dump_is_refused(shop):
    with_dumps(shop, ("postgresql",))
    with pytest.raises(InputError) as err:
        validate({"workload": "workload_dir", "workload_dir": str(shop), "engine": "mariadb"})
    assert str(err.value) == (f"workload shop's data is dumped for postgresql only ({shop}/dumps); engine=mariadb "
                              "loads a mysql.sql there")


def test_a_dump_directory_without_a_dump_is_refused(shop):
    assert refusal(with_dumps(shop, ())) == (
        f"{shop}/workload.yml: data dump: {shop}/dumps has no mysql.sql or postgresql.sql; write mysqldump "
        "--no-create-info's or pg_dump --data-only's output there")


def test_a_pg_dump_archive_is_refused_with_the_command_that_makes_it_sql(shop):
    with_dumps(shop, ())
    (shop / "dumps" / "postgresql.sql").write_bytes(b"PGDMP\x01\x0f\x00" + bytes(64))
    dump = shop / "dumps" / "postgresql.sql"
    assert refusal(shop) == (
        f"{shop}/workload.yml: data dump: {dump} is a pg_dump archive (-Fc), not SQL; tierlab loads plain SQL with psql: "
        f"pg_restore --data-only -f {dump}.plain {dump} && mv {dump}.plain {dump}")
