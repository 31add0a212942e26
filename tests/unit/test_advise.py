import pandas as pd
import pytest

from tierlab.studies.advise import advise, statements


def figures(setting: str, values: dict, higher: bool = True, unit: str = "transactions/s", step: str = "oltp_read_write",
            context: dict | None = None, data_bytes: dict | None = None, settings: dict | None = None):
    """A figures frame as advise is given it, one run per value (the values' figures: a list per repetition;
    settings: each value's runs' variables besides the setting, as their manifests have them)."""
    rows = []
    for value, measured in values.items():
        for repetition, figure in enumerate(measured if isinstance(measured, list) else [measured], 1):
            rows.append({setting: value, **(context or {}), "run": f"run-{value}-{repetition}", "step": step,
                         "figure": figure, "unit": unit, "higher_is_better": higher,
                         "data_bytes": (data_bytes or {}).get(value, float("nan")),
                         "buffer_pool_bytes": int(value[:-1]) << 20 if setting == "buffer_pool" else 0,
                         "run_settings": {setting: value, "engine": "mariadb", **(settings or {}).get(value, {})}})
    return pd.DataFrame(rows)


def study(*matrix):
    return {"name": "s", "workload": "sysbench", "matrix": {name: [] for name in matrix}}


def test_the_best_page_size_is_the_one_with_the_most_transactions():
    advice = advise(study("page_size"), figures("page_size", {"16k": 900.0, "4k": 1000.0, "8k": 1200.0}))
    assert list(advice["value"]) == ["4k", "8k", "16k"]
    assert list(advice["verdict"]) == ["", "best", ""]
    assert list(advice["against_best_pct"]) == pytest.approx([100 * 200 / 1200, 0, 100 * 300 / 1200])


def test_for_a_query_workload_the_best_value_takes_the_least_time():
    advice = advise(study("page_size"), figures("page_size", {"8k": 50.0, "16k": 40.0}, higher=False, unit="s",
                                                step="all queries"))
    assert list(advice["verdict"]) == ["", "best"]
    assert list(advice["against_best_pct"]) == pytest.approx([25.0, 0.0])


def test_the_buffer_pool_knee_is_the_smallest_within_ten_percent_of_the_best():
    times = {"8M": 100.0, "16M": 60.0, "32M": 52.0, "64M": 50.0}
    advice = advise(study("buffer_pool"), figures("buffer_pool", times, higher=False, unit="s", step="all queries"))
    assert list(advice["value"]) == ["8M", "16M", "32M", "64M"]
    assert list(advice["verdict"]) == ["", "", "knee", "best"]


def test_threads_stop_scaling_at_the_first_count_no_larger_count_beats_by_ten_percent():
    tps = {"1": 100.0, "2": 190.0, "4": 360.0, "8": 380.0, "16": 370.0}
    advice = advise(study("threads"), figures("threads", tps))
    assert list(advice["verdict"]) == ["", "", "stops scaling", "best", ""]


def test_a_plateau_that_more_threads_climb_out_of_is_not_where_scaling_stops():
    # as MariaDB's write-only on the fast tier measured (E4 threads): flat from 1 to 4 threads, then 1.66x at 64
    tps = {"1": 234.0, "2": 232.0, "4": 237.0, "8": 287.0, "16": 287.0, "32": 347.0, "64": 390.0}
    advice = advise(study("threads"), figures("threads", tps))
    assert list(advice["verdict"]) == ["", "", "", "", "", "", "best"]
    assert statements(advice)[0].split(". ")[1] == "Throughput still scales at the largest count measured"


def test_one_thread_count_measured_says_nothing_of_scaling():
    (line,) = statements(advise(study("threads"), figures("threads", {"1": 599.0})))
    assert line.split(". ")[1] == "One count measured: nothing to say of scaling yet"


def test_scaling_that_stops_at_one_thread_names_one_thread():
    (line,) = statements(advise(study("threads"), figures("threads", {"1": 300.0, "2": 310.0, "4": 305.0})))
    assert line.split(". ")[1] == "Throughput stops scaling at 1 thread (no larger count measured adds 10%)"


def test_the_spread_over_repetitions_is_max_minus_min_over_the_median():
    advice = advise(study("page_size"), figures("page_size", {"16k": [900.0, 1000.0, 1100.0]}))
    assert advice.loc[0, "figure"] == 1000.0
    assert advice.loc[0, "spread_pct"] == pytest.approx(20.0)
    assert advice.loc[0, "repetitions"] == 3
    assert advice.loc[0, "runs"] == "run-16k-1 run-16k-2 run-16k-3"


def test_each_combination_of_the_other_variables_gets_its_own_advice():
    frame = pd.concat([figures("page_size", {"4k": 1000.0, "16k": 800.0}, context={"layout": "ALL"}),
                       figures("page_size", {"4k": 300.0, "16k": 400.0}, context={"layout": "None"})])
    frame["run"] = frame["run"] + frame["layout"]
    advice = advise(study("layout", "page_size"), frame)
    best = advice[advice["verdict"] == "best"].set_index("context")["value"].to_dict()
    assert best == {"layout=ALL": "4k", "layout=None": "16k"}


def test_compression_statements_give_each_mode_s_cost_and_the_bytes_stored():
    frame = figures("compression", {"none": 1000.0, "zlib8": 800.0}, data_bytes={"none": 200 << 20, "zlib8": 110 << 20})
    (line,) = statements(advise(study("compression"), frame))
    assert line == ("compression for oltp_read_write (all runs): none is best, 1000 transactions/s, one repetition; "
                    "zlib8 20% worse. Data stored: none 200.0 MiB, zlib8 110.0 MiB. "
                    "Evidence: none: run-none-1; zlib8: run-zlib8-1.")


def test_a_buffer_pool_statement_names_the_knee():
    times = {"8M": 100.0, "16M": 60.0, "32M": 52.0, "64M": 50.0}
    (line,) = statements(advise(study("buffer_pool"), figures("buffer_pool", times, higher=False, unit="s",
                                                             step="all queries")))
    assert "64M (64 MiB) is best, 50.0 s, one repetition; 8M (8 MiB) 100% worse, 16M (16 MiB) 20% worse, " \
           "32M (32 MiB) 4% worse" in line
    assert "The knee: 32M (32 MiB), the smallest buffer pool within 10% of the best" in line


def test_a_value_within_half_a_percent_of_the_best_is_as_good():
    (line,) = statements(advise(study("page_size"), figures("page_size", {"8k": 1000.0, "16k": 998.0})))
    assert "8k is best, 1000 transactions/s, one repetition; 16k as good." in line


def test_a_statement_names_the_variables_its_runs_differ_in_besides_the_setting():
    frame = figures("compression", {"none": 39.0, "zstd": 5.6}, higher=False, unit="s", step="all queries",
                    settings={"none": {"flush_method": "O_DIRECT"}, "zstd": {"flush_method": "fsync"}})
    advice = advise(study("compression"), frame)
    assert set(advice["also_differs"]) == {"flush_method (none: O_DIRECT, zstd: fsync)"}
    (line,) = statements(advice)
    assert ("zstd is best, 5.6 s, one repetition; none 596% worse. The runs differ also in flush_method (none: "
            "O_DIRECT, zstd: fsync), so the difference is not the compression's alone. Evidence:") in line
