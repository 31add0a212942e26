"""How a query's plan reads each table: a full scan, a scan of an index, or lookups through an index.

Each engine writes plans its own way: PostgreSQL's EXPLAIN JSON has nodes with
`Node Type` and `Relation Name`; MySQL 9's (format version 2) has iterators with
`access_type` table or index; MariaDB's (and MySQL's format 1) has `table`
objects whose `access_type` is a join type (ALL, range, ref, ...). All are
read into rows of (table, index, access), access being one of ACCESSES, for
the workload's tables only: a plan also reads what the query makes itself
(a CTE, a derived or temporary table), which is no stored table. MariaDB names
a table its query gave an alias (`lineitem l1`) by the alias only: the query's
aliases (table_aliases) name it.
"""

import re

from ..catalog.engines import ENGINES

SCAN, INDEX_SCAN, BITMAP_SCAN, INDEX_LOOKUP = "table scan", "index scan", "bitmap scan", "index lookup"
ACCESSES = (SCAN, INDEX_SCAN, BITMAP_SCAN, INDEX_LOOKUP)
# MariaDB's (and MySQL format 1's) join types: a whole table, a whole or ranged index, or key lookups; a hashed
# join buffer (BNLH) reads its table (or index, or range) whole into a hash table: hash_ALL, hash_index, ...
JOIN_TYPES = {"ALL": SCAN, "index": INDEX_SCAN, "range": INDEX_SCAN, "index_merge": INDEX_SCAN,
              "hash_ALL": SCAN, "hash_index": INDEX_SCAN, "hash_range": INDEX_SCAN, "hash_index_merge": INDEX_SCAN,
              "ref": INDEX_LOOKUP, "eq_ref": INDEX_LOOKUP, "ref_or_null": INDEX_LOOKUP, "const": INDEX_LOOKUP,
              "system": INDEX_LOOKUP, "unique_subquery": INDEX_LOOKUP, "index_subquery": INDEX_LOOKUP,
              "fulltext": INDEX_LOOKUP}
# MySQL format 2's index_access_type
INDEX_ACCESS_TYPES = {"index_lookup": INDEX_LOOKUP, "index_scan": INDEX_SCAN, "index_range_scan": INDEX_SCAN,
                      "full_index_scan": INDEX_SCAN, "index_skip_scan": INDEX_SCAN}


# words that may follow a table's name in a FROM clause without being its alias
SQL_WORDS = {"where", "join", "on", "group", "order", "left", "right", "inner", "outer", "cross", "natural", "using",
             "limit", "union", "having", "straight_join", "window", "for", "use", "ignore", "force", "and", "or", "as"}


def table_aliases(sql: str, tables: set[str]) -> dict[str, str]:
    """The aliases a query gives the workload's tables (`lineitem l1`, `nation as n2`), alias -> table."""
    names = "|".join(sorted(tables, key=len, reverse=True))
    aliases = {}
    for match in re.finditer(rf"\b({names})\s+(?:as\s+)?([a-z_][a-z0-9_]*)\b", sql, re.IGNORECASE):
        table, alias = match[1].lower(), match[2].lower()
        if alias not in SQL_WORDS and alias not in tables:
            aliases[alias] = table
    return aliases


def _nodes(value):
    """Every JSON object in a plan, depth first, in the order the plan lists them."""
    if isinstance(value, dict):
        yield value
        for child in value.values():
            yield from _nodes(child)
    elif isinstance(value, list):
        for child in value:
            yield from _nodes(child)


def _postgresql(plan: dict) -> list[dict]:
    accesses = []
    for node in _nodes(plan):
        kind, table = node.get("Node Type", ""), node.get("Relation Name")
        if table is None:
            continue
        # a TID range scan reads one range of the table's blocks in order (a split query's share of a table scan)
        if kind in ("Seq Scan", "Tid Range Scan"):
            accesses.append({"table": table, "index": "", "access": SCAN})
        elif kind in ("Index Scan", "Index Only Scan"):
            # the inner side of a nested loop is probed once per outer row: lookups, not one scan
            access = INDEX_LOOKUP if node.get("Parent Relationship") == "Inner" else INDEX_SCAN
            accesses.append({"table": table, "index": node["Index Name"], "access": access})
        elif kind == "Bitmap Heap Scan":
            index = next((n["Index Name"] for n in _nodes(node.get("Plans", [])) if "Index Name" in n), "")
            accesses.append({"table": table, "index": index, "access": BITMAP_SCAN})
    return accesses


def _mysql_family(plan: dict, aliases: dict[str, str]) -> list[dict]:
    accesses = []
    for node in _nodes(plan):
        table, kind = node.get("table_name"), node.get("access_type")
        if table is None or kind is None:
            continue
        table = aliases.get(table, table)
        if kind == "table":
            accesses.append({"table": table, "index": "", "access": SCAN})
        elif kind == "index":
            accesses.append({"table": table, "index": node.get("index_name", ""),
                             "access": INDEX_ACCESS_TYPES.get(node.get("index_access_type"), INDEX_SCAN)})
        elif kind in JOIN_TYPES:
            # a hashed join buffer's key names the columns it hashes on (#hash#PRIMARY), not an index it reads
            access = JOIN_TYPES[kind]
            index = "" if access == SCAN else node.get("key", "").removeprefix("#hash#")
            accesses.append({"table": table, "index": index, "access": access})
    return accesses


def plan_summary(accesses) -> dict[str, str]:
    """Per query, how its first try's plan reads each table, in plan order (`lineitem index lookup
    (lineitem_pkey); orders table scan`): rows of plan_accesses.csv."""
    first = accesses[accesses["try"] == accesses.groupby("query")["try"].transform("min")]
    return {query: "; ".join(f"{r.table} {r.access}" + (f" ({r.index})" if isinstance(r.index, str) and r.index else "")
                             for r in rows.itertuples())
            for query, rows in first.groupby("query", sort=False)}


def plan_accesses(engine: str, plan: dict, tables: set[str], sql: str = "") -> list[dict]:
    """(table, index, access) for every read of one of `tables` in a plan, in plan order; sql: the query's
    text, for the aliases it gives tables."""
    accesses = (_postgresql(plan) if ENGINES[engine].plan_format == "postgresql"
                else _mysql_family(plan, table_aliases(sql, tables)))
    return [access for access in accesses if access["table"] in tables]
