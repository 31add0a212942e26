"""The access-pattern figures of a set of requests from what was summed over them (docs/metrics.md): the
tallies, the distinct pages, the time in flight and the latencies. AccessTotals sums them chunk by chunk,
the compiled pass over binary traces (traces/native.py) in one go; both turn them into figures here."""

import numpy as np

from ..catalog.analysis import RANDOM_PCT_THRESHOLD, REPEAT_THRESHOLD

LATENCY_QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p99_9": 0.999, "p99_99": 0.9999}
CATEGORIES = {
    (True, True): "1 random repeated",
    (True, False): "2 random",
    (False, False): "3 sequential",
    (False, True): "4 sequential repeated",
}
# the tallies access_figures reads
TALLIED = ("pages", "read_pages", "sequential_pages", "requests", "read_requests", "write_requests", "read_bytes",
           "write_bytes", "tiny", "misaligned")


def latency_percentiles(latency_us: np.ndarray) -> dict[str, float]:
    """The percentiles of the latencies of completed requests (no NaN); the array is reordered in place."""
    if not len(latency_us):
        return {f"latency_{k}_us": float("nan") for k in LATENCY_QUANTILES}
    found = np.quantile(latency_us, list(LATENCY_QUANTILES.values()), overwrite_input=True)
    return {f"latency_{k}_us": float(v) for k, v in zip(LATENCY_QUANTILES, found, strict=True)}


def category(random_pct: float, repeat_rate: float,
             random_threshold: float = RANDOM_PCT_THRESHOLD, repeat_threshold: float = REPEAT_THRESHOLD) -> str:
    if np.isnan(random_pct):
        return "no reads"
    return CATEGORIES[(random_pct > random_threshold, repeat_rate > repeat_threshold)]


def access_figures(counts: dict, distinct: int, read_distinct: int, flight: dict, latency_us: np.ndarray,
                   random_threshold: float = RANDOM_PCT_THRESHOLD, repeat_threshold: float = REPEAT_THRESHOLD) -> dict:
    """The figures of requests with these tallies (TALLIED), distinct pages (all, reads), time in flight
    (io_time_s, inflight_mean, inflight_max) and completed requests' latencies (reordered in place)."""
    pages, read_pages = counts["pages"], counts["read_pages"]
    sequential_pct = 100.0 * counts["sequential_pages"] / read_pages if read_pages else float("nan")
    random_pct = 100.0 - sequential_pct if read_pages else float("nan")
    repeat_rate = pages / distinct if distinct else float("nan")
    requests = counts["requests"]
    return {
        **{key: counts[key] for key in ("requests", "read_requests", "write_requests", "read_bytes", "write_bytes")},
        "pages": pages,
        "distinct_pages": distinct,
        "read_pages": read_pages,
        "distinct_read_pages": read_distinct,
        "sequential_pct": sequential_pct,
        "random_pct": random_pct,
        "repeat_access_rate": repeat_rate,
        "read_repeat_access_rate": read_pages / read_distinct if read_distinct else float("nan"),
        "category": category(random_pct, repeat_rate, random_threshold, repeat_threshold),
        "tiny_pct": 100.0 * counts["tiny"] / requests if requests else float("nan"),
        "misaligned_pct": 100.0 * counts["misaligned"] / requests if requests else float("nan"),
        **flight,
        **latency_percentiles(latency_us),
    }
