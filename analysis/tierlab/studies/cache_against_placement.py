"""E3 across its studies and E2's: the fast tier as a block cache of each size set against the best placement of
tables that fits in it, both measured. E3's studies (e3-cache-*) time each query with a cache of 10 to 100% of the
database; E2's (validate-q*) time the same query with tables placed on the fast tier. A placement fits a cache
when the tables it places (sized by E3's own run: table_sizes.csv) take no more than the cache's bytes. Each side
is a speedup over its own study's run with nothing on the fast tier, since the two studies' tiers may be dilated
differently; one side is faster where its speedups over its runs' spread stay above the other's."""

import pandas as pd

from ..catalog.layout import FAST, parse_layout
from ..catalog.values import figure
from ..catalog.workloads import WORKLOADS

# what makes an E2 study's measurements comparable with an E3 study's: the same data and memory
SAME = ("engine", "scale_factor", "buffer_pool")
NOTHING = "none"


def _setup(tables: dict) -> tuple:
    runs = tables["runs"][tables["runs"]["status"] == "ok"]
    return tuple(str(runs[name].iloc[0]) for name in SAME)


def _cache_times(tables: dict) -> pd.DataFrame:
    """Per cache policy, size and query: the median time over the runs with their least and most, the cache's
    bytes (a run without a cache has a policy too, which it did not use)."""
    runs = tables["runs"][tables["runs"]["status"] == "ok"]
    rows = tables["queries"].merge(runs[["run_id", "fast_cache_policy", "fast_cache", "fast_cache_bytes"]], on="run_id")
    return rows.groupby(["fast_cache_policy", "fast_cache", "query"], sort=False).agg(
        seconds=("elapsed_s", "median"), low=("elapsed_min_s", "min"), high=("elapsed_max_s", "max"),
        cache_bytes=("fast_cache_bytes", "median")).reset_index()


def _placed_bytes(layouts: pd.Series, sizes: dict[str, int], workload: str) -> pd.Series:
    return layouts.map(lambda layout: sum(sizes[table] for table, tier in
                                          parse_layout(layout, WORKLOADS[workload]).items() if tier == FAST))


def _speedups(none_s: float, seconds: float, low: float, high: float) -> tuple[float, float, float]:
    """The speedup over nothing on the fast tier, and its least and most over the runs' spread."""
    return none_s / seconds, none_s / high, none_s / low


def _faster(cache: tuple, placement: tuple) -> str:
    if cache[1] > placement[2]:
        return "cache"
    if placement[1] > cache[2]:
        return "placement"
    return "tie"


def _against(cached: dict, placed: dict) -> list[dict]:
    """Each cache size of one E3 study against the best of one E2 study's measured layouts that fits it."""
    study = cached["study"]["study"]
    sizes = dict(zip(cached["table_sizes"]["table"], cached["table_sizes"]["stored_bytes"], strict=True))
    times = _cache_times(cached)
    layouts = placed["validation_layouts"].assign(
        placed_bytes=lambda frame: _placed_bytes(frame["layout"], sizes, study["workload"]))
    rows = []
    for (policy, query), timed in times.groupby(["fast_cache_policy", "query"], sort=False):
        at = timed.set_index("fast_cache")
        measured = layouts[layouts["query"] == query]
        bare = measured[measured["layout"] == "None"]
        if NOTHING not in at.index or bare.empty:
            continue
        none_s, placement_none_s = at.loc[NOTHING, "seconds"], bare["measured_s"].iloc[0]
        for size in [value for value in study["matrix"]["fast_cache"] if value != NOTHING and value in at.index]:
            cache = at.loc[size]
            fits = measured[measured["placed_bytes"] <= cache["cache_bytes"]]
            best = fits.loc[fits["measured_s"].idxmin()]
            cache_x = _speedups(none_s, cache["seconds"], cache["low"], cache["high"])
            placement_x = _speedups(placement_none_s, best["measured_s"], best["measured_min_s"],
                                    best["measured_max_s"])
            rows.append({"query": query, "policy": policy,
                         "cache": size, "cache_bytes": int(cache["cache_bytes"]), "cache_s": cache["seconds"],
                         "cache_x": cache_x[0], "cache_x_low": cache_x[1], "cache_x_high": cache_x[2],
                         "placement": best["layout"], "placement_bytes": int(best["placed_bytes"]),
                         "placement_s": best["measured_s"], "placement_x": placement_x[0],
                         "placement_x_low": placement_x[1], "placement_x_high": placement_x[2],
                         "faster": _faster(cache_x, placement_x), "cache_study": study["name"],
                         "placement_study": placed["study"]["study"]["name"]})
    return rows


def cache_against_placement(studies: list[dict]) -> pd.DataFrame:
    """Every E3 study's cache sizes against every E2 study of the same engine, scale factor and buffer pool, per
    query both timed (studies as read_gathered gives them)."""
    cached = [t for t in studies if t["study"]["study"]["name"].startswith("e3-cache") and "table_sizes" in t]
    placed = [t for t in studies if t["study"]["study"]["name"].startswith("validate-q") and "validation_layouts" in t]
    rows = [row for cache in cached for placement in placed if _setup(cache) == _setup(placement)
            for row in _against(cache, placement)]
    return pd.DataFrame(rows).sort_values(["query", "policy"], kind="stable") if rows else pd.DataFrame()


def lines(compared: pd.DataFrame) -> list[str]:
    """A sentence per query and cache policy: at each cache size, the faster of the cache and the best placement
    that fits, with both speedups."""
    verdicts = {"cache": "the cache", "placement": "placement", "tie": "a tie"}
    said = []
    for (query, policy), rows in compared.groupby(["query", "policy"], sort=False):
        said.append(f"{query}, the {policy} cache against placement: " + "; ".join(
            f"{row.cache} ({row.cache_bytes / 2**20:.0f} MiB) {row.cache_x:.2f}x against {row.placement} placed "
            f"{row.placement_x:.2f}x, {verdicts[row.faster]}" for row in rows.itertuples()))
    return said


def display(compared: pd.DataFrame) -> pd.DataFrame:
    """The page's table: per query, policy and size, each side's time and speedup with its spread."""
    return pd.DataFrame({
        "query": compared["query"], "policy": compared["policy"],
        "cache": [f"{c} ({b / 2**20:.0f} MiB)" for c, b in zip(compared["cache"], compared["cache_bytes"], strict=True)],
        "cache (s)": compared["cache_s"].map(figure),
        "cache vs none": [f"{x:.2f}x ({lo:.2f}-{hi:.2f})" for x, lo, hi in
                          zip(compared["cache_x"], compared["cache_x_low"], compared["cache_x_high"], strict=True)],
        "best placement that fits": [f"{layout} ({b / 2**20:.0f} MiB)" for layout, b in
                                     zip(compared["placement"], compared["placement_bytes"], strict=True)],
        "placement (s)": compared["placement_s"].map(figure),
        "placement vs None": [f"{x:.2f}x ({lo:.2f}-{hi:.2f})" for x, lo, hi in
                              zip(compared["placement_x"], compared["placement_x_low"], compared["placement_x_high"],
                                  strict=True)],
        "faster": compared["faster"], "studies": compared["cache_study"] + " / " + compared["placement_study"]})
