"""A query split into subqueries by ranges of one column: each subquery is the query with one range added to its
WHERE clause (a conjunction, as every SSB query's is), the ranges covering every row once, so that the subqueries'
answers together are the query's (each group's sums added). The column is the driving dimension's key (ranges
holding about as many of its rows each), or, under join_plan=hash, the fact table's pages: on PostgreSQL its
blocks (`ctid`, each range a TID range scan), on InnoDB its clustered key's first column (ranges holding about
as many rows each, so each scans its own part of the table). The ranges are read from the database once, before
the run's first query: a cold run's restart before each query then empties the caches of what that read (a warm
run starts with it cached).
"""

import re

from .system import HostError

WHERE = re.compile(r"\bWHERE\b", re.IGNORECASE)
# PostgreSQL's column of each row's place (block, item): a range of it is a range of the table's blocks
BLOCKS = "ctid"


def range_starts(db, database: str, table: str, column: str, parts: int) -> list[str]:
    """The first value of each of `parts` ranges, as SQL literals: of the table's blocks for `ctid`, else of its
    rows in the column's order (fewer rows than parts: some ranges start at the same value and are empty)."""
    if column == BLOCKS:
        blocks = int(db.rows(f"SELECT pg_relation_size('{table}') / current_setting('block_size')::int", database)[0][0])
        if blocks == 0:
            raise HostError(f"{database}.{table} has no blocks to split the queries by: load the workload's data")
        return [f"'({blocks * part // parts},0)'" for part in range(parts)]
    count = int(db.rows(f"SELECT COUNT(*) FROM {table}", database)[0][0])
    if count == 0:
        raise HostError(f"{database}.{table} has no rows to split the queries by: load the workload's data")
    return [str(db.rows(f"SELECT {column} FROM {table} ORDER BY {column} LIMIT 1 OFFSET {count * part // parts}",
                        database)[0][0]) for part in range(parts)]


def split(sql: str, table: str, column: str, starts: list[str]) -> list[str]:
    """The query once per range: `column` from one start up to the next (the last range open above); `ctid`
    named with its table, which every table has."""
    if len(WHERE.findall(sql)) != 1:
        raise HostError(f"a query split into subqueries needs one WHERE clause to add its range to:\n{sql}")
    named = f"{table}.{column}" if column == BLOCKS else column
    bounds = [*starts[1:], None]
    ranges = [f"{named} >= {low}" + (f" AND {named} < {high}" if high is not None else "")
              for low, high in zip(starts, bounds, strict=True)]
    return [WHERE.sub(f"WHERE {condition} AND", sql) for condition in ranges]
