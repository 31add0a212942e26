"""A load driver's own account of a timed window (sysbench's reports): transactions, queries, errors and
latency for the whole window and per report interval, as rates.

The agent keeps sysbench's reports as it wrote them, in counts and seconds (raw/driver/<step>_try<n>.jsonl,
one JSON object a line: `kind` interval or total, time_total_s, time_interval_s, threads_running,
events, reads, writes, other, errors, reconnects, percentile, latency_pct_ms, and for the total
latency_min_ms, latency_avg_ms, latency_max_ms); these functions turn them into rates.
"""

import pandas as pd

TOTAL_COLUMNS = ["query", "try", "seconds", "transactions", "tps", "qps", "reads_per_s", "writes_per_s",
                 "other_per_s", "errors", "errors_per_s", "reconnects", "latency_avg_ms", "latency_pct_ms", "percentile",
                 "latency_max_ms"]
INTERVAL_COLUMNS = ["query", "try", "time_s", "threads_running", "tps", "qps", "reads_per_s", "writes_per_s",
                    "errors_per_s", "reconnects_per_s", "latency_pct_ms", "percentile"]


def _rates(reports: pd.DataFrame) -> pd.DataFrame:
    seconds = reports["time_interval_s"]
    return pd.DataFrame({
        "tps": reports["events"] / seconds,
        "qps": (reports["reads"] + reports["writes"] + reports["other"]) / seconds,
        "reads_per_s": reports["reads"] / seconds,
        "writes_per_s": reports["writes"] / seconds,
        "other_per_s": reports["other"] / seconds,
        "errors_per_s": reports["errors"] / seconds,
        "reconnects_per_s": reports["reconnects"] / seconds,
    })


def throughput(reports: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per step try for its whole window, one row per step try and report interval) from the reports
    of every window, each row carrying its step's `query` and `try`."""
    if reports.empty:
        return pd.DataFrame(columns=TOTAL_COLUMNS), pd.DataFrame(columns=INTERVAL_COLUMNS)
    reports = pd.concat([reports, _rates(reports)], axis=1)
    totals = reports[reports["kind"] == "total"].rename(columns={"time_interval_s": "seconds", "events": "transactions"})
    intervals = reports[reports["kind"] == "interval"].rename(columns={"time_total_s": "time_s"})
    return (totals[TOTAL_COLUMNS].sort_values(["query", "try"]).reset_index(drop=True),
            intervals[INTERVAL_COLUMNS].sort_values(["query", "try", "time_s"]).reset_index(drop=True))
