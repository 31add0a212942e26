from pathlib import Path

import pytest

from tierlab_host.subqueries import split
from tierlab_host.system import HostError

Q2_1 = (Path(__file__).resolve().parents[2] / "queries" / "ssb" / "q2.1.sql").read_text()


def test_each_subquery_adds_one_key_range_to_the_where_clause_and_the_last_is_open_above():
    assert split(Q2_1, "part", "p_partkey", ["1", "51", "101"]) == [
        Q2_1.replace("WHERE ", "WHERE p_partkey >= 1 AND p_partkey < 51 AND ", 1),
        Q2_1.replace("WHERE ", "WHERE p_partkey >= 51 AND p_partkey < 101 AND ", 1),
        Q2_1.replace("WHERE ", "WHERE p_partkey >= 101 AND ", 1)]


def test_a_range_of_blocks_names_its_table_s_ctid_which_every_table_has():
    assert split(Q2_1, "lineorder", "ctid", ["'(0,0)'", "'(120,0)'"]) == [
        Q2_1.replace("WHERE ", "WHERE lineorder.ctid >= '(0,0)' AND lineorder.ctid < '(120,0)' AND ", 1),
        Q2_1.replace("WHERE ", "WHERE lineorder.ctid >= '(120,0)' AND ", 1)]


def test_ranges_that_start_at_the_same_key_are_empty():
    assert "WHERE p_partkey >= 7 AND p_partkey < 7 AND" in split(Q2_1, "part", "p_partkey", ["7", "7", "8"])[0]


@pytest.mark.parametrize("sql", ["SELECT 1", "SELECT a FROM t WHERE a IN (SELECT b FROM u WHERE b > 1)"])
def test_a_query_without_exactly_one_where_clause_is_refused(sql):
    with pytest.raises(HostError, match="^a query split into subqueries needs one WHERE clause"):
        split(sql, "t", "k", ["1", "2"])
