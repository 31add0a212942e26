"""Star Schema Benchmark data, as the specification defines it (P. O'Neil, E. O'Neil, X. Chen,
"Star Schema Benchmark", revision 3, 2009): LINEORDER, CUSTOMER, SUPPLIER, PART and DATE, one
`<table>.tbl` file each, fields separated and ended by '|' like TPC-H's dbgen writes them.

    ssb_dbgen.py --scale-factor 1 --table lineorder --output-dir DIR [--seed 1]

Deterministic for a seed: each table (and each block of orders) draws from its own stream.
Where the specification leaves a rule open, TPC-H's (which SSB derives from) is taken:
orders have 1 to 7 lines, order dates are uniform from 1992-01-01 to 151 days before the end
of 1998, commit dates 30 to 90 days after the order, a part's price is TPC-H's retail price,
the supply cost 60% of it. Money is in cents (whole numbers), so that every engine sums it
exactly. Below scale factor 1, PART scales linearly (the specification's 200,000 x
floor(1 + log2 SF) is meant for SF >= 1).
"""

import argparse
import datetime
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

TABLES = ("date", "supplier", "customer", "part", "lineorder")
FIRST_DAY = datetime.date(1992, 1, 1)
LAST_DAY = datetime.date(1998, 12, 31)
# orders are placed up to this many days before LAST_DAY (TPC-H's rule), so that commit dates stay in DATE
ORDER_DAYS_BEFORE_END = 151
ORDERS_PER_SF = 1_500_000
CUSTOMERS_PER_SF = 30_000
SUPPLIERS_PER_SF = 2_000
PARTS_BASE = 200_000
# orders are generated this many at a time, each block from its own stream, to bound memory
ORDER_BLOCK = 250_000

NATIONS = (  # name, region (TPC-H's 25 nations)
    ("ALGERIA", "AFRICA"), ("ARGENTINA", "AMERICA"), ("BRAZIL", "AMERICA"), ("CANADA", "AMERICA"),
    ("EGYPT", "MIDDLE EAST"), ("ETHIOPIA", "AFRICA"), ("FRANCE", "EUROPE"), ("GERMANY", "EUROPE"),
    ("INDIA", "ASIA"), ("INDONESIA", "ASIA"), ("IRAN", "MIDDLE EAST"), ("IRAQ", "MIDDLE EAST"),
    ("JAPAN", "ASIA"), ("JORDAN", "MIDDLE EAST"), ("KENYA", "AFRICA"), ("MOROCCO", "AFRICA"),
    ("MOZAMBIQUE", "AFRICA"), ("PERU", "AMERICA"), ("CHINA", "ASIA"), ("ROMANIA", "EUROPE"),
    ("SAUDI ARABIA", "MIDDLE EAST"), ("VIETNAM", "ASIA"), ("RUSSIA", "EUROPE"), ("UNITED KINGDOM", "EUROPE"),
    ("UNITED STATES", "AMERICA"),
)
SEGMENTS = ("AUTOMOBILE", "BUILDING", "FURNITURE", "MACHINERY", "HOUSEHOLD")
PRIORITIES = ("1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW")
SHIP_MODES = ("REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB")
COLORS = (
    "almond antique aquamarine azure beige bisque black blanched blue blush brown burlywood burnished chartreuse "
    "chiffon chocolate coral cornflower cornsilk cream cyan dark deep dim dodger drab firebrick floral forest "
    "frosted gainsboro ghost goldenrod green grey honeydew hot indian ivory khaki lace lavender lawn lemon light "
    "lime linen magenta maroon medium metallic midnight mint misty moccasin navajo navy olive orange orchid pale "
    "papaya peach peru pink plum powder puff purple red rose rosy royal saddle salmon sandy seashell sienna sky "
    "slate smoke snow spring steel tan thistle tomato turquoise violet wheat white yellow"
).split()
TYPES = tuple(f"{a} {b} {c}" for a in ("STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO")
              for b in ("ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED")
              for c in ("TIN", "NICKEL", "BRASS", "STEEL", "COPPER"))
CONTAINERS = tuple(f"{a} {b}" for a in ("SM", "LG", "MED", "JUMBO", "WRAP")
                   for b in ("CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM"))
ADDRESS_CHARS = np.frombuffer(b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ,", dtype="S1")
STREAMS = {table: number for number, table in enumerate(TABLES)}


def row_counts(scale_factor: float) -> dict[str, int]:
    """Rows of each table but LINEORDER (whose count is the orders' lines), and the orders."""
    parts = PARTS_BASE * math.floor(1 + math.log2(scale_factor)) if scale_factor >= 1 else PARTS_BASE * scale_factor
    return {
        "date": (LAST_DAY - FIRST_DAY).days + 1,
        "supplier": max(1, round(SUPPLIERS_PER_SF * scale_factor)),
        "customer": max(1, round(CUSTOMERS_PER_SF * scale_factor)),
        "part": max(1, round(parts)),
        "orders": max(1, round(ORDERS_PER_SF * scale_factor)),
    }


def _rng(seed: int, table: str, block: int = 0) -> np.random.Generator:
    return np.random.default_rng([seed, STREAMS[table], block])


def _pick(values, indices: np.ndarray) -> pa.Array:
    return pa.array(values).take(pa.array(indices))


def _numbered(prefix: str, keys: np.ndarray, digits: int = 9) -> pa.Array:
    return pa.array([f"{prefix}{key:0{digits}d}" for key in keys.tolist()])


def _addresses(rng: np.random.Generator, count: int) -> pa.Array:
    """Random text of 10 to 25 characters (the specification's variable text, size 25)."""
    lengths = rng.integers(10, 26, count)
    chars = ADDRESS_CHARS[rng.integers(0, len(ADDRESS_CHARS), (count, 25))]
    return pa.array([row[:n].tobytes().decode() for row, n in zip(chars, lengths.tolist(), strict=True)])


def _phones(rng: np.random.Generator, nations: np.ndarray) -> pa.Array:
    count = len(nations)
    parts = zip((nations + 10).tolist(), rng.integers(100, 1000, count).tolist(),
                rng.integers(100, 1000, count).tolist(), rng.integers(1000, 10000, count).tolist(), strict=True)
    return pa.array([f"{a}-{b}-{c}-{d}" for a, b, c, d in parts])


def _parties(table: str, prefix: str, key: str, name: str, scale_factor: float, seed: int) -> tuple[dict, np.random.Generator]:
    """What SUPPLIER and CUSTOMER both hold: key, name ('Supplier#000000001'), address, city (the nation's
    name cut or padded to 9 characters and a digit: 10 cities per nation), nation and region (uniform over
    the 25 nations) and phone; and the table's stream, for the columns of its own."""
    count = row_counts(scale_factor)[table]
    rng = _rng(seed, table)
    keys = np.arange(1, count + 1)
    nations = rng.integers(0, len(NATIONS), count)
    digits = rng.integers(0, 10, count)
    address = _addresses(rng, count)
    cities = [f"{NATIONS[n][0][:9]:<9}{d}" for n, d in zip(nations.tolist(), digits.tolist(), strict=True)]
    return {f"{prefix}_{key}": keys, f"{prefix}_name": _numbered(name, keys), f"{prefix}_address": address,
            f"{prefix}_city": pa.array(cities), f"{prefix}_nation": _pick([n for n, _ in NATIONS], nations),
            f"{prefix}_region": _pick([r for _, r in NATIONS], nations), f"{prefix}_phone": _phones(rng, nations)}, rng


def supplier(scale_factor: float, seed: int) -> pa.Table:
    columns, _ = _parties("supplier", "s", "suppkey", "Supplier#", scale_factor, seed)
    return pa.table(columns)


def customer(scale_factor: float, seed: int) -> pa.Table:
    columns, rng = _parties("customer", "c", "custkey", "Customer#", scale_factor, seed)
    segments = _pick(SEGMENTS, rng.integers(0, len(SEGMENTS), len(columns["c_custkey"])))
    return pa.table({**columns, "c_mktsegment": segments})


def part(scale_factor: float, seed: int) -> pa.Table:
    count = row_counts(scale_factor)["part"]
    rng = _rng(seed, "part")
    keys = np.arange(1, count + 1)
    words = rng.integers(0, len(COLORS), (count, 2))
    mfgr = rng.integers(1, 6, count)
    category = mfgr * 10 + rng.integers(1, 6, count)
    brand = rng.integers(1, 41, count)
    return pa.table({
        "p_partkey": keys,
        "p_name": pa.array([f"{COLORS[a]} {COLORS[b]}" for a, b in words.tolist()]),
        "p_mfgr": pa.array([f"MFGR#{m}" for m in mfgr.tolist()]),
        "p_category": pa.array([f"MFGR#{c}" for c in category.tolist()]),
        "p_brand1": pa.array([f"MFGR#{c}{b}" for c, b in zip(category.tolist(), brand.tolist(), strict=True)]),
        "p_color": _pick(COLORS, words[:, 0]),
        "p_type": _pick(TYPES, rng.integers(0, len(TYPES), count)),
        "p_size": rng.integers(1, 51, count),
        "p_container": _pick(CONTAINERS, rng.integers(0, len(CONTAINERS), count)),
    })


def _season(day: datetime.date) -> str:
    if day.month == 12:
        return "Christmas"
    return ("Winter", "Winter", "Spring", "Spring", "Spring", "Summer", "Summer", "Summer", "Fall", "Fall", "Fall")[
        day.month - 1]


def date(scale_factor: float, seed: int) -> pa.Table:
    """Every day of the seven years 1992 to 1998; the key is the day as YYYYMMDD."""
    days = [FIRST_DAY + datetime.timedelta(n) for n in range(row_counts(scale_factor)["date"])]
    holidays = {(1, 1), (7, 4), (11, 11), (12, 25)}
    rows = {
        "d_datekey": [int(d.strftime("%Y%m%d")) for d in days],
        "d_date": [f"{d:%B} {d.day}, {d.year}" for d in days],
        "d_dayofweek": [f"{d:%A}" for d in days],
        "d_month": [f"{d:%B}" for d in days],
        "d_year": [d.year for d in days],
        "d_yearmonthnum": [d.year * 100 + d.month for d in days],
        "d_yearmonth": [f"{d:%b}{d.year}" for d in days],
        # Sunday is day 1 of the week
        "d_daynuminweek": [d.isoweekday() % 7 + 1 for d in days],
        "d_daynuminmonth": [d.day for d in days],
        "d_daynuminyear": [d.timetuple().tm_yday for d in days],
        "d_monthnuminyear": [d.month for d in days],
        "d_weeknuminyear": [(d.timetuple().tm_yday - 1) // 7 + 1 for d in days],
        "d_sellingseason": [_season(d) for d in days],
        "d_lastdayinweekfl": [int(d.isoweekday() == 6) for d in days],
        "d_lastdayinmonthfl": [int((d + datetime.timedelta(1)).day == 1) for d in days],
        "d_holidayfl": [int((d.month, d.day) in holidays) for d in days],
        "d_weekdayfl": [int(d.isoweekday() <= 5) for d in days],
    }
    return pa.table(rows)


def part_price_cents(partkeys: np.ndarray) -> np.ndarray:
    """TPC-H's retail price of a part, in cents: 90,000 + (key / 10) mod 20,001 + 100 x (key mod 1,000)."""
    return 90_000 + (partkeys // 10) % 20_001 + 100 * (partkeys % 1_000)


def _day_keys(offsets: np.ndarray) -> np.ndarray:
    """YYYYMMDD of days given as offsets from FIRST_DAY."""
    days = np.datetime64(FIRST_DAY.isoformat()) + offsets.astype("timedelta64[D]")
    years = days.astype("datetime64[Y]")
    months = days.astype("datetime64[M]")
    return ((years.astype(np.int64) + 1970) * 10_000 + (months - years).astype(np.int64) * 100 + 100
            + (days - months).astype(np.int64) + 1)


def lineorder_blocks(scale_factor: float, seed: int):
    """LINEORDER a block of orders at a time (every line of each order)."""
    counts = row_counts(scale_factor)
    order_days = (LAST_DAY - FIRST_DAY).days + 1 - ORDER_DAYS_BEFORE_END
    for block, first in enumerate(range(0, counts["orders"], ORDER_BLOCK)):
        rng = _rng(seed, "lineorder", block)
        orders = min(ORDER_BLOCK, counts["orders"] - first)
        lines = rng.integers(1, 8, orders)
        order = np.repeat(np.arange(orders), lines)
        n = len(order)
        starts = np.cumsum(lines) - lines
        linenumber = np.arange(n) - np.repeat(starts, lines) + 1
        order_day = rng.integers(0, order_days, orders)
        partkey = rng.integers(1, counts["part"] + 1, n)
        quantity = rng.integers(1, 51, n)
        discount = rng.integers(0, 11, n)
        tax = rng.integers(0, 9, n)
        price = part_price_cents(partkey)
        extended = quantity * price
        revenue = extended * (100 - discount) // 100
        # the order's total: its lines' prices with tax and discount (TPC-H's O_TOTALPRICE)
        charged = extended * (100 + tax) * (100 - discount) // 10_000
        total = np.add.reduceat(charged, starts)[order]
        yield pa.table({
            "lo_orderkey": first + order + 1,
            "lo_linenumber": linenumber,
            "lo_custkey": np.repeat(rng.integers(1, counts["customer"] + 1, orders), lines),
            "lo_partkey": partkey,
            "lo_suppkey": rng.integers(1, counts["supplier"] + 1, n),
            "lo_orderdate": _day_keys(order_day)[order],
            "lo_orderpriority": _pick(PRIORITIES, np.repeat(rng.integers(0, len(PRIORITIES), orders), lines)),
            "lo_shippriority": np.zeros(n, np.int64),
            "lo_quantity": quantity,
            "lo_extendedprice": extended,
            "lo_ordtotalprice": total,
            "lo_discount": discount,
            "lo_revenue": revenue,
            "lo_supplycost": price * 6 // 10,
            "lo_tax": tax,
            "lo_commitdate": _day_keys(order_day[order] + rng.integers(30, 91, n)),
            "lo_shipmode": _pick(SHIP_MODES, rng.integers(0, len(SHIP_MODES), n)),
        })


GENERATORS = {"date": date, "supplier": supplier, "customer": customer, "part": part}


def blocks(table: str, scale_factor: float, seed: int):
    """The table's rows, a block at a time."""
    if table == "lineorder":
        yield from lineorder_blocks(scale_factor, seed)
    else:
        yield GENERATORS[table](scale_factor, seed)


def write(table: str, scale_factor: float, seed: int, output_dir: Path) -> Path:
    """`<table>.tbl`: '|' after every field, no quoting, no header (as dbgen writes it)."""
    path = output_dir / f"{table}.tbl"
    options = pacsv.WriteOptions(include_header=False, delimiter="|", quoting_style="none")
    with open(path, "wb") as out:
        for rows in blocks(table, scale_factor, seed):
            # an empty last column ends each line with the '|' dbgen writes
            rows = rows.append_column("", pa.nulls(rows.num_rows, pa.string()))
            pacsv.write_csv(rows, out, options)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale-factor", type=float, required=True)
    parser.add_argument("--table", choices=TABLES, required=True)
    parser.add_argument("--output-dir", type=Path, default=Path("."))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if not args.scale_factor > 0:
        parser.error(f"--scale-factor {args.scale_factor} is not allowed; give a number > 0 (e.g. 0.1, 1, 10)")
    write(args.table, args.scale_factor, args.seed, args.output_dir)


if __name__ == "__main__":
    main()
