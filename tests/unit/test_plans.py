"""How a plan reads each table, from plans the three engines wrote in tierlab runs (TPC-H Q3 at SF 0.01, Q15 at 0.1)."""

import json
from pathlib import Path

import pytest

from tierlab.catalog.workloads import TPCH as TPCH_WORKLOAD
from tierlab.metrics.plans import plan_accesses, table_aliases

PLANS = Path(__file__).parent / "plans"
TPCH = set(TPCH_WORKLOAD.codes.values())


def accesses(engine: str, query: str = "q03") -> list[tuple[str, str, str]]:
    plan = json.loads((PLANS / f"{engine}_{query}.json").read_text())
    return [(a["table"], a["index"], a["access"]) for a in plan_accesses(engine, plan, TPCH)]


@pytest.mark.parametrize("engine", ["mariadb", "mysql"])
def test_mysql_family_plans_scan_customer_and_look_up_orders_and_lineitem(engine):
    # MariaDB's EXPLAIN names join types (ALL, ref), MySQL 9's names iterators (table, index lookup)
    assert accesses(engine) == [("customer", "", "table scan"), ("orders", "orders_custkey", "index lookup"),
                                ("lineitem", "PRIMARY", "index lookup")]


def test_a_mariadb_hash_join_reads_its_inner_table_whole():
    # SSB Q1.3 with LINEORDER's secondary indexes ignored (join_plan=hash): DATE scanned, LINEORDER scanned into
    # a hashed join buffer (access type hash_ALL, join type BNLH)
    plan = json.loads((PLANS / "mariadb_ssb_q1.3_hash.json").read_text())
    assert [(a["table"], a["index"], a["access"]) for a in plan_accesses("mariadb", plan, {"lineorder", "date"})] == [
        ("date", "", "table scan"), ("lineorder", "", "table scan")]


def test_postgresql_scans_orders_and_customer_and_probes_lineitem_s_primary_key_per_row():
    assert accesses("postgresql") == [("orders", "", "table scan"), ("customer", "", "table scan"),
                                      ("lineitem", "lineitem_pkey", "index lookup")]


def test_a_postgresql_subquery_s_tid_range_scan_is_its_share_of_a_table_scan():
    # SSB Q1.1's first of four subqueries under join_plan=hash: LINEORDER's blocks 0-213 by a Tid Range Scan
    plan = json.loads((PLANS / "postgresql_ssb_q1.1_split_hash.json").read_text())
    assert [(a["table"], a["index"], a["access"]) for a in plan_accesses("postgresql", plan, {"lineorder", "date"})] == [
        ("lineorder", "", "table scan"), ("date", "", "table scan")]


def test_a_postgresql_bitmap_scan_names_the_table_and_its_index():
    plan = {"Plan": {"Node Type": "Bitmap Heap Scan", "Relation Name": "lineitem", "Plans": [
        {"Node Type": "Bitmap Index Scan", "Index Name": "lineitem_suppkey", "Parent Relationship": "Outer"}]}}
    assert plan_accesses("postgresql", plan, TPCH) == [{"table": "lineitem", "index": "lineitem_suppkey",
                                                  "access": "bitmap scan"}]


def test_a_cte_read_twice_is_not_a_stored_table_and_mysql_groups_lineitem_by_a_full_index_scan():
    # TPC-H Q15 on MySQL 9.7 at SF 0.1: the CTE revenue0 is scanned twice; it groups lineitem in the order
    # of lineitem_suppkey (one scan of the index, a lookup of the clustered row per entry)
    assert accesses("mysql", "q15") == [("lineitem", "lineitem_suppkey", "index scan"),
                                        ("supplier", "PRIMARY", "index lookup")]


def test_derived_tables_are_not_stored_tables():
    plan = {"query_block": {"table": {"table_name": "<derived2>", "access_type": "ALL", "materialized": {
        "query_block": {"table": {"table_name": "lineitem", "access_type": "range", "key": "PRIMARY"}}}}}}
    assert plan_accesses("mariadb", plan, TPCH) == [{"table": "lineitem", "index": "PRIMARY", "access": "index scan"}]


def test_a_mariadb_plan_names_aliased_tables_by_the_query_s_aliases():
    # TPC-H Q21 on MariaDB 10.11 at SF 1: lineitem is read as l1, l2 and (in the EXISTS subquery) l3
    sql = (Path(__file__).parents[2] / "queries" / "tpch" / "q21.sql").read_text()
    plan = json.loads((PLANS / "mariadb_q21.json").read_text())
    assert [(a["table"], a["index"], a["access"]) for a in plan_accesses("mariadb", plan, TPCH, sql)] == [
        ("nation", "", "table scan"), ("supplier", "supplier_nationkey", "index lookup"),
        ("lineitem", "lineitem_suppkey", "index lookup"), ("orders", "PRIMARY", "index lookup"),
        ("lineitem", "PRIMARY", "index lookup"), ("lineitem", "PRIMARY", "index lookup")]


def test_aliases_are_the_words_after_a_table_that_are_no_sql():
    sql = "select * from nation n1, nation as n2, lineitem where x join orders on y"
    assert table_aliases(sql, TPCH) == {"n1": "nation", "n2": "nation"}
