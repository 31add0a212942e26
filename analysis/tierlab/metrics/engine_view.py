"""Each engine's own account of a query's reads, from its counter deltas, beside the block-level figures.

InnoDB (MariaDB, MySQL) counts the pages it read and those its read-ahead
fetched, so it has its own sequential share. PostgreSQL counts the blocks it
read into shared buffers (some of which the OS page cache may have served) and,
with track_io_timing, the time those reads took; it has no read-ahead counter.
"""

import numpy as np
import pandas as pd

from ..catalog.engines import ENGINES

DEFINITIONS = {
    "innodb": ("Engine: InnoDB's pages read and read-ahead pages (Innodb_pages_read, Innodb_buffer_pool_read_ahead); "
               "engine_sequential_pct is read-ahead pages / pages read."),
    "postgresql": ("Engine: blocks PostgreSQL read into shared buffers (pg_stat_database blks_read; the OS page cache "
                   "may have served some of them) and the time those reads took (blk_read_time, track_io_timing)."),
}


def engine_view(engine: str, counters: pd.DataFrame) -> pd.DataFrame:
    """Per query try, the engine's pages read (engine_pages_read) and what else its counters say."""
    if counters.empty:
        return counters
    key = {"query": counters["query"], "try": counters["try"]}
    if ENGINES[engine].counters == "innodb":
        # in MariaDB 10.11 Innodb_buffer_pool_reads equals Innodb_pages_read (read-ahead included),
        # so the random misses are the pages read minus the read-ahead pages
        ahead, pages = counters["Innodb_buffer_pool_read_ahead"], counters["Innodb_pages_read"]
        return pd.DataFrame({
            **key, "engine_pages_read": pages, "engine_read_ahead_pages": ahead, "engine_random_page_misses": pages - ahead,
            "engine_sequential_pct": np.where(pages > 0, 100.0 * ahead / pages.where(pages > 0, 1), np.nan),
        })
    return pd.DataFrame({**key, "engine_pages_read": counters["blks_read"], "engine_pages_hit": counters["blks_hit"],
                         "engine_read_time_s": counters["blk_read_time_us"] / 1e6})


def definition(engine: str) -> str:
    return DEFINITIONS[ENGINES[engine].counters]
