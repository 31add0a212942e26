"""E3's caches against E2's best measured placement that fits each, from the studies' committed tables."""

import pandas as pd
import pytest

from tierlab.studies.cache_against_placement import cache_against_placement, lines

MIB = 1 << 20
SETUP = {"status": "ok", "engine": "mariadb", "scale_factor": "1", "buffer_pool": "4.5%"}
SIZES = {"customer": 30 * MIB, "orders": 170 * MIB, "lineitem": 760 * MIB, "partsupp": 140 * MIB, "part": 30 * MIB,
         "supplier": 2 * MIB, "nation": 8192, "region": 8192}


def cache_study(name: str = "e3-cache-admitting") -> dict:
    """E3: Q3 with no cache and caches of 100 MiB, 250 MiB and 1200 MiB, one run each (its tries' spread given)."""
    sizes = [("none", 0, 200.0, 200.0, 200.0), ("10%", 100 * MIB, 150.0, 145.0, 155.0),
             ("25%", 250 * MIB, 100.0, 98.0, 102.0), ("100%", 1200 * MIB, 120.0, 115.0, 125.0)]
    runs = pd.DataFrame([{**SETUP, "run_id": f"r{n}", "fast_cache": cache, "fast_cache_bytes": size,
                          "fast_cache_policy": "admitting"} for n, (cache, size, *_) in enumerate(sizes)])
    queries = pd.DataFrame([{"run_id": f"r{n}", "query": "q03", "elapsed_s": s, "elapsed_min_s": low,
                             "elapsed_max_s": high} for n, (_, _, s, low, high) in enumerate(sizes)])
    study = {"name": name, "workload": "tpch", "variables": {"fast_cache_policy": "admitting"},
             "matrix": {"fast_cache": ["none", "10%", "25%", "100%"]}, "repetitions": 1}
    return {"study": {"study": study}, "runs": runs, "queries": queries,
            "table_sizes": pd.DataFrame({"run_id": "r0", "table": list(SIZES), "stored_bytes": list(SIZES.values())})}


def placement_study(**setup) -> dict:
    """E2: Q3's layouts measured (median, least, most over three runs)."""
    measured = [("None", 196.0, 190.0, 200.0), ("C", 195.0, 193.0, 197.0), ("O", 100.0, 99.0, 101.0),
                ("C+O", 98.0, 97.0, 99.0), ("O+L", 35.0, 34.0, 36.0)]
    study = {"name": "validate-q3", "workload": "tpch", "variables": {}, "matrix": {"layout": [m[0] for m in measured]},
             "repetitions": 3}
    return {"study": {"study": study}, "runs": pd.DataFrame([{**SETUP, **setup, "run_id": "p1", "layout": "None"}]),
            "validation_layouts": pd.DataFrame([{"query": "q03", "layout": layout, "runs": 3, "measured_s": s,
                                                 "measured_min_s": low, "measured_max_s": high}
                                                for layout, s, low, high in measured])}


def test_each_cache_size_meets_the_fastest_measured_layout_whose_tables_fit_in_it():
    compared = cache_against_placement([cache_study(), placement_study()])
    assert list(compared["cache"]) == ["10%", "25%", "100%"]
    # 100 MiB holds customer (30 MiB) but not orders (170 MiB); 250 MiB holds customer and orders (200 MiB); 1200
    # MiB orders and lineitem (930 MiB)
    assert list(compared["placement"]) == ["C", "C+O", "O+L"]
    assert list(compared["placement_bytes"]) == [30 * MIB, 200 * MIB, 930 * MIB]
    assert list(compared["cache_x"]) == pytest.approx([200 / 150, 200 / 100, 200 / 120])
    assert list(compared["placement_x"]) == pytest.approx([196 / 195, 196 / 98, 196 / 35])


def test_a_side_is_faster_only_where_its_least_speedup_is_above_the_other_s_most():
    compared = cache_against_placement([cache_study(), placement_study()])
    # 10%: the cache's least 200/155 = 1.29x is above C's most 196/193 = 1.02x; 25%: 1.96-2.04x against
    # 1.98-2.02x; 100%: O+L's least 196/36 = 5.44x is above the cache's most 200/115 = 1.74x
    assert list(compared["faster"]) == ["cache", "tie", "placement"]
    assert lines(compared) == ["q03, the admitting cache against placement: 10% (100 MiB) 1.33x against C placed "
                               "1.01x, the cache; 25% (250 MiB) 2.00x against C+O placed 2.00x, a tie; 100% (1200 MiB) "
                               "1.67x against O+L placed 5.60x, placement"]


def test_a_placement_study_of_another_buffer_pool_is_not_compared():
    assert cache_against_placement([cache_study(), placement_study(buffer_pool="10%")]).empty


def test_a_study_of_both_policies_sets_each_policy_s_caches_apart():
    admitting = cache_study()
    lru = cache_study()
    lru["runs"] = lru["runs"].assign(fast_cache_policy="lru", run_id=lambda runs: runs["run_id"] + "-lru")
    # the LRU cache serves Q3 in 90 s at 25%: 2.22x, above C+O's most (2.02x)
    lru["queries"] = lru["queries"].assign(run_id=lambda queries: queries["run_id"] + "-lru")
    lru["queries"].loc[lru["queries"]["run_id"] == "r2-lru", ["elapsed_s", "elapsed_min_s", "elapsed_max_s"]] = 90.0
    both = {**admitting, "runs": pd.concat([admitting["runs"], lru["runs"]]),
            "queries": pd.concat([admitting["queries"], lru["queries"]])}
    compared = cache_against_placement([both, placement_study()])
    assert list(zip(compared["policy"], compared["cache"], compared["faster"], strict=True)) == [
        ("admitting", "10%", "cache"), ("admitting", "25%", "tie"), ("admitting", "100%", "placement"),
        ("lru", "10%", "cache"), ("lru", "25%", "cache"), ("lru", "100%", "placement")]
