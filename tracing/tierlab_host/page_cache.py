"""A PostgreSQL server's page cache held to the run's os_cache while its query loop runs.

The server's memory group counts its processes' own memory (their heaps, shared_buffers, the programs they map)
and the page cache of what they read under one bound, which allows for the processes' needs: 64 MiB, and 24 MiB
for each further connection (a burst of connections or parallel workers past the bound would be killed). The
kernel gives whatever the processes leave unused to the page cache: PostgreSQL's sysbench runs (E4 threads) held
173 MiB of page cache at 4 threads and 1.4 GiB at 64 under that bound alone, against 64 MiB asked for.

So while the loop runs, every TICK_S the group's page cache above os_cache is dropped (cgroups.drop_page_cache:
the kernel's own reclaim, which takes the pages it would evict first), the bound left as it is. Between two ticks
the page cache grows by what the server reads meanwhile: the most it held, sampled before each drop, is recorded
with each window's row, and so is the most the processes held besides.
"""

import threading

from . import cgroups
from .system import HostError

TICK_S = 0.05


def held(engine: dict) -> "PageCacheHold | None":
    """The hold on the page cache of a run's server (its engine spec) while the loop runs; None for a server without
    a memory bound (MariaDB's and MySQL's, and PostgreSQL's with os_cache=unbounded)."""
    if engine.get("memory_limit_bytes") is None:
        return None
    group = cgroups.memory_group(engine["instance"])
    if group is None:
        raise HostError(f"{engine['instance']}: its memory group is gone while the server runs; tear the root down "
                        "and run again")
    return PageCacheHold(group, engine["page_cache_bytes"], engine["memory_limit_bytes"])


class PageCacheHold:
    """The hold on a server's memory group (as cgroups.memory_group names it) from start to stop; page_cache_bytes:
    os_cache, in bytes; limit_bytes: the group's bound, which stays."""

    def __init__(self, group: dict, page_cache_bytes: int, limit_bytes: int):
        self.group = group
        self.page_cache_bytes = page_cache_bytes
        self.limit_bytes = limit_bytes
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._hold, name="page-cache-hold", daemon=True)
        self.most = {"page_cache_max_bytes": 0, "process_memory_max_bytes": 0}
        self.error: Exception | None = None

    def start(self) -> None:
        self.hold_once()
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        # not started where its first drop failed; ended where a later one did
        if self.thread.is_alive():
            self.thread.join()

    def hold_once(self) -> None:
        total, page_cache = cgroups.memory_held(self.group)
        self.most["page_cache_max_bytes"] = max(self.most["page_cache_max_bytes"], page_cache)
        self.most["process_memory_max_bytes"] = max(self.most["process_memory_max_bytes"], total - page_cache)
        if page_cache > self.page_cache_bytes:
            cgroups.drop_page_cache(self.group, page_cache - self.page_cache_bytes, self.limit_bytes)

    def _hold(self) -> None:
        while not self.stopped.wait(TICK_S):
            try:
                self.hold_once()
            except OSError as error:
                # the loop reads it with the window's figures and stops: its windows would no longer be held
                self.error = error
                return

    def start_window(self) -> None:
        """Figures from here on are the next window's."""
        self.most = dict.fromkeys(self.most, 0)

    def window_figures(self) -> dict:
        """The most page cache and process memory the group held since start_window (in bytes)."""
        if self.error is not None:
            raise HostError(f"the page cache of {self.group['path']} is no longer held to os_cache: {self.error}")
        return dict(self.most)
