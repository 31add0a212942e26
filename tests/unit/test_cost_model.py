"""The cost model: the block cache simulation, and traced requests re-costed on the device models."""

import io
import subprocess
from collections import Counter, OrderedDict

import numpy as np
import pandas as pd
import pytest

from tierlab.devices import cost_model
from tierlab.devices.profiles import profile_path

PROFILES = {"fast": profile_path("optane"), "capacity": profile_path("nand")}
TIER_ROLES = {"optane": "fast", "nand": "capacity"}
# a lone 4 KiB read: the latency parameter plus the transfer at the read bandwidth
NAND_RANDOM_4K_US = 88.6 + 4096 / 3000
OPTANE_4K_US = 8.4 + 4096 / 2500


def window(rows: list[tuple[float, str, str, int, int]], sequential: list[bool] | None = None,
           latency_us: list[float] | None = None) -> pd.DataFrame:
    """Requests of one query window: (ts_s, object, op, sector, sectors), traced on nand (device 7:1), each
    done as it starts unless latency_us says otherwise (so that none overlaps another)."""
    frame = pd.DataFrame(rows, columns=["ts_s", "object", "op", "sector", "request_size_sectors"])
    return frame.assign(device="7:1", tier="nand", piece=0, sequential=sequential or [False] * len(frame),
                        latency_us=latency_us or [0.0] * len(frame))


def of(requests: pd.DataFrame, dilation: float = 1.0) -> cost_model.Window:
    return cost_model.Window.of([requests], TIER_ROLES, dilation)


def page_reads(pages: list[int]) -> pd.DataFrame:
    """One 16 KiB read per page, in order."""
    return window([(t, "a", "R", page * 32, 32) for t, page in enumerate(pages)])


# the repeat-access example of docs/metrics.md: p1 p3 p4 p3 p1 p4 p5 p3
RA_EXAMPLE_PAGES = [1, 3, 4, 3, 1, 4, 5, 3]


@pytest.fixture(scope="module", autouse=True)
def emulator():
    subprocess.run(["make", "-s", "-C", str(cost_model.EMULATOR.parent)], check=True, timeout=300)


@pytest.mark.parametrize(("capacity_pages", "hits"), [
    (2, [False, False, False, True, False, False, False, False]),
    (3, [False, False, False, True, True, True, False, False]),
])
def test_an_lru_cache_serves_a_page_read_again_before_it_is_the_least_recently_used(capacity_pages, hits):
    assert cost_model.cache_hits(of(page_reads(RA_EXAMPLE_PAGES)), 16384, capacity_pages * 16384, "lru").tolist() == hits


def test_an_admitting_cache_takes_a_page_on_its_second_access_only():
    assert cost_model.cache_hits(of(page_reads(RA_EXAMPLE_PAGES)), 16384, 3 * 16384, "admitting").tolist() == [
        False, False, False, False, False, False, False, True]


def test_an_admitting_cache_lets_sequential_requests_bypass_it():
    requests = window([(t, "a", "R", 0, 32) for t in range(4)], sequential=[False, True, True, False])
    # the second access (sequential) does not admit page 0; the fourth (the third access) does, too late to hit
    assert cost_model.cache_hits(of(requests), 16384, 16384, "admitting").tolist() == [False, False, False, False]
    assert cost_model.cache_hits(of(requests), 16384, 16384, "lru").tolist() == [False, True, True, True]


def test_a_request_hits_only_when_every_page_it_reads_is_cached_and_writes_never_hit():
    # 16 KiB pages: the second request reads pages 0 and 1, and page 1 was never read before it
    requests = window([(0.0, "t", "R", 0, 32), (0.1, "t", "R", 0, 64), (0.2, "t", "R", 32, 32),
                       (0.3, "t", "W", 0, 32)])
    assert cost_model.cache_hits(of(requests), 16384, 4 * 16384, "lru").tolist() == [False, False, True, False]


def test_a_table_s_lone_random_reads_cost_the_profile_of_the_tier_the_split_puts_it_on():
    # reads 10 ms apart (in the model's time: 1 s apart in the run, dilated 100x), far apart on the device
    requests = window([(t, obj, "R", sector, 8) for t, obj, sector in
                       [(0, "a", 0), (1, "b", 1 << 24), (2, "a", 1 << 25), (3, "b", 1 << 26), (4, "other", 1 << 27)]])
    costs = cost_model.layout_costs(of(requests, dilation=100.0), PROFILES)
    assert set(costs) == {frozenset(), frozenset({"a"}), frozenset({"b"}), frozenset({"a", "b"})}
    assert costs[frozenset()] == pytest.approx(5 * NAND_RANDOM_4K_US, abs=0.01)
    assert costs[frozenset({"a"})] == pytest.approx(2 * OPTANE_4K_US + 3 * NAND_RANDOM_4K_US, abs=0.01)
    # `other` stays on nand, where it was traced
    assert costs[frozenset({"a", "b"})] == pytest.approx(4 * OPTANE_4K_US + NAND_RANDOM_4K_US, abs=0.01)


def test_the_cache_s_hits_are_replayed_on_the_fast_profile_once_they_fit():
    # page 0 read, then two other pages, then page 0 again: a hit from 3 pages (48 KiB) of LRU cache up
    requests = window([(t, "a", "R", sector, 32) for t, sector in [(0, 0), (1, 1 << 20), (2, 1 << 21), (3, 0)]])
    costs = cost_model.cache_costs(of(requests, dilation=100.0), PROFILES, 16384, [32768, 49152])
    lru = costs[costs["policy"] == "lru"]
    assert lru["hits"].tolist() == [0, 1]
    assert lru["requests"].tolist() == [4, 4]
    nand_16k, optane_16k = 88.6 + 16384 / 3000, 8.4 + 16384 / 2500
    assert lru["io_us"].tolist() == pytest.approx([4 * nand_16k, 3 * nand_16k + optane_16k], abs=0.01)
    # admitted on its second access, page 0 is never read a third time
    assert costs.loc[costs["policy"] == "admitting", "hits"].tolist() == [0, 0]


def random_window(seed: int, count: int, span_kib: int = 1024) -> pd.DataFrame:
    """Reads and writes of 4 to 64 KiB at 300 places in two devices' first span_kib, some sequential: pages are
    read again often; over the first MiB they span fewer pages than there are requests."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"ts_s": np.arange(count) * 1e-4, "object": "a",
                          "op": rng.choice(["R", "W"], count, p=[0.9, 0.1]),
                          "sector": rng.choice(rng.integers(0, span_kib // 4, 300), count) * 8,
                          "request_size_sectors": rng.integers(1, 17, count) * 8,
                          "device": rng.choice(["7:0", "7:1"], count), "sequential": rng.random(count) < 0.3,
                          "latency_us": rng.uniform(10, 500, count)})
    return frame.assign(tier=frame["device"].map({"7:0": "optane", "7:1": "nand"}), piece=0)


# the policies as docs/recommend.md states them: the access a page is admitted on, and whether sequential reads
# pass the cache by
POLICIES = {"lru": (1, False), "admitting": (2, True)}


def brute_force_hits(requests: pd.DataFrame, page_bytes: int, capacity_pages: int, policy: str) -> list[bool]:
    """The cache of cache_hits, page by page over an ordered dict (oldest first)."""
    admit_on, sequential_bypass = POLICIES[policy]
    cache, seen, hits = OrderedDict(), Counter(), []
    for row in requests.itertuples(index=False):
        bypass = row.op == "W" or (row.sequential and sequential_bypass)
        hit = row.op != "W"
        for page in range(row.sector * 512 // page_bytes, ((row.sector + row.request_size_sectors) * 512 - 1) // page_bytes + 1):
            key = (row.device, page)
            seen[key] += 1
            if key in cache:
                cache.move_to_end(key)
                continue
            hit = False
            if bypass or seen[key] < admit_on or capacity_pages == 0:
                continue
            if len(cache) == capacity_pages:
                cache.popitem(last=False)
            cache[key] = True
        hits.append(hit)
    return hits


@pytest.mark.parametrize("span_kib", [1024, 1 << 30])
@pytest.mark.parametrize("policy", ["lru", "admitting"])
@pytest.mark.parametrize("capacity_pages", [0, 1, 7, 40, 1000])
def test_the_cache_simulation_agrees_with_a_brute_force_one_on_random_traces(policy, capacity_pages, span_kib):
    for seed in range(3):
        requests = random_window(seed, 2000, span_kib)
        assert cost_model.cache_hits(of(requests), 16384, capacity_pages * 16384, policy).tolist() == \
            brute_force_hits(requests, 16384, capacity_pages, policy)


def simulated(window: cost_model.Window, *options: str) -> pd.DataFrame:
    """The window's requests through tierlab-emu --simulate on nand (options before --simulate): a row each."""
    text = "".join(f"{at / 1000:.3f} {'w' if w else 'r'} {offset} {length}\n" for at, w, offset, length in
                   zip(window.at_ns, window.writes, window.offset_bytes, window.length_bytes, strict=True))
    done = subprocess.run([str(cost_model.EMULATOR), "--profile", str(PROFILES["capacity"]), *options, "--simulate"],
                          input=text, capture_output=True, text=True, check=True, timeout=120)
    return pd.read_csv(io.StringIO(done.stdout), sep=" ")


def test_the_in_process_replay_is_wired_to_the_model_tierlab_emu_simulate_runs():
    """Both run the same C model (emulator/src/model.c): this checks the replay's wiring (arrays, roles, shares);
    the model's own figures are checked against hand-derived ones in test_emulator_model.py."""
    requests = random_window(7, 3000)
    stream = of(requests)
    roles = np.full(len(requests), cost_model.ROLES.index("capacity"), dtype=np.uint8)
    assert stream.io_us(roles, PROFILES) == pytest.approx((simulated(stream)["latency_us"] * stream.share).sum(),
                                                          abs=0.001 * len(requests))


def test_a_request_s_share_is_its_part_of_the_time_in_flight():
    # a: 0-10 us, b: 5-15 us (the two in flight over 5-10 us), c: 20-30 us alone, d: at 40 us, of no duration;
    # e: at 6 us, its completion not seen
    requests = window([(t, "a", "R", 8 * i, 8) for i, t in enumerate([0.0, 5e-6, 6e-6, 20e-6, 40e-6])],
                      latency_us=[10.0, 10.0, np.nan, 10.0, 0.0])
    share = of(requests).share
    assert share.tolist() == pytest.approx([0.75, 0.75, 0.0, 1.0, 1.0])
    # the shares of a run's latencies add up to its time with a request in flight
    assert float((share[[0, 1, 3]] * 10.0).sum()) == pytest.approx(25.0)


def test_a_request_of_no_duration_gets_its_part_of_the_instant_it_was_dispatched_at():
    # a: 0-10 us; b at 5 us and c at 10 us, both of no duration: b beside a, c after a's completion
    requests = window([(t, "a", "R", 8 * i, 8) for i, t in enumerate([0.0, 5e-6, 10e-6])], latency_us=[10.0, 0.0, 0.0])
    assert of(requests).share.tolist() == [1.0, 0.5, 1.0]


def brute_force_shares(start: np.ndarray, latency: np.ndarray) -> list[float]:
    """_shares by its definition: 1/k on each stretch between two events, k counted at the stretch's middle
    (requests without a completion never in flight); a request of no duration 1/k at its dispatch, with the
    requests dispatched before it and still in flight."""
    timed = ~np.isnan(latency) & (latency > 0)
    end = start + np.nan_to_num(latency)
    times = np.unique(np.concatenate([start[timed], end[timed]]))
    middle = (times[:-1] + times[1:]) / 2
    flying = np.searchsorted(np.sort(start[timed]), middle) - np.searchsorted(np.sort(end[timed]), middle)
    step = np.diff(times) / np.maximum(flying, 1)
    shares = []
    for r, (s, e) in enumerate(zip(start, end, strict=True)):
        if np.isnan(latency[r]):
            shares.append(0.0)
        elif e > s:
            shares.append(step[(middle > s) & (middle < e)].sum() / (e - s))
        else:
            shares.append(1.0 / (1 + int((timed[:r] & (end[:r] > s)).sum())))
    return shares


@pytest.mark.parametrize("ties", [False, True])
def test_the_shares_agree_with_a_brute_force_integral_when_hundreds_are_in_flight(ties):
    rng = np.random.default_rng(3)
    start = np.sort(rng.uniform(0, 2000, 3000))
    latency = rng.uniform(0, 400, 3000)
    if ties:
        # whole microseconds: dispatches and completions at the same instants
        start, latency = np.floor(start), np.floor(latency)
    latency[::50], latency[1::50] = np.nan, 0.0
    shares = cost_model._shares(start, latency.astype(np.float32))
    assert shares == pytest.approx(brute_force_shares(start, latency), rel=1e-5)
    # the shares of the requests with a latency add up to the time one was in flight
    timed = ~np.isnan(latency) & (latency > 0)
    intervals = sorted(zip(start[timed], start[timed] + latency[timed], strict=True))
    busy, reach = 0.0, -np.inf
    for s, e in intervals:
        busy += max(0.0, e - max(s, reach))
        reach = max(reach, e)
    assert float((shares[timed] * latency[timed]).sum()) == pytest.approx(busy, rel=1e-5)


def test_a_request_waited_for_alone_weighs_its_whole_latency_and_one_of_four_in_flight_together_a_quarter():
    # `lookup`: 4 random reads 1 s apart, each alone; `burst`: 4 random reads dispatched together, 1 s after
    # them, in flight together as traced (dilated 100x: 10 ms apart in the model's time)
    lookups = [(float(t), "lookup", "R", sector, 8) for t, sector in enumerate([0, 1 << 24, 1 << 25, 1 << 26])]
    burst = [(4.0, "burst", "R", sector, 8) for sector in [1 << 27, 1 << 28, 1 << 29, 1 << 30]]
    requests = window(lookups + burst, latency_us=[100.0] * 8)
    costs = cost_model.layout_costs(of(requests, dilation=100.0), PROFILES)
    lone_saving = NAND_RANDOM_4K_US - OPTANE_4K_US
    assert costs[frozenset()] - costs[frozenset({"lookup"})] == pytest.approx(4 * lone_saving, abs=0.01)
    # the model serves the four together, as they were traced: they cost the wall time of one
    assert costs[frozenset()] - costs[frozenset({"burst"})] == pytest.approx(lone_saving, abs=0.01)


@pytest.mark.parametrize("policy", ["lru", "admitting"])
@pytest.mark.parametrize("capacity_pages", [1, 7, 40, 1000])
def test_the_emulated_cache_serves_the_reads_the_cost_model_s_cache_simulation_says_it_hits(policy, capacity_pages):
    # sequential runs of 16 KiB reads among random ones, so that the nand model detects streams
    requests = random_window(11, 3000).assign(device="7:1", tier="nand")
    runs = np.arange(len(requests)) % 50 < 10
    requests.loc[runs, "op"] = "R"
    requests.loc[runs, "request_size_sectors"] = 32
    requests.loc[runs, "sector"] = 4096 + np.arange(runs.sum()) * 32
    # through nand with an optane cache of 16 KiB pages in front
    served = simulated(of(requests), "--cache-profile", str(PROFILES["fast"]), "--cache", str(capacity_pages * 16384),
                       "16384", policy)
    # what the cache lets bypass it is a read the nand model served from its read-ahead
    requests["sequential"] = (served["class"] == "read_sequential").to_numpy()
    hits = cost_model.cache_hits(of(requests), 16384, capacity_pages * 16384, policy)
    assert (served["cache"] == "hit").tolist() == hits.tolist()
    assert 0 < hits.sum() < (requests["op"] == "R").sum()
    # a hit costs the optane model (reads 100 us apart never queue there)
    hit = served[served["cache"] == "hit"]
    assert hit["latency_us"].tolist() == pytest.approx((8.4 + hit["length"] / 2500).tolist(), abs=0.002)


@pytest.mark.parametrize(("given", "said"), [
    (["1G", "4096", "lru"], "--cache 1G 4096 lru: expected CAPACITY_BYTES PAGE_BYTES lru|admitting"),
    (["1048576", "4096", "fifo"], "--cache 1048576 4096 fifo: cache policy must be lru or admitting, got fifo"),
    (["1048576", "1000", "lru"], "cache page size must be a power of two of at least 512 bytes, got 1000"),
])
def test_a_bad_simulated_cache_is_refused_with_what_is_allowed(given, said):
    done = subprocess.run([str(cost_model.EMULATOR), "--profile", str(PROFILES["capacity"]), "--cache-profile",
                           str(PROFILES["fast"]), "--cache", *given, "--simulate"], input="0 r 0 4096\n",
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert said in done.stderr


@pytest.mark.parametrize("order", [[0, 1, 2], [2, 0, 1]])
def test_a_window_read_in_chunks_is_the_window_read_whole(order):
    requests = random_window(5, 3000).assign(object=np.where(np.arange(3000) % 3 == 0, "other", "a"))
    chunks = [requests[:1000], requests[1000:2500], requests[2500:]]
    whole, chunked = of(requests), cost_model.Window.of([chunks[i] for i in order], TIER_ROLES, 1.0)
    assert chunked.tables == whole.tables == ["a"]
    for name in ("at_ns", "writes", "offset_bytes", "length_bytes", "sequential", "table", "traced", "share"):
        assert getattr(chunked, name).tolist() == getattr(whole, name).tolist(), name


def test_a_table_only_named_by_a_chunk_s_categories_is_not_a_table_the_window_reads():
    # a row group's dictionary names the objects of every window in it
    requests = window([(0.0, "a", "R", 0, 8), (0.1, "a", "R", 8, 8)])
    requests["object"] = pd.Categorical(requests["object"], categories=["a", "b"])
    assert of(requests).tables == ["a"]


def test_a_page_size_that_is_not_a_power_of_two_is_refused_by_the_cache_simulation():
    said = "a page of 12288 bytes; the cache simulation takes pages of a power of two"
    with pytest.raises(cost_model.InputError, match=said):
        cost_model.cache_hits(of(page_reads([1, 2])), 12288, 4 * 12288, "lru")


@pytest.mark.parametrize(("source", "built"), [
    ("int model_replay(void) { return 0; }\n", 1),
    ("int model_replay(void) { return 0; }\nunsigned model_replay_abi(void) { return 3; }\n", 3)])
def test_a_model_library_built_from_other_sources_is_refused_with_how_to_rebuild_it(tmp_path, monkeypatch, source,
                                                                                     built):
    (tmp_path / "replay.c").write_text(source)
    library = tmp_path / "libtierlab-model.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(library), str(tmp_path / "replay.c")], check=True, timeout=120)
    monkeypatch.setattr(cost_model, "MODEL_LIBRARY", library)
    cost_model._library.cache_clear()
    try:
        with pytest.raises(cost_model.DeviceProfileError, match=rf"replay ABI {built}, this tierlab calls 2\): rebuild it with"):
            cost_model._library()
    finally:
        cost_model._library.cache_clear()
