import pytest

from tierlab.catalog.layout import layout_name, parse_layout
from tierlab.catalog.workloads import TPCH
from tierlab.errors import InputError

TABLES = {"customer", "orders", "lineitem", "partsupp", "part", "supplier", "nation", "region"}


def fast_tables(placement):
    return {t for t, tier in placement.items() if tier == "fast"}


def test_none_puts_every_table_on_the_capacity_tier():
    placement = parse_layout("None", TPCH)
    assert set(placement) == TABLES
    assert fast_tables(placement) == set()


def test_all_puts_every_table_on_the_fast_tier():
    assert fast_tables(parse_layout("ALL", TPCH)) == TABLES


def test_codes_joined_by_plus_name_the_fast_tables():
    placement = parse_layout("C+O", TPCH)
    assert fast_tables(placement) == {"customer", "orders"}
    assert placement["lineitem"] == "capacity"


def test_two_letter_codes_are_distinct_from_one_letter_codes():
    assert fast_tables(parse_layout("PS+P+S", TPCH)) == {"partsupp", "part", "supplier"}


def test_unknown_code_is_named_with_the_allowed_codes():
    with pytest.raises(InputError) as err:
        parse_layout("C+X", TPCH)
    assert str(err.value) == (
        "layout 'C+X': unknown table code(s) 'X'; allowed: None, ALL, or codes C O L PS P S N R joined by '+'"
    )


def test_codes_are_case_sensitive():
    with pytest.raises(InputError, match="unknown table code\\(s\\) 'c', 'o'"):
        parse_layout("c+o", TPCH)


def test_repeated_code_is_refused():
    with pytest.raises(InputError) as err:
        parse_layout("C+O+C", TPCH)
    assert str(err.value) == "layout 'C+O+C': table code(s) C given more than once; name each table once"


def test_empty_layout_is_refused():
    with pytest.raises(InputError, match="unknown table code"):
        parse_layout("", TPCH)


def test_none_cannot_be_combined_with_codes():
    with pytest.raises(InputError, match="'None'"):
        parse_layout("None+C", TPCH)


def test_canonical_name_follows_the_code_order():
    assert layout_name(parse_layout("O+C", TPCH), TPCH) == "C+O"
    assert layout_name(parse_layout("None", TPCH), TPCH) == "None"
    assert layout_name(parse_layout("C+O+L+PS+P+S+N+R", TPCH), TPCH) == "ALL"
