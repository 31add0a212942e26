"""An observation's own figures: per interval the engine's work beside the block level's reads, the tracing's cost
measured on the instance's traffic, and the warnings that say a window may not represent it."""

import pandas as pd
import pytest

from tierlab.metrics.observed import intervals, tracing_overhead, warnings

QUERIES = pd.DataFrame({"query": ["i0001", "i0002", "i0003", "i0004"], "elapsed_s": [10.0, 10.0, 10.0, 10.0],
                        "trace_complete": [True, None, True, True]})


def counters(xacts: list[int], reads: list[int], hits: list[int]) -> pd.DataFrame:
    """Each interval's counters, read 10 s apart like the interval."""
    return pd.DataFrame({"query": ["i0001", "i0002", "i0003", "i0004"], "try": 1, "xact_commit": xacts,
                         "xact_rollback": [0, 0, 0, 0], "blks_read": reads, "blks_hit": hits, "counted_s": 10.0})


METRICS = pd.DataFrame({"query": ["i0001", "i0003"], "read_pages": [500, 700], "io_time_s": [0.5, 0.7],
                        "requests": [400, 600]})
# what the kernel counted on the disks in each interval
DISKS = pd.DataFrame({"query": ["i0001", "i0002", "i0003", "i0004"], "kernel_read_requests": [390, 500, 590, 0],
                      "kernel_write_requests": [10, 0, 10, 0]})


def test_each_interval_has_its_work_per_second_its_reads_and_the_block_level_s_where_traced():
    frame = intervals(QUERIES, counters([900, 1000, 950, 1000], [100, 100, 100, 100], [900, 900, 900, 900]), METRICS,
                      "postgresql", DISKS, {})
    assert frame["traced"].tolist() == [True, False, True, True]
    assert frame["work_per_s"].tolist() == [90.0, 100.0, 95.0, 100.0]
    assert frame["engine_hit_pct"].tolist() == [90.0, 90.0, 90.0, 90.0]
    # a traced interval without a request read nothing; an untraced one has no block-level figures
    assert frame["block_read_pages"].fillna(-1).tolist() == [500, -1, 700, 0]
    assert frame["traced_requests"].fillna(-1).tolist() == [400, -1, 600, 0]
    assert frame["kernel_requests"].tolist() == [400, 500, 600, 0]


def test_a_trace_short_of_the_requests_the_kernel_counted_is_a_warning():
    frame = intervals(QUERIES, counters([900, 1000, 950, 1000], [100] * 4, [900] * 4), METRICS, "postgresql",
                      DISKS.assign(kernel_read_requests=[490, 500, 690, 0]), {})
    (found,) = warnings(frame, [], {})
    assert found["warning"].startswith("the traces hold 1000 requests where the kernel counted 1200 on the disks")


def test_the_tracing_s_cost_is_the_untraced_rate_against_its_traced_neighbours():
    frame = intervals(QUERIES, counters([900, 1000, 950, 1000], [1] * 4, [1] * 4), METRICS, "postgresql", DISKS, {})
    assert tracing_overhead(frame) == {"untraced_intervals": 1, "untraced_work_per_s": 100.0,
                                       "traced_work_per_s": 92.5, "overhead_pct": pytest.approx(7.5)}


def test_without_an_untraced_interval_the_cost_is_not_measured():
    frame = intervals(QUERIES.assign(trace_complete=True), counters([1] * 4, [1] * 4, [1] * 4), METRICS, "postgresql", DISKS, {})
    assert tracing_overhead(frame)["overhead_pct"] is None


def test_the_work_per_second_is_over_the_seconds_between_the_counters_reads_not_the_interval_s():
    # a busy host read the counters 12.5 s apart around the second and fourth 10 s intervals
    counted = counters([900, 1000, 950, 1000], [100] * 4, [900] * 4).assign(counted_s=[10.0, 12.5, 10.0, 12.5])
    frame = intervals(QUERIES, counted, METRICS, "postgresql", DISKS, {})
    assert frame["work_per_s"].tolist() == [90.0, 80.0, 95.0, 80.0]
    assert frame["counted_s"].tolist() == [10.0, 12.5, 10.0, 12.5]


def test_an_observation_older_than_the_counted_seconds_has_its_work_per_interval_second():
    older = counters([900, 1000, 950, 1000], [100] * 4, [900] * 4).drop(columns="counted_s")
    frame = intervals(QUERIES, older, METRICS, "postgresql", DISKS, {})
    assert frame["work_per_s"].tolist() == [90.0, 100.0, 95.0, 100.0]
    assert frame["counted_s"].isna().all()


def test_the_mysql_family_s_work_is_its_statements_and_its_hits_its_buffer_pool_s():
    status = pd.DataFrame({"query": ["i0001", "i0002", "i0003", "i0004"], "try": 1, "Questions": [50, 60, 70, 80],
                           "Innodb_pages_read": [10, 10, 10, 10], "Innodb_buffer_pool_reads": [10, 10, 10, 10],
                           "Innodb_buffer_pool_read_requests": [100, 100, 100, 100], "counted_s": 10.0})
    frame = intervals(QUERIES, status, METRICS, "mariadb", DISKS, {})
    assert frame["work_per_s"].tolist() == [5.0, 6.0, 7.0, 8.0]
    assert frame["engine_hit_pct"].tolist() == [90.0, 90.0, 90.0, 90.0]


def test_a_steady_window_has_no_warning():
    frame = intervals(QUERIES, counters([900, 1000, 950, 1000], [100] * 4, [900] * 4), METRICS, "postgresql", DISKS, {})
    assert warnings(frame, [], {}) == []


def test_a_rate_of_work_that_varies_widely_is_more_than_one_phase():
    frame = intervals(QUERIES, counters([100, 1000, 100, 1000], [100] * 4, [900] * 4), METRICS, "postgresql", DISKS, {})
    (found,) = warnings(frame, [], {})
    assert found["warning"].startswith("the rate of work varied from 10 to 100 per s across the intervals")


def test_a_rising_hit_share_is_a_warming_cache():
    frame = intervals(QUERIES, counters([1000] * 4, [500, 300, 100, 50], [500, 700, 900, 950]), METRICS, "postgresql", DISKS, {})
    (found,) = warnings(frame, [], {})
    assert found["warning"].startswith("the engine's cache hit share rose from 50.0% to 95.0% over the window")


def test_no_work_at_all_and_changed_objects_are_said_with_their_evidence():
    frame = intervals(QUERIES, counters([0] * 4, [0] * 4, [0] * 4), METRICS, "postgresql", DISKS, {})
    found = warnings(frame, [{"object": "app.public.doomed", "change": "dropped"}], {})
    assert [w["evidence"] for w in found] == ["tables/intervals.csv work_per_s", "tables/objects_changed.csv"]
    assert "app.public.doomed dropped" in found[1]["warning"]


def test_fewer_than_three_traced_intervals_are_too_few():
    frame = intervals(QUERIES.assign(trace_complete=[True, None, None, True]),
                      counters([1000] * 4, [100] * 4, [900] * 4), METRICS, "postgresql", DISKS, {})
    assert [w["warning"][:30] for w in warnings(frame, [], {})] == ["only 2 traced interval(s): too"]


def test_an_interval_whose_trace_was_rotated_out_ran_traced_and_has_no_block_level_figures():
    """i0001's trace was deleted to keep within the limit: it ran traced (a neighbour of the untraced i0002 in the
    tracing's cost) but its reads are not read."""
    frame = intervals(QUERIES.assign(trace_complete=[None, None, True, True]), counters([900, 1000, 950, 1000],
                      [1] * 4, [1] * 4), METRICS[METRICS["query"] != "i0001"], "postgresql", DISKS, {"i0001": 3 << 30})
    assert frame["traced"].tolist() == [False, False, True, True]
    assert frame["trace_rotated"].tolist() == [True, False, False, False]
    assert frame["block_read_pages"].fillna(-1).tolist() == [-1, -1, 700, 0]
    assert tracing_overhead(frame) == {"untraced_intervals": 1, "untraced_work_per_s": 100.0,
                                       "traced_work_per_s": 92.5, "overhead_pct": pytest.approx(7.5)}
    rotated, few = warnings(frame, [], {"i0001": 3 << 30})
    assert few["warning"].startswith("only 2 traced interval(s)")
    assert rotated == {"warning": "1 interval(s)' traces (3.00 GiB) were deleted to keep the raw traces within "
                                "raw_trace_limit: the block-level figures and the advice rest on the newest 2 traced "
                                "interval(s), the counters on all",
                     "evidence": "tables/intervals.csv trace_rotated, raw/rotated.json"}
