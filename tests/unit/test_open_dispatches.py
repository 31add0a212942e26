"""The compiled matcher against the rule it implements: per device and sector, a queue of open dispatches."""

from collections import defaultdict, deque

import numpy as np

from tierlab.traces.blk import blk_action, dev_t
from tierlab.traces.matcher import Matcher

DEVICES = np.array([dev_t("7:1"), dev_t("259:0")], dtype=np.uint32)
DISPATCH, COMPLETE = blk_action("D", "R"), blk_action("C", "R")


def random_events(n: int, seed: int, sectors: int) -> dict:
    """n events in time order on two devices, a dispatch with probability 0.55, few distinct sectors (so
    that keys repeat, collide and are deleted), now and then a time far back (a jump)."""
    rng = np.random.default_rng(seed)
    time = 1_000_000_000 + np.cumsum(rng.integers(0, 50_000, n))
    back = rng.random(n) < 0.01
    time[back] -= 10**9
    dispatch = rng.random(n) < 0.55
    return {"time": time.astype(np.int64), "sector": (rng.integers(0, sectors, n) * 8).astype(np.uint64),
            "bytes": np.full(n, 4096, np.uint32), "action": np.where(dispatch, DISPATCH, COMPLETE).astype(np.uint32),
            "pid": np.full(n, 7, np.uint32), "device": rng.choice(DEVICES, n)}


def queue_per_key(events: dict) -> tuple[list[float], dict]:
    """Each row's latency (NaN: open, or a time jump) and the counts, by the rule, one event at a time."""
    open_ = defaultdict(deque)
    latency: list[float] = []
    counts = {"time_jumps": 0, "completion_without_dispatch": 0}
    for time, sector, action, device in zip(events["time"].tolist(), events["sector"].tolist(),
                                            events["action"].tolist(), events["device"].tolist(), strict=True):
        key = (device, sector)
        if action == DISPATCH:
            open_[key].append((time, len(latency)))
            latency.append(float("nan"))
        elif open_[key]:
            dispatched, row = open_[key].popleft()
            waited_us = (time - dispatched) / 1e3
            if 0 <= waited_us <= 300e6:
                latency[row] = waited_us
            else:
                counts["time_jumps"] += 1
        else:
            counts["completion_without_dispatch"] += 1
    counts["dispatch_without_completion"] = sum(len(queue) for queue in open_.values())
    return latency, counts


def matched(events: dict, batches: list[int]) -> tuple[list[float], dict]:
    matcher = Matcher(16)
    start = 0
    for size in batches:
        matcher.feed({name: values[start:start + size] for name, values in events.items()})
        start += size
    matcher.finish()
    columns = {name: column.done() for name, column in matcher.columns.items()}
    return columns["latency"].tolist(), {key: matcher.counts[key] for key in
                                        ("time_jumps", "completion_without_dispatch", "dispatch_without_completion")}


def test_completions_close_the_oldest_open_dispatch_of_their_device_and_sector():
    events = random_events(20_000, seed=3, sectors=40)
    latency, counts = matched(events, [1, 999, 5000, 14_000])
    expected_latency, expected_counts = queue_per_key(events)
    np.testing.assert_array_equal(latency, expected_latency)
    assert counts == expected_counts
    assert counts["completion_without_dispatch"] > 0 and counts["time_jumps"] > 0


def test_thousands_of_dispatches_open_at_once_grow_the_table_and_all_close():
    """Far more keys open than the table first holds (1024 places), closed in another order."""
    rng = np.random.default_rng(4)
    n = 6000
    sector = (rng.choice(1 << 40, n, replace=False) * 8).astype(np.uint64)
    events = {"time": np.arange(2 * n, dtype=np.int64) * 1000, "sector": np.r_[sector, rng.permutation(sector)],
              "bytes": np.full(2 * n, 4096, np.uint32),
              "action": np.r_[np.full(n, DISPATCH), np.full(n, COMPLETE)].astype(np.uint32),
              "pid": np.full(2 * n, 7, np.uint32), "device": np.full(2 * n, DEVICES[0])}
    latency, counts = matched(events, [2 * n])
    expected_latency, expected_counts = queue_per_key(events)
    np.testing.assert_array_equal(latency, expected_latency)
    assert counts == expected_counts == {"time_jumps": 0, "completion_without_dispatch": 0,
                                         "dispatch_without_completion": 0}
