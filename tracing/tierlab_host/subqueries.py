"""A query split into subqueries by its driving dimension's keys: each subquery is the query with one range
of the dimension's key added to its WHERE clause (a conjunction, as every SSB query's is), the ranges holding
about as many of the dimension's rows each and covering them all, so that the subqueries' answers together
are the query's (each group's sums added). The ranges are read from the database once, before the run's
first query, so that no query starts with the dimension's pages in the buffer pool because of them.
"""

import re

from .system import HostError

WHERE = re.compile(r"\bWHERE\b", re.IGNORECASE)


def key_starts(db, database: str, table: str, column: str, parts: int) -> list[int]:
    """The first key of each of `parts` ranges of the table's rows in key order (fewer rows than parts: some
    ranges start at the same key and are empty)."""
    count = int(db.rows(f"SELECT COUNT(*) FROM {table}", database)[0][0])
    if count == 0:
        raise HostError(f"{database}.{table} has no rows to split the queries by: load the workload's data")
    return [int(db.rows(f"SELECT {column} FROM {table} ORDER BY {column} LIMIT 1 OFFSET {count * part // parts}",
                        database)[0][0]) for part in range(parts)]


def split(sql: str, column: str, starts: list[int]) -> list[str]:
    """The query once per range: `column` from one start up to the next (the last range open above)."""
    if len(WHERE.findall(sql)) != 1:
        raise HostError(f"a query split into subqueries needs one WHERE clause to add its key range to:\n{sql}")
    bounds = [*starts[1:], None]
    ranges = [f"{column} >= {low}" + (f" AND {column} < {high}" if high is not None else "")
              for low, high in zip(starts, bounds, strict=True)]
    return [WHERE.sub(f"WHERE {condition} AND", sql) for condition in ranges]
