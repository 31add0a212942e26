import numpy as np
import pandas as pd
import pytest

from tierlab.metrics.patterns import (
    AccessTotals,
    InFlight,
    Pieces,
    Streams,
    access_summary,
    contention,
    page_counts,
    page_order,
    repeat_access_rate,
    sequential_flags,
    size_histogram,
)
from tierlab.metrics.summary import category

PAGE = 16384
PAGE_SECTORS = PAGE // 512


def requests(rows, mapped=True):
    """rows: (ts_s, sector, size_sectors[, op[, device[, latency_us]]])."""
    records = []
    for row in rows:
        ts, sector, size, op, device, latency = (*row, "R", "7:1", 100.0)[:6] if len(row) == 3 else (*row, "7:1", 100.0)[:6]
        records.append({"ts_s": ts, "device": device, "op": op, "rwbs": op, "sector": sector, "size_sectors": size,
                        "latency_us": latency, "pid": 1, "process": "mariadbd",
                        "object": "lineitem" if mapped else "other",
                        "file_offset_bytes": float(sector * 512) if mapped else np.nan,
                        "request": len(records), "piece": 0, "request_size_sectors": size, "sequential": False})
    return pd.DataFrame(records)


def in_flight(ts_s, latency_us):
    flight = InFlight()
    flight.add(ts_s, latency_us)
    return flight.summary()


def counts(pieces):
    return page_counts(pieces.space, pieces.first_page, pieces.last_page)


def test_study_example_sequence_has_repeat_access_rate_two():
    # p1 p3 p4 p3 p1 p4 p5 p3: 8 accesses of 4 distinct pages
    pages = [1, 3, 4, 3, 1, 4, 5, 3]
    frame = requests([(i, p * PAGE_SECTORS, PAGE_SECTORS) for i, p in enumerate(pages)])
    assert repeat_access_rate(Pieces.of(frame, PAGE)) == 2.0


def test_no_page_read_twice_gives_repeat_access_rate_one():
    frame = requests([(i, p * PAGE_SECTORS, PAGE_SECTORS) for i, p in enumerate([7, 2, 9])])
    assert repeat_access_rate(Pieces.of(frame, PAGE)) == 1.0


def test_a_request_spanning_two_pages_touches_both():
    # 16 KiB starting half-way into page 1: pages 1 and 2
    frame = requests([(0, PAGE_SECTORS + PAGE_SECTORS // 2, PAGE_SECTORS)])
    pieces = Pieces.of(frame, PAGE)
    assert (pieces.first_page[0], pieces.last_page[0]) == (1, 2)
    assert counts(pieces) == (2, 2)


def test_pages_of_different_files_are_different_pages():
    frame = requests([(0, 0, PAGE_SECTORS), (1, 0, PAGE_SECTORS)])
    frame.loc[1, "object"] = "orders"
    assert counts(Pieces.of(frame, PAGE)) == (2, 2)


def test_unmapped_requests_use_device_aligned_pages():
    frame = pd.concat([requests([(0, 8, 8)], mapped=False), requests([(1, 8, 8)])], ignore_index=True)
    pieces = Pieces.of(frame, PAGE)
    assert pieces.first_page.tolist() == [0, 0]
    # the device's unmapped page 0 is not the file's page 0
    assert counts(pieces) == (2, 2)


def test_adjacent_single_page_reads_are_sequential_after_the_first():
    frame = requests([(i, 1000 + i * PAGE_SECTORS, PAGE_SECTORS) for i in range(4)])
    assert sequential_flags(frame, PAGE).tolist() == [False, True, True, True]


def test_interleaved_streams_are_each_sequential():
    a = [(2 * i, 1000 + i * PAGE_SECTORS, PAGE_SECTORS) for i in range(3)]
    b = [(2 * i + 1, 900000 + i * PAGE_SECTORS, PAGE_SECTORS) for i in range(3)]
    frame = requests(sorted(a + b))
    assert sequential_flags(frame, PAGE).tolist() == [False, False, True, True, True, True]


def test_a_stream_older_than_the_window_is_forgotten():
    first = [(0, 0, PAGE_SECTORS)]
    others = [(1 + i, (10 + i) * 100000, PAGE_SECTORS) for i in range(8)]
    resume = [(20, PAGE_SECTORS, PAGE_SECTORS)]
    assert sequential_flags(requests(first + others + resume), PAGE, window=8).tolist()[-1] is False
    assert sequential_flags(requests(first + others[:7] + resume), PAGE, window=8).tolist()[-1] is True


def test_a_multi_page_request_is_sequential_on_its_own():
    assert sequential_flags(requests([(0, 5000, 4 * PAGE_SECTORS)]), PAGE).tolist() == [True]


def test_streams_are_per_device():
    frame = requests([(0, 0, PAGE_SECTORS, "R", "7:0"), (1, PAGE_SECTORS, PAGE_SECTORS, "R", "7:1")])
    assert sequential_flags(frame, PAGE).tolist() == [False, False]


@pytest.mark.parametrize(("random_pct", "repeat", "expected"), [
    (50.0, 1.1, "3 sequential"),
    (50.01, 1.1, "2 random"),
    (50.01, 1.11, "1 random repeated"),
    (50.0, 1.11, "4 sequential repeated"),
    (float("nan"), float("nan"), "no reads"),
])
def test_category_boundaries(random_pct, repeat, expected):
    assert category(random_pct, repeat) == expected


def test_busy_time_is_the_union_of_in_flight_intervals():
    # [0, 1 ms] and [0.5, 1.5 ms] overlap; [3, 4 ms] stands alone: 1.5 + 1 ms busy
    frame = requests([(0.0, 0, 8, "R", "7:1", 1000.0), (0.0005, 64, 8, "R", "7:1", 1000.0),
                      (0.003, 128, 8, "R", "7:1", 1000.0)])
    assert in_flight(frame["ts_s"].to_numpy(), frame["latency_us"].to_numpy())["io_time_s"] == pytest.approx(0.0025)


def test_access_summary_of_a_scan_and_a_repeated_lookup():
    scan = [(i, 1024 + i * PAGE_SECTORS, PAGE_SECTORS) for i in range(6)]
    lookups = [(10 + i, 500000, PAGE_SECTORS) for i in range(2)]
    frame = requests(scan + lookups)
    frame["sequential"] = sequential_flags(frame, PAGE)
    summary = access_summary(Pieces.of(frame, PAGE))
    assert (summary["read_pages"], summary["distinct_read_pages"]) == (8, 7)
    assert summary["sequential_pct"] == pytest.approx(100 * 5 / 8)
    assert summary["repeat_access_rate"] == pytest.approx(8 / 7)
    assert summary["category"] == "4 sequential repeated"
    assert summary["tiny_pct"] == 0.0
    assert summary["misaligned_pct"] == 0.0


def test_inflight_depth_is_time_weighted_while_busy():
    # two requests overlap for 0.5 ms of a 1.5 ms busy period: depth 1, 2, 1 for 0.5 ms each
    frame = requests([(0.0, 0, 8, "R", "7:1", 1000.0), (0.0005, 64, 8, "R", "7:1", 1000.0),
                      (0.003, 128, 8, "R", "7:1", 1000.0)])
    depth = in_flight(frame["ts_s"].to_numpy(), frame["latency_us"].to_numpy())
    assert depth["inflight_max"] == 2
    assert depth["inflight_mean"] == pytest.approx((1.5 * (1 + 2 + 1) / 3 + 1.0 * 1) / 2.5)


def test_back_to_back_requests_do_not_overlap():
    frame = requests([(0.0, 0, 8, "R", "7:1", 1000.0), (0.001, 64, 8, "R", "7:1", 1000.0)])
    depth = in_flight(frame["ts_s"].to_numpy(), frame["latency_us"].to_numpy())
    assert (depth["inflight_mean"], depth["inflight_max"]) == (1.0, 1)


def test_size_histogram_buckets_by_upper_bound():
    frame = requests([(0, 0, 1), (1, 8, 8), (2, 16, 32), (3, 48, 32), (4, 80, 2560)])
    histogram = size_histogram(Pieces.of(frame, PAGE))
    assert histogram.to_dict("list") == {"size_le_bytes": [512, 4096, 16384, -1], "requests": [1, 1, 2, 1]}


def test_page_counts_equal_counting_every_page_of_every_request_on_random_spans():
    rng = np.random.default_rng(7)
    n = 2000
    space = rng.choice([0, 1, -1], n)
    first = rng.integers(0, 500, n)
    last = first + rng.integers(0, 40, n)
    seen = set()
    for one_space, one_first, one_last in zip(space, first, last, strict=True):
        seen.update((one_space, page) for page in range(one_first, one_last + 1))
    assert page_counts(space, first, last) == (int((last - first + 1).sum()), len(seen))


def test_pages_of_huge_ranges_are_counted_without_listing_each_page():
    # 2^40 pages would take 8 TiB listed one by one
    first, last = np.array([0, 1 << 39]), np.array([(1 << 40) - 1] * 2)
    assert page_counts(np.array([-1, -1]), first, last) == ((1 << 40) + (1 << 39), 1 << 40)


def test_sequential_flags_follow_the_definition_on_random_requests():
    """Against the definition, request by request in time order: one queue of the last 8 ends per device."""
    rng = np.random.default_rng(11)
    n = 5000
    frame = pd.DataFrame({"ts_s": rng.random(n), "device": rng.choice(["7:1", "7:2"], n),
                          "sector": rng.integers(0, 64, n) * PAGE_SECTORS,
                          "size_sectors": rng.choice([PAGE_SECTORS, 2 * PAGE_SECTORS], n, p=[0.9, 0.1])})
    expected = np.zeros(n, dtype=bool)
    recent: dict[str, list[int]] = {"7:1": [], "7:2": []}
    for i in frame.sort_values("ts_s").index:
        ends, start = recent[frame.at[i, "device"]], frame.at[i, "sector"]
        expected[i] = start in ends or frame.at[i, "size_sectors"] > PAGE_SECTORS
        if start in ends:
            ends.remove(start)
        ends.append(start + frame.at[i, "size_sectors"])
        del ends[:-8]
    assert sequential_flags(frame, PAGE).tolist() == expected.tolist()


def test_in_flight_follows_the_definition_on_random_requests():
    """Against a sweep over every dispatch (+1) and completion (-1) in time order, completions first at a tie."""
    rng = np.random.default_rng(5)
    n = 3000
    ts = np.round(rng.random(n), 4)
    latency = np.where(rng.random(n) < 0.05, np.nan, np.round(rng.random(n) * 2000, 0))
    done = ~np.isnan(latency)
    events = sorted([(t, 1) for t in ts[done]] + [(t + lat / 1e6, -1) for t, lat in zip(ts[done], latency[done], strict=True)],
                    key=lambda event: (event[0], event[1]))
    depth, weighted, busy, peak = 0, 0.0, 0.0, 0
    for (time, step), (next_time, _) in zip(events, events[1:] + [events[-1]], strict=True):
        depth += step
        peak = max(peak, depth)
        if depth > 0:
            weighted += depth * (next_time - time)
            busy += next_time - time
    assert in_flight(ts, latency) == {"io_time_s": pytest.approx(busy, rel=1e-9),
                                      "inflight_mean": pytest.approx(weighted / busy, rel=1e-9), "inflight_max": peak}


def test_a_trace_summed_up_chunk_by_chunk_gives_the_summary_of_the_whole():
    rng = np.random.default_rng(3)
    n = 4000
    frame = pd.DataFrame({"ts_s": np.sort(np.round(rng.random(n), 5)),
                          "device": pd.Categorical(rng.choice(["7:1", "7:2"], n)),
                          "op": pd.Categorical(rng.choice(["R", "W"], n, p=[0.8, 0.2])),
                          "sector": rng.integers(0, 400, n) * 8, "size_sectors": rng.choice([1, 8, 32, 64], n),
                          "latency_us": np.where(rng.random(n) < 0.02, np.nan, rng.integers(50, 3000, n).astype(float))})
    columns = ["ts_s", "device", "sector", "size_sectors"]

    def read_flags(part, streams=None):
        flags = np.zeros(len(part), dtype=bool)
        reads = (part["op"] == "R").to_numpy()
        flags[reads] = sequential_flags(part.loc[reads, columns], PAGE, streams=streams)
        return flags

    whole = access_summary(Pieces.of_requests(frame, read_flags(frame), PAGE))
    totals, streams = AccessTotals(), Streams(2)
    for begin in range(0, n, 333):
        part = frame.iloc[begin:begin + 333]
        totals.add(Pieces.of_requests(part, read_flags(part, streams), PAGE))
    chunked = totals.summary()
    assert chunked == {key: value if isinstance(value, str | int) else pytest.approx(value, rel=1e-9, nan_ok=True)
                       for key, value in whole.items()}


def contended(rows):
    frame = requests(rows)
    return contention(frame, np.ones(len(frame), dtype=bool))


def test_a_request_to_a_4k_chunk_another_request_still_reads_is_crowded():
    found = contended([(0.0, 0, 8), (0.00005, 4, 8),  # the second starts in the first's chunk, in flight
                       (0.0002, 0, 8),  # the first has ended by then
                       (0.00005, 0, 8, "R", "7:2", 100.0)])  # another device
    assert found["crowded_pct"] == 25.0


def test_a_read_dispatched_while_a_write_to_its_device_is_in_flight_is_beside_writes():
    found = contended([(1.0, 800, 8, "W"), (1.00005, 0, 8), (1.00005, 0, 8, "R", "7:2", 100.0), (1.0002, 8, 8),
                       (2.0, 800, 8, "W", "7:1", np.nan), (2.00001, 16, 8)])  # a write of unknown latency
    assert found["reads_beside_writes_pct"] == 25.0


def test_contention_counts_only_the_requests_it_is_given():
    frame = requests([(0.0, 0, 8), (0.00005, 0, 8), (0.0001, 64, 8)])
    assert contention(frame, np.array([True, False, True]))["crowded_pct"] == 0.0


def test_crowded_requests_are_counted_as_a_pairwise_check_counts_them_in_any_row_order():
    rng = np.random.default_rng(5)
    n = 600
    rows = [(float(ts), int(chunk) * 8 + int(offset), 8, "R", f"7:{device}", float(latency))
            for ts, chunk, offset, device, latency in zip(np.sort(rng.random(n)) / 100, rng.integers(0, 40, n),
                                                          rng.integers(0, 8, n), rng.integers(1, 3, n),
                                                          rng.lognormal(np.log(300), 1, n), strict=True)]
    crowded = sum(any(other[4] == row[4] and other[1] // 8 == row[1] // 8 and other[0] <= row[0] < other[0] + other[5] / 1e6
                      for other in rows[:i]) for i, row in enumerate(rows))
    assert crowded > 0
    for order in (np.arange(n), rng.permutation(n)):
        assert contended([rows[i] for i in order])["crowded_pct"] == pytest.approx(100.0 * crowded / n, rel=1e-12)


def test_page_order_sorts_by_space_then_page_whatever_the_pages_size():
    """Small pages take the packed sort, pages near 2^62 the plain one: the same order either way."""
    rng = np.random.default_rng(8)
    space = rng.integers(-2, 3, 5000).astype(np.int32)
    for first_page in (rng.integers(0, 1 << 20, 5000), rng.integers(1 << 61, 1 << 62, 5000)):
        order = page_order(space, first_page)
        assert sorted(order.tolist()) == list(range(5000))
        keys = list(zip(space[order].tolist(), first_page[order].tolist(), strict=True))
        assert keys == sorted(keys)
