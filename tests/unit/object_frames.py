"""Small table_metrics frames and manifest layouts, for tests of where a run's I/O time goes."""

import pandas as pd

GIB = 2**30


def metrics(*rows) -> pd.DataFrame:
    """table_metrics rows: (query, try, object, tier, io_time_s), with read_requests 10, read_pages 100, all random
    and repeated unless a row gives (read_pages, sequential_pct, category) after them."""
    full = [(*row, 100, 0.0, "1 random repeated") if len(row) == 5 else row for row in rows]
    frame = pd.DataFrame(full, columns=["query", "try", "object", "tier", "io_time_s", "read_pages", "sequential_pct",
                                        "category"])
    return frame.assign(read_requests=10)


def layout(**tables) -> dict:
    """A manifest's layout of tables by name: (tier role, bytes of the table's one file, bytes it holds on the
    device)."""
    return {"tables": {name: {"tier": tier, "size_bytes": size, "stored_bytes": stored,
                              "files": [{"object": name, "size_bytes": size}]}
                       for name, (tier, size, stored) in tables.items()}}


# two steps: lineitem 50% of the I/O time, orders 30%, customer 10%, the requests of no object 10%
TWO_STEPS = metrics(("q1", 1, "lineitem", "nand", 3.0), ("q1", 1, "orders", "optane", 1.0),
                    ("q1", 1, "other", "nand", 1.0), ("q2", 1, "lineitem", "nand", 2.0),
                    ("q2", 1, "orders", "optane", 2.0), ("q2", 1, "customer", "optane", 1.0))
# on the capacity tier (nand): lineitem 60% of the I/O time, partsupp 20%, part 10%, nation 0.5%
CAPACITY = metrics(("q1", 1, "lineitem", "nand", 6.0), ("q1", 1, "partsupp", "nand", 2.0),
                   ("q1", 1, "part", "nand", 1.0), ("q1", 1, "orders", "optane", 0.95),
                   ("q1", 1, "nation", "nand", 0.05))
# sizes of all but part
SIZED = layout(lineitem=("capacity", GIB, GIB), partsupp=("capacity", GIB // 4, GIB // 4),
               nation=("capacity", 4096, 4096), orders=("fast", 100 * 2**20, 100 * 2**20))
