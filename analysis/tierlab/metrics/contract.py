"""The unwritten contract of a fast SSD (Wu, Arpaci-Dusseau and Arpaci-Dusseau, HotStorage '19), judged for
each query on each tier from its trace.

Seven rules, each a verdict with its evidence: the figure measured (tables/tier_metrics.csv), the limit it
is held against (from the rule, or from the tier's device profile where the rule depends on the device), and
the words that tie them together. `broken` says where the query's I/O goes against what the device rewards;
`not judged` says why a rule could not be judged (no device profile, too few requests on the tier, or a
trace whose in-flight figures cannot be trusted).
"""

import math

import numpy as np
import pandas as pd

from ..catalog.analysis import RANDOM_PCT_THRESHOLD

RULES = ("low request scale", "random access is only half-bad", "avoid crowded accesses", "control overall load",
         "avoid tiny accesses", "issue 4 KiB-aligned requests", "forget garbage collection")
# the rules judged from the requests' times in flight, which a damaged trace pairs wrongly
IN_FLIGHT_RULES = (RULES[0], RULES[2], RULES[3])
COLUMNS = ["query", "try", "tier", "rule", "verdict", "measured", "limit", "evidence"]
# a share of requests above this breaks the rules that ask for none (tiny, misaligned, crowded)
STRAY_PCT = 1.0
# reads dispatched beside writes above this share: the load of writes is not controlled
BESIDE_WRITES_PCT = 10.0
# random reads cost at most this many sequential ones on a device where random access is only half-bad
HALF_BAD = 2.0
# fewer requests of a query on a tier than this (a log write, a catalogue read) say nothing of its access pattern
MIN_REQUESTS = 100


def saturation_depth(profile: dict, request_bytes: float) -> float:
    """The requests in flight at which the device is busy: all of its channels, or its link, whichever
    comes first (a request holds the link for size / bandwidth of its random-read time plus transfer)."""
    transfer_us = request_bytes / profile["read_bandwidth_mb_s"]
    return min(profile["channels"], (profile["read_random_us"] + transfer_us) / transfer_us)


def _rule(row: dict, rule: str, verdict: str, measured: float, limit: float, evidence: str) -> dict:
    return {"query": row["query"], "try": row["try"], "tier": row["tier"], "rule": rule, "verdict": verdict,
            "measured": measured, "limit": limit, "evidence": evidence}


def _request_scale(row: dict, profile: dict | None) -> tuple:
    if not row["requests"] or np.isnan(row["inflight_mean"]):
        return "not judged", math.nan, math.nan, "no request with a known latency"
    if profile is None or not profile["channels"] or not profile["read_bandwidth_mb_s"]:
        return "not judged", row["inflight_mean"], math.nan, "no device profile for this tier to say where it saturates"
    size = (row["read_bytes"] + row["write_bytes"]) / row["requests"]
    depth = saturation_depth(profile, size)
    verdict = "kept" if row["inflight_mean"] <= depth else "broken"
    then = (f"more only wait in its queue (p50 latency {row['latency_p50_us']:.0f} us)" if verdict == "broken"
            else "it serves them without a queue")
    return (verdict, row["inflight_mean"], round(depth, 2),
            f"{row['inflight_mean']:.1f} requests in flight on average while busy (at most {row['inflight_max']:.0f}), "
            f"{size / 1024:.1f} KiB each; the device is busy at {depth:.1f} ({profile['channels']} channels, "
            f"{profile['read_bandwidth_mb_s']:g} MB/s): {then}")


def _random(row: dict, profile: dict | None) -> tuple:
    if np.isnan(row["random_pct"]):
        return "not judged", math.nan, math.nan, "no reads"
    if profile is None or not profile["read_sequential_us"]:
        return "not judged", row["random_pct"], math.nan, "no device profile for this tier to say what random reads cost"
    ratio = profile["read_random_us"] / profile["read_sequential_us"]
    broken = ratio > HALF_BAD and row["random_pct"] > RANDOM_PCT_THRESHOLD
    cost = f"a random read costs {ratio:.1f}x a sequential one on this device"
    return ("broken" if broken else "kept", row["random_pct"], RANDOM_PCT_THRESHOLD if ratio > HALF_BAD else 100.0,
            f"{row['random_pct']:.1f}% of reads random; {cost}"
            + ("; these reads belong where random access is only half-bad" if broken else ""))


def _share(row: dict, column: str, limit: float, what: str) -> tuple:
    measured = row[column]
    if np.isnan(measured):
        return "not judged", math.nan, limit, f"no {what.split()[0]}"
    return "kept" if measured <= limit else "broken", measured, limit, f"{measured:.2f}% of {what}"


def _garbage_collection(row: dict, profile: dict | None) -> tuple:
    written = row["write_bytes"] / 2**20
    if profile is None:
        return "not judged", written, math.nan, "no device profile for this tier to say whether it collects garbage"
    if not profile["gc_pause_us"] or not profile["sustained_write_mb_s"]:
        return "kept", written, math.nan, f"{written:.1f} MiB written; the device has no garbage-collection regime"
    gc = row.get("model_write_gc_requests")
    if gc is not None and not np.isnan(gc):
        return ("broken" if gc > 0 else "kept", gc, 0.0,
                f"{gc:.0f} of {row['write_requests']:.0f} writes served in the device's garbage-collection regime "
                f"(its {profile['write_buffer_mb']:g} MiB write buffer full)")
    return ("broken" if written > profile["write_buffer_mb"] else "kept", written, profile["write_buffer_mb"],
            f"{written:.1f} MiB written against the device's {profile['write_buffer_mb']:g} MiB write buffer")


def contract(tier_metrics: pd.DataFrame, trace_counts: pd.DataFrame, profiles: dict[str, dict | None]) -> pd.DataFrame:
    """Every rule's verdict for every query try on every tier it touched. profiles: each tier's device profile
    (see devices.profiles.load), None for a tier without one (a real device). No rule is judged on a tier that
    served fewer than MIN_REQUESTS of the query's requests, and the in-flight rules are not judged on a trace
    that lost events or was cut: their requests' pairing cannot be trusted."""
    damaged = {}
    for counts in trace_counts.to_dict("records"):
        lost = counts.get("lost_events", 0) or 0
        if lost or counts.get("trace_complete") is False:
            damaged[(counts["query"], counts["try"])] = (f"the trace lost {lost:.0f} events" if lost else
                                                         "the trace was cut short") + " (trace_counts.csv)"
    rows = []
    for row in tier_metrics.to_dict("records"):
        profile = profiles.get(row["tier"])
        judged = [
            (RULES[0], _request_scale(row, profile)),
            (RULES[1], _random(row, profile)),
            (RULES[2], _share(row, "crowded_pct", STRAY_PCT, "requests dispatched while another request to the same "
                                                             "4 KiB chunk was in flight")),
            (RULES[3], _share(row, "reads_beside_writes_pct", BESIDE_WRITES_PCT,
                              "reads dispatched while a write to the same device was in flight")),
            (RULES[4], _share(row, "tiny_pct", STRAY_PCT, "requests smaller than 4 KiB")),
            (RULES[5], _share(row, "misaligned_pct", STRAY_PCT, "requests not starting on a 4 KiB boundary")),
            (RULES[6], _garbage_collection(row, profile)),
        ]
        why = damaged.get((row["query"], row["try"]))
        for rule, (verdict, measured, limit, evidence) in judged:
            if row["requests"] < MIN_REQUESTS:
                verdict, evidence = "not judged", f"only {row['requests']:.0f} requests on this tier: {evidence}"
            elif why and rule in IN_FLIGHT_RULES:
                verdict, evidence = "not judged", f"{why}: {evidence}"
            rows.append(_rule(row, rule, verdict, measured, limit, evidence))
    return pd.DataFrame(rows, columns=COLUMNS)
