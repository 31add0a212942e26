"""The cost model: LRU reuse distances, and traced requests re-costed on the device models."""

import subprocess

import numpy as np
import pandas as pd
import pytest

from tierlab import cost_model
from tierlab.device_profile import profile_path

PROFILES = {"fast": profile_path("optane"), "capacity": profile_path("nand")}
TIER_ROLES = {"optane": "fast", "nand": "capacity"}
# a lone 4 KiB read: the latency parameter plus the transfer at the read bandwidth
NAND_RANDOM_4K_US = 88.6 + 4096 / 3000
OPTANE_4K_US = 8.4 + 4096 / 2500


def window(rows: list[tuple[float, str, str, int, int]]) -> pd.DataFrame:
    """Requests of one query window: (ts_s, object, op, sector, sectors), traced on nand (device 7:1)."""
    frame = pd.DataFrame(rows, columns=["ts_s", "object", "op", "sector", "request_size_sectors"])
    return frame.assign(device="7:1", tier="nand", piece=0)


@pytest.fixture(scope="module", autouse=True)
def emulator():
    subprocess.run(["make", "-s", "-C", str(cost_model.EMULATOR.parent)], check=True)


def test_reuse_distance_counts_the_distinct_pages_since_a_page_s_last_access():
    # STUDY's page sequence p1 p3 p4 p3 p1 p4 p5 p3
    distances = cost_model._reuse_distances(np.array([1, 3, 4, 3, 1, 4, 5, 3]))
    never = cost_model.NEVER
    assert distances.tolist() == [never, never, never, 1, 2, 2, never, 3]


def test_a_request_is_served_by_the_cache_only_when_every_page_it_reads_is_there():
    # 16 KiB pages: the second request reads pages 0 and 1; page 1 was never read before it
    requests = window([(0.0, "t", "R", 0, 32), (0.1, "t", "R", 0, 64), (0.2, "t", "R", 32, 32),
                       (0.3, "t", "W", 0, 32)])
    assert cost_model.request_reuse_pages(requests, 16384).tolist() == [
        cost_model.NEVER, cost_model.NEVER, 0, cost_model.NEVER]


def test_a_table_s_lone_random_reads_cost_the_profile_of_the_tier_the_split_puts_it_on():
    # reads 10 ms apart (in the model's time: 1 s apart in the run, dilated 100x), far apart on the device
    requests = window([(t, obj, "R", sector, 8) for t, obj, sector in
                       [(0, "a", 0), (1, "b", 1 << 24), (2, "a", 1 << 25), (3, "b", 1 << 26), (4, "other", 1 << 27)]])
    costs = cost_model.layout_costs(requests, TIER_ROLES, PROFILES, dilation=100.0)
    assert set(costs) == {frozenset(), frozenset({"a"}), frozenset({"b"}), frozenset({"a", "b"})}
    assert costs[frozenset()] == pytest.approx(5 * NAND_RANDOM_4K_US, abs=0.01)
    assert costs[frozenset({"a"})] == pytest.approx(2 * OPTANE_4K_US + 3 * NAND_RANDOM_4K_US, abs=0.01)
    # `other` stays on nand, where it was traced
    assert costs[frozenset({"a", "b"})] == pytest.approx(4 * OPTANE_4K_US + NAND_RANDOM_4K_US, abs=0.01)


def test_the_cache_serves_re_reads_from_the_fast_tier_once_they_fit():
    # page 0 read, then two other pages, then page 0 again: a hit from 3 pages (48 KiB) of cache up
    requests = window([(t, "a", "R", sector, 32) for t, sector in [(0, 0), (1, 1 << 20), (2, 1 << 21), (3, 0)]])
    costs = cost_model.cache_costs(requests, TIER_ROLES, PROFILES, 100.0, 16384, [32768, 49152])
    assert costs["hits"].tolist() == [0, 1]
    assert costs["requests"].tolist() == [4, 4]
    nand_16k, optane_16k = 88.6 + 16384 / 3000, 8.4 + 16384 / 2500
    assert costs["latency_sum_us"].tolist() == pytest.approx([4 * nand_16k, 3 * nand_16k + optane_16k], abs=0.01)
