"""One traced query window summed up: its rows of analyze's tables (query_metrics, tier_metrics, size_histogram,
table_metrics, trace_counts) and its reads' latency histogram per tier, from its attributed requests."""

from dataclasses import dataclass

import numpy as np

from ..devices import cost_model
from ..metrics.patterns import (
    LATENCY_EDGES_US,
    Pieces,
    access_summary,
    contention,
    latency_histogram,
    mark_sequential,
    size_histogram,
)
from .results import Run, Window


@dataclass(frozen=True)
class WindowParameters:
    """What a window is summed up with: the run's page size and emulated cache (the capacity tier it was in
    front of), and the analysis' thresholds."""
    page_bytes: int
    stream_window: int
    random_threshold: float
    repeat_threshold: float
    fast_cache_bytes: int
    fast_cache_policy: str | None
    capacity_tier: str | None

    @classmethod
    def of(cls, run: Run, stream_window: int, random_threshold: float, repeat_threshold: float) -> "WindowParameters":
        # runs from before fast_cache existed had none
        fast_cache = run.settings.get("fast_cache_bytes", 0)
        capacity_tier = next((t["name"] for t in run.tiers if t["role"] == "capacity"), None) if fast_cache else None
        return cls(run.settings["page_size_bytes"], stream_window, random_threshold, repeat_threshold, fast_cache,
                   run.settings.get("fast_cache_policy") if fast_cache else None, capacity_tier)


@dataclass
class WindowSummary:
    counts: dict
    query: list[dict]
    tiers: list[dict]
    sizes: list[dict]
    tables: list[dict]
    # reads per bucket of LATENCY_EDGES_US, per tier
    latency: dict[str, np.ndarray]

    def as_record(self) -> dict:
        """The summary as JSON keeps it, each latency histogram by its non-empty buckets."""
        return {"counts": self.counts, "query": self.query, "tiers": self.tiers, "sizes": self.sizes,
                "tables": self.tables,
                "latency": {tier: [[int(b), int(n)] for b, n in zip(np.flatnonzero(counts), counts[counts > 0],
                                                                      strict=True)]
                            for tier, counts in self.latency.items()}}

    @classmethod
    def from_record(cls, record: dict) -> "WindowSummary":
        latency = {}
        for tier, buckets in record["latency"].items():
            latency[tier] = np.zeros(len(LATENCY_EDGES_US), np.int64)
            for bucket, reads in buckets:
                latency[tier][bucket] = reads
        return cls(record["counts"], record["query"], record["tiers"], record["sizes"], record["tables"], latency)


def summarize(window: Window, parameters: WindowParameters) -> WindowSummary:
    """The window's summary; its requests gain their `sequential` mark, as requests.parquet keeps them."""
    requests = window.requests
    requests["sequential"] = mark_sequential(requests, parameters.page_bytes, parameters.stream_window)
    summary = WindowSummary(window.counts, [], [], [], [], {})
    if requests.empty:
        return summary
    key = {"query": window.query, "try": window.attempt}
    thresholds = parameters.random_threshold, parameters.repeat_threshold
    pieces = Pieces.of(requests, parameters.page_bytes)
    summary.query.append({**key, **access_summary(pieces, *thresholds)})
    if parameters.fast_cache_bytes:
        # what the cost model says the capacity tier's emulated cache served, beside what it counted
        summary.query[-1]["cache_hit_pct_simulated"] = cost_model.device_cache_hit_pct(
            requests[requests["tier"] == parameters.capacity_tier], parameters.page_bytes, parameters.fast_cache_bytes,
            parameters.fast_cache_policy)
    # groups by the categoricals' codes (their categories are sorted, so the groups come out sorted)
    tiers, objects = requests["tier"].cat, requests["object"].cat
    tier_codes, object_codes = tiers.codes.to_numpy()[pieces.row], objects.codes.to_numpy()[pieces.row]
    for code in np.unique(tier_codes):
        tier = tiers.categories[code]
        part = pieces[tier_codes == code]
        summary.tiers.append({**key, "tier": tier, **access_summary(part, *thresholds),
                              **contention(requests, (tiers.codes == code).to_numpy())})
        summary.sizes += [{**key, "tier": tier, **bucket} for bucket in size_histogram(part).to_dict("records")]
        summary.latency[tier] = latency_histogram(part.latency_us[part.head & part.read])
    pairs = object_codes.astype(np.int64) * len(tiers.categories) + tier_codes
    for pair in np.unique(pairs):
        part = pieces[pairs == pair]
        summary.tables.append({**key, "object": objects.categories[pair // len(tiers.categories)],
                               "tier": tiers.categories[pair % len(tiers.categories)],
                               **access_summary(part, *thresholds)})
    return summary
