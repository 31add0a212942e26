"""The statements that move a run's tables to another layout: PostgreSQL's in SQL, the MySQL family's offline."""

import pytest

from tierlab.errors import RunDirError
from tierlab.placement.migration_script import migration_plan

TIERS = [{"name": "optane", "role": "fast", "path": "/t/optane"}, {"name": "nand", "role": "capacity", "path": "/t/nand"}]
TABLES = {
    "customer": {"tier": "fast", "size_bytes": 4 << 20, "stored_bytes": 4 << 20,
                 "files": [{"object": "customer", "kind": "table"}, {"object": "customer.fsm", "kind": "table"},
                           {"object": "customer_pkey", "kind": "index"}]},
    "lineitem": {"tier": "capacity", "size_bytes": 64 << 20, "stored_bytes": 32 << 20,
                 "files": [{"object": "lineitem", "kind": "table"}, {"object": "lineitem_pkey", "kind": "index"},
                           {"object": "Lineitem Suppkey", "kind": "index"}]},
    "nation": {"tier": "capacity", "size_bytes": 8192, "files": [{"object": "nation", "kind": "table"}]},
}
START = {"customer": "fast", "lineitem": "capacity", "nation": "capacity"}
END = {"customer": "capacity", "lineitem": "fast", "nation": "capacity"}
# 1 MiB/s from the fast tier to the capacity tier, 2 MiB/s the other way
RATES = {("fast", "capacity"): float(1 << 20), ("capacity", "fast"): float(2 << 20)}
POSTGRESQL = {"name": "postgresql", "version": "15.18",
              "tablespaces": {"tierlab_fast": {"location": "/t/optane/postgresql-8k/tablespace", "options": ""},
                              "tierlab_capacity": {"location": "/t/nand/postgresql-8k/tablespace", "options": ""}}}
MARIADB = {"name": "mariadb", "version": "10.11.19-MariaDB", "settings": {"datadir": "/t/nand/mariadb-16k/datadir/"},
           "table_dirs": {"fast": "/t/optane/mariadb-16k/tables", "capacity": "/t/nand/mariadb-16k/tables"}}


def manifest(engine: dict) -> dict:
    return {"run_id": "r1", "tiers": TIERS, "engine": engine, "settings": {"database": "tpch_sf1"},
            "layout": {"name": "C", "tables": TABLES}}


def test_the_table_leaving_the_fast_tier_moves_first_with_its_indexes_and_the_undo_moves_them_back():
    plan = migration_plan(manifest(POSTGRESQL), START, END, RATES)
    assert [(s["table"], s["from"], s["to"], s["bytes"], s["predicted_s"]) for s in plan["steps"]] == [
        ("customer", "fast", "capacity", 4 << 20, 4.0), ("lineitem", "capacity", "fast", 32 << 20, 16.0)]
    assert [(s["table"], s["from"], s["to"]) for s in plan["undo"]] == [
        ("lineitem", "fast", "capacity"), ("customer", "capacity", "fast")]


def test_postgresql_moves_each_table_and_each_index_by_set_tablespace_with_every_name_quoted():
    plan = migration_plan(manifest(POSTGRESQL), START, END, RATES)
    assert [s["lines"] for s in plan["steps"]] == [
        ['ALTER TABLE "customer" SET TABLESPACE "tierlab_capacity";',
         'ALTER INDEX "customer_pkey" SET TABLESPACE "tierlab_capacity";'],
        ['ALTER TABLE "lineitem" SET TABLESPACE "tierlab_fast";',
         'ALTER INDEX "Lineitem Suppkey" SET TABLESPACE "tierlab_fast";',
         'ALTER INDEX "lineitem_pkey" SET TABLESPACE "tierlab_fast";']]
    assert plan["undo"][0]["lines"][0] == 'ALTER TABLE "lineitem" SET TABLESPACE "tierlab_capacity";'
    assert plan["downtime_s"] == 0.0


def test_postgresql_s_script_makes_a_missing_tablespace_and_says_each_step_s_bytes_wal_and_lock():
    script = migration_plan(manifest(POSTGRESQL), START, END, RATES)["files"]["migration.sql"].splitlines()
    assert script[0] == "-- Apply with: psql -X -v ON_ERROR_STOP=1 -d tpch_sf1 -f FILE"
    assert ("SELECT format('CREATE TABLESPACE %I LOCATION %L', 'tierlab_fast', '/t/optane/postgresql-8k/tablespace') "
            "WHERE NOT EXISTS (SELECT FROM pg_tablespace WHERE spcname = 'tierlab_fast') \\gexec") in script
    assert ("-- Step 1 of 2: customer (indexes: customer_pkey) from the fast tier to the capacity tier: 4.0 MiB copied "
            "(as much free space needed there), about 4 s on the measured devices; about 4.0 MiB of WAL (every page "
            "copied is logged unless wal_level = minimal), which each standby replays.") in script
    assert ("-- Lock: ACCESS EXCLUSIVE on customer, then on each of its indexes, while it is copied: the table's reads "
            "and writes wait (online instead: pg_repack --no-order --tablespace=tierlab_capacity --moveidx "
            "--table=customer).") in script


def test_mariadb_moves_each_table_s_file_offline_and_points_its_isl_at_the_new_place():
    plan = migration_plan(manifest(MARIADB), START, END, RATES)
    assert [s["lines"] for s in plan["steps"]] == [
        ["move /t/optane/mariadb-16k/tables/tpch_sf1/customer.ibd /t/nand/mariadb-16k/tables/tpch_sf1/customer.ibd "
         "/t/nand/mariadb-16k/datadir/tpch_sf1/customer.isl"],
        ["move /t/nand/mariadb-16k/tables/tpch_sf1/lineitem.ibd /t/optane/mariadb-16k/tables/tpch_sf1/lineitem.ibd "
         "/t/nand/mariadb-16k/datadir/tpch_sf1/lineitem.isl"]]
    assert plan["downtime_s"] == 20.0
    script = plan["files"]["migration.sh"].splitlines()
    assert script[:3] == ["#!/bin/sh", "# Offline: stop the server, run this as root, start the server (MariaDB reads "
                                       "each moved table's .isl when it opens it).",
                          "# Downtime: about 20 s of copying on the measured devices."]


def test_mysql_finds_moved_files_in_innodb_directories_and_has_no_isl():
    plan = migration_plan(manifest({**MARIADB, "name": "mysql"}), START, END, RATES)
    assert plan["steps"][0]["lines"] == [
        "move /t/optane/mariadb-16k/tables/tpch_sf1/customer.ibd /t/nand/mariadb-16k/tables/tpch_sf1/customer.ibd ''"]
    assert ("innodb_directories must list /t/optane/mariadb-16k/tables and /t/nand/mariadb-16k/tables"
            in plan["files"]["migration.sh"])


def test_a_run_that_did_not_record_its_table_directories_has_no_script_and_says_why():
    engine = {key: value for key, value in MARIADB.items() if key != "table_dirs"}
    with pytest.raises(RunDirError, match="run r1 does not record its engine's table directories"):
        migration_plan(manifest(engine), START, END, RATES)


def test_a_placement_that_moves_nothing_has_no_step_and_its_check_names_no_object():
    plan = migration_plan(manifest(POSTGRESQL), START, START, RATES)
    assert (plan["steps"], plan["undo"]) == ([], [])
    assert "FROM unnest(ARRAY[]::text[]) AS name" in plan["files"]["migration.sql"]


# a PostgreSQL run placed by object: a table and its index units of their own
UNITS = {"orders": {"tier": "fast", "size_bytes": 8 << 20, "stored_bytes": 8 << 20,
                    "files": [{"object": "orders", "kind": "table"}, {"object": "orders.toast", "kind": "toast"}]},
         "orders_customer": {"tier": "capacity", "size_bytes": 2 << 20, "stored_bytes": 2 << 20,
                             "files": [{"object": "orders_customer", "kind": "index"},
                                       {"object": "orders_customer.fsm", "kind": "index"}]}}


def test_units_placed_by_object_move_a_table_alone_and_an_index_alone_each_with_its_own_lock():
    plan = migration_plan(manifest(POSTGRESQL), {"orders": "fast", "orders_customer": "capacity"},
                          {"orders": "capacity", "orders_customer": "fast"}, RATES, units=UNITS)
    assert [(s["table"], s["kind"], s["indexes"], s["lines"]) for s in plan["steps"]] == [
        ("orders", "table", [], ['ALTER TABLE "orders" SET TABLESPACE "tierlab_capacity";']),
        ("orders_customer", "index", [], ['ALTER INDEX "orders_customer" SET TABLESPACE "tierlab_fast";'])]
    assert [s["lock"] for s in plan["steps"]] == [
        "ACCESS EXCLUSIVE on orders while it is copied: the table's reads and writes wait (online instead: pg_repack "
        "--no-order --tablespace=tierlab_capacity --table=orders)",
        "ACCESS EXCLUSIVE on orders_customer while it is copied: reads and writes of its table wait (online instead: "
        "CREATE INDEX CONCURRENTLY a copy of it in TABLESPACE tierlab_fast, then DROP INDEX CONCURRENTLY "
        "orders_customer)"]
    assert [s["lines"] for s in plan["undo"]] == [['ALTER INDEX "orders_customer" SET TABLESPACE "tierlab_capacity";'],
                                                  ['ALTER TABLE "orders" SET TABLESPACE "tierlab_fast";']]


OBSERVED_TABLES = {
    "app.public.hot_k": {"tier": "capacity", "size_bytes": 32 << 20, "stored_bytes": 32 << 20, "files": [
        {"object": "app.public.hot_k", "kind": "index", "tablespace": "pg_default",
         "qualified": ["app", "public", "hot_k"]}]},
    "crm.Sales.Order Lines": {"tier": "capacity", "size_bytes": 8 << 20, "stored_bytes": 8 << 20, "files": [
        {"object": "crm.Sales.Order Lines", "kind": "table", "tablespace": "slow_disks",
         "qualified": ["crm", "Sales", "Order Lines"]},
        {"object": "crm.Sales.Order Lines.toast", "kind": "toast", "tablespace": "slow_disks"}]},
    "pg_wal": {"tier": "capacity", "size_bytes": 16 << 20, "files": [{"object": "pg_wal", "kind": "wal"}]},
}


def observed(engine: dict) -> dict:
    return {"run_id": "o1", "tiers": [{"name": "sdb", "role": "capacity", "device": "8:16"}], "engine": engine,
            "settings": {"workload": "observed", "placement": None}, "layout": {"name": "observed", "tables": OBSERVED_TABLES}}


NOTHING_FAST = dict.fromkeys(OBSERVED_TABLES, "capacity")
BOTH_FAST = {**NOTHING_FAST, "app.public.hot_k": "fast", "crm.Sales.Order Lines": "fast"}


def test_an_observed_instance_s_objects_move_database_by_database_to_a_tablespace_made_at_the_fast_location():
    plan = migration_plan(observed({"name": "postgresql", "version": "15.18"}), NOTHING_FAST, BOTH_FAST, RATES,
                          "/mnt/optane/pg")
    assert [s["lines"] for s in plan["steps"]] == [
        ['ALTER INDEX "public"."hot_k" SET TABLESPACE "tierlab_fast";'],
        ['ALTER TABLE "Sales"."Order Lines" SET TABLESPACE "tierlab_fast";']]
    script = plan["files"]["migration.sql"]
    assert "SELECT format('CREATE TABLESPACE %I LOCATION %L', 'tierlab_fast', '/mnt/optane/pg')" in script
    steps = script[script.index("-- Step 1 of 2"):]
    assert steps.index('\\connect "app"') < steps.index('ALTER INDEX "public"."hot_k"') \
        < steps.index('\\connect "crm"') < steps.index('ALTER TABLE "Sales"."Order Lines"')


def test_an_observed_instance_s_undo_takes_each_object_back_to_the_tablespace_it_was_observed_in():
    plan = migration_plan(observed({"name": "postgresql", "version": "15.18"}), NOTHING_FAST, BOTH_FAST, RATES,
                          "/mnt/optane/pg")
    assert [s["lines"] for s in plan["undo"]] == [
        ['ALTER INDEX "public"."hot_k" SET TABLESPACE "pg_default";'],
        ['ALTER TABLE "Sales"."Order Lines" SET TABLESPACE "slow_disks";']]


def test_an_observed_instance_s_migration_needs_the_fast_location():
    with pytest.raises(RunDirError, match="give --fast-location DIR"):
        migration_plan(observed({"name": "postgresql", "version": "15.18"}), NOTHING_FAST, BOTH_FAST, RATES)


OBSERVED_MARIADB_TABLES = {
    "app.hot": {"tier": "capacity", "size_bytes": 36 << 20, "stored_bytes": 36 << 20, "files": [
        {"object": "app.hot", "kind": "table", "path": "/var/lib/mysql/app/hot.ibd", "qualified": ["app", "hot"]},
        {"object": "app.hot.hot_k", "kind": "index", "path": "/var/lib/mysql/app/hot.ibd"}]},
    "app.order lines": {"tier": "capacity", "size_bytes": 8 << 20, "stored_bytes": 8 << 20, "files": [
        {"object": "app.order lines", "kind": "table", "path": "/srv/slow/app/order@0020lines.ibd",
         "qualified": ["app", "order lines"]}]},
    "app.events": {"tier": "capacity", "size_bytes": 4 << 20, "stored_bytes": 4 << 20, "files": [
        {"object": "app.events#p0", "kind": "table", "path": "/var/lib/mysql/app/events#P#p0.ibd"}]},
}


def observed_mariadb() -> dict:
    return {**observed({**MARIADB, "data_directory": "/var/lib/mysql/"}),
            "layout": {"name": "observed", "tables": OBSERVED_MARIADB_TABLES}}


def test_an_observed_mysql_family_instance_s_tables_are_rebuilt_on_the_fast_tier_and_back_where_they_were():
    start = dict.fromkeys(OBSERVED_MARIADB_TABLES, "capacity")
    plan = migration_plan(observed_mariadb(), start, dict.fromkeys(OBSERVED_MARIADB_TABLES, "fast"), RATES,
                          "/mnt/optane/mysql")
    assert [(s["table"], s["lines"]) for s in plan["steps"]] == [
        ("app.events", ["# app.events is partitioned: place its partitions by hand (ALTER TABLE ... REORGANIZE "
                        "PARTITION ... DATA DIRECTORY)"]),
        ("app.hot", ["rebuild app hot /mnt/optane/mysql"]),
        ("app.order lines", ["rebuild app 'order lines' /mnt/optane/mysql"])]
    assert [s["lines"] for s in plan["undo"]][1:] == [["rebuild app hot ''"], ["rebuild app 'order lines' /srv/slow"]]
    assert plan["files"]["migration.sh"].startswith("#!/bin/sh\n# Online, table by table: run this as root")
    assert "rebuild() {" in plan["files"]["migration-undo.sh"]


def test_an_observed_mysql_family_instance_s_migration_needs_the_fast_location():
    with pytest.raises(RunDirError, match="give --fast-location DIR: the directory on the fast device"):
        migration_plan(observed_mariadb(), dict.fromkeys(OBSERVED_MARIADB_TABLES, "capacity"),
                       dict.fromkeys(OBSERVED_MARIADB_TABLES, "fast"), RATES)


def test_postgresql_s_script_first_stops_with_the_objects_that_no_longer_exist_before_anything_moves():
    script = migration_plan(manifest(POSTGRESQL), START, END, RATES)["files"]["migration.sql"]
    check = ("  SELECT string_agg(name, ', ') INTO gone FROM unnest(ARRAY['\"customer\"', '\"customer_pkey\"', "
             "'\"lineitem\"', '\"Lineitem Suppkey\"', '\"lineitem_pkey\"']::text[]) AS name WHERE to_regclass(name) IS NULL;\n"
             "  IF gone IS NOT NULL THEN RAISE EXCEPTION 'the plan names objects that no longer exist: %; nothing was "
             "moved: make a new plan from a current run or observation', gone; END IF;")
    assert check in script
    assert script.index(check) < script.index("SELECT format('CREATE TABLESPACE") < script.index("ALTER TABLE")


def test_an_observed_instance_s_script_checks_each_database_s_objects_before_the_first_move():
    script = migration_plan(observed({"name": "postgresql", "version": "15.18"}), NOTHING_FAST, BOTH_FAST, RATES,
                            "/mnt/optane/pg")["files"]["migration.sql"]
    assert script.index("unnest(ARRAY['\"public\".\"hot_k\"']::text[])") < script.index(
        "unnest(ARRAY['\"Sales\".\"Order Lines\"']::text[])") < script.index("ALTER INDEX")


def test_the_mysql_family_s_scripts_stop_before_anything_moves_when_a_table_is_gone():
    offline = migration_plan(manifest(MARIADB), START, END, RATES)["files"]["migration-undo.sh"]
    assert ('[ -f /t/optane/mariadb-16k/tables/tpch_sf1/lineitem.ibd ] || gone="$gone "'
            '/t/optane/mariadb-16k/tables/tpch_sf1/lineitem.ibd') in offline
    rebuilt = migration_plan(observed_mariadb(), dict.fromkeys(OBSERVED_MARIADB_TABLES, "capacity"),
                             dict.fromkeys(OBSERVED_MARIADB_TABLES, "fast"), RATES, "/mnt/optane/mysql")
    script = rebuilt["files"]["migration.sh"]
    assert "exists app 'order lines' || gone=\"$gone \"'app.order lines'" in script
    stop = ('if [ -n "$gone" ]; then echo "the plan names objects that no longer exist: $gone; nothing was moved: make '
            'a new plan from a current run or observation" >&2; exit 1; fi')
    assert script.index(stop) < script.index("rebuild app hot")
