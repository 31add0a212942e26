"""tierlab's SSB generator against the specification's rules (O'Neil, O'Neil, Chen, revision 3)."""

import datetime
import importlib.util
from pathlib import Path

import numpy as np
import pyarrow.csv as pacsv
import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("ssb_dbgen", ROOT / "playbooks/roles/datagen/files/ssb_dbgen.py")
ssb_dbgen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ssb_dbgen)

SCALE_FACTOR = 0.01


def _read(path: Path) -> dict[str, np.ndarray]:
    """A .tbl file's columns by name, read with the types the generator wrote (the empty field after the
    last '|' checked and dropped)."""
    schema = next(ssb_dbgen.blocks(path.stem, SCALE_FACTOR, 1)).schema
    read = pacsv.read_csv(path, read_options=pacsv.ReadOptions(column_names=[*schema.names, "end"]),
                          parse_options=pacsv.ParseOptions(delimiter="|", quote_char=False),
                          convert_options=pacsv.ConvertOptions(column_types=dict(zip(schema.names, schema.types, strict=True))))
    assert read.column("end").null_count == read.num_rows, f"{path.name}: a line does not end with '|'"
    return {name: read.column(name).to_numpy(zero_copy_only=False) for name in schema.names}


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    out = tmp_path_factory.mktemp("ssb")
    return {table: _read(ssb_dbgen.write(table, SCALE_FACTOR, 1, out)) for table in ssb_dbgen.TABLES}


def test_cardinalities_follow_the_scale_factor():
    assert ssb_dbgen.row_counts(1) == {"date": 2557, "supplier": 2000, "customer": 30000, "part": 200000,
                                       "orders": 1500000}
    # PART grows with 1 + log2(SF), floored
    assert ssb_dbgen.row_counts(4)["part"] == 600000
    assert ssb_dbgen.row_counts(10)["part"] == 800000
    assert ssb_dbgen.row_counts(10)["customer"] == 300000


def test_each_table_has_its_rows_at_a_small_scale_factor(tables):
    counts = {"date": 2557, "supplier": 20, "customer": 300, "part": 2000, "orders": 15000}
    assert ssb_dbgen.row_counts(SCALE_FACTOR) == counts
    for table in ("date", "supplier", "customer", "part"):
        assert len(next(iter(tables[table].values()))) == counts[table]
    orders = tables["lineorder"]["lo_orderkey"]
    assert np.array_equal(np.unique(orders), np.arange(1, counts["orders"] + 1))
    # 1 to 7 lines per order, 4 on average
    assert 3.8 * counts["orders"] < len(orders) < 4.2 * counts["orders"]


def test_an_order_s_lines_are_numbered_from_one_and_share_the_order_s_fields(tables):
    lo = tables["lineorder"]
    first = np.r_[True, lo["lo_orderkey"][1:] != lo["lo_orderkey"][:-1]]
    assert np.all(lo["lo_linenumber"][first] == 1)
    assert np.all(lo["lo_linenumber"][~first] == lo["lo_linenumber"][np.flatnonzero(~first) - 1] + 1)
    assert lo["lo_linenumber"].max() == 7
    for field in ("lo_custkey", "lo_orderdate", "lo_orderpriority", "lo_ordtotalprice"):
        same = lo[field][1:] == lo[field][:-1]
        assert np.all(same[~first[1:]]), field


def test_lineorder_values_stay_in_their_domains(tables):
    lo = tables["lineorder"]
    assert (lo["lo_quantity"].min(), lo["lo_quantity"].max()) == (1, 50)
    assert (lo["lo_discount"].min(), lo["lo_discount"].max()) == (0, 10)
    assert (lo["lo_tax"].min(), lo["lo_tax"].max()) == (0, 8)
    assert set(lo["lo_orderpriority"]) == set(ssb_dbgen.PRIORITIES)
    assert set(lo["lo_shipmode"]) == set(ssb_dbgen.SHIP_MODES)
    assert set(lo["lo_shippriority"]) == {0}


def test_prices_follow_the_part_quantity_and_discount(tables):
    lo = tables["lineorder"]
    price = ssb_dbgen.part_price_cents(lo["lo_partkey"])
    assert np.array_equal(lo["lo_extendedprice"], lo["lo_quantity"] * price)
    assert np.array_equal(lo["lo_revenue"], lo["lo_extendedprice"] * (100 - lo["lo_discount"]) // 100)
    assert np.array_equal(lo["lo_supplycost"], price * 6 // 10)
    # TPC-H's retail price in cents: 90000 + (key / 10) mod 20001 + 100 (key mod 1000)
    assert ssb_dbgen.part_price_cents(np.array([1, 2, 1000, 200000])).tolist() == [90100, 90200, 90100, 110000]


def test_every_foreign_key_is_in_its_dimension(tables):
    lo = tables["lineorder"]
    assert np.isin(lo["lo_custkey"], tables["customer"]["c_custkey"]).all()
    assert np.isin(lo["lo_partkey"], tables["part"]["p_partkey"]).all()
    assert np.isin(lo["lo_suppkey"], tables["supplier"]["s_suppkey"]).all()
    assert np.isin(lo["lo_orderdate"], tables["date"]["d_datekey"]).all()
    assert np.isin(lo["lo_commitdate"], tables["date"]["d_datekey"]).all()


def test_commit_dates_fall_30_to_90_days_after_the_order(tables):
    lo = tables["lineorder"]

    def days(keys):
        return np.array([datetime.datetime.strptime(str(k), "%Y%m%d").toordinal() for k in keys])
    waited = days(lo["lo_commitdate"]) - days(lo["lo_orderdate"])
    assert (waited.min(), waited.max()) == (30, 90)
    assert lo["lo_orderdate"].max() <= 19980802


def test_cities_are_ten_per_nation_and_regions_follow_nations(tables):
    regions = dict(ssb_dbgen.NATIONS)
    for prefix in ("c", "s"):
        table = tables["customer" if prefix == "c" else "supplier"]
        city, nation, region = table[f"{prefix}_city"], table[f"{prefix}_nation"], table[f"{prefix}_region"]
        assert all(c[:9] == n[:9].ljust(9) and c[9].isdigit() and len(c) == 10 for c, n in zip(city, nation, strict=True))
        assert all(regions[n] == r for n, r in zip(nation, region, strict=True))
    assert "UNITED KI1" in set(tables["customer"]["c_city"])
    assert set(tables["customer"]["c_mktsegment"]) == set(ssb_dbgen.SEGMENTS)


def test_part_brands_are_in_their_category_and_categories_in_their_manufacturer(tables):
    part = tables["part"]
    assert set(part["p_mfgr"]) == {f"MFGR#{m}" for m in range(1, 6)}
    assert set(part["p_category"]) == {f"MFGR#{m}{c}" for m in range(1, 6) for c in range(1, 6)}
    assert all(c.startswith(m) for m, c in zip(part["p_mfgr"], part["p_category"], strict=True))
    assert all(b.startswith(c) and 1 <= int(b[len(c):]) <= 40 for c, b in zip(part["p_category"], part["p_brand1"], strict=True))
    assert all(name.split()[0] == color for name, color in zip(part["p_name"], part["p_color"], strict=True))
    assert (part["p_size"].min(), part["p_size"].max()) == (1, 50)


def test_date_holds_every_day_of_1992_to_1998(tables):
    d = tables["date"]
    assert (d["d_datekey"][0], d["d_datekey"][-1], len(d["d_datekey"])) == (19920101, 19981231, 2557)
    first = {name: values[0] for name, values in d.items()}
    assert first == {
        "d_datekey": 19920101, "d_date": "January 1, 1992", "d_dayofweek": "Wednesday", "d_month": "January",
        "d_year": 1992, "d_yearmonthnum": 199201, "d_yearmonth": "Jan1992", "d_daynuminweek": 4,
        "d_daynuminmonth": 1, "d_daynuminyear": 1, "d_monthnuminyear": 1, "d_weeknuminyear": 1,
        "d_sellingseason": "Winter", "d_lastdayinweekfl": 0, "d_lastdayinmonthfl": 0, "d_holidayfl": 1,
        "d_weekdayfl": 1,
    }
    assert d["d_weeknuminyear"].max() == 53
    assert d["d_daynuminyear"].max() == 366
    assert d["d_lastdayinmonthfl"].sum() == 7 * 12


def test_the_same_seed_writes_the_same_bytes_and_another_seed_other_ones(tmp_path):
    written = []
    for run, seed in enumerate((1, 1, 2)):
        (tmp_path / str(run)).mkdir()
        written.append(ssb_dbgen.write("lineorder", SCALE_FACTOR, seed, tmp_path / str(run)).read_bytes())
    first, again, other = written
    assert first == again
    assert first != other
