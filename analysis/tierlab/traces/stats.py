"""Statistics of any block trace, without a run directory (`tierlab trace-stats`).

Pages are aligned to the device (no file mapping is known), at the given page size. Binary blktrace files
go through one compiled pass (traces/native.py); other traces, and binary files whose records are out of time
order, through the request frames (traces/frame_stats.py), which the compiled pass is tested against.
"""

from . import native
from .formats import trace_sources

OTHER_COUNTS = ("flush", "discard", "other_op", "zero_length")
# counts that mean the trace is not the whole truth: what each says, for a warning
SUSPECT_COUNTS = {
    "lost_events": "events lost by the tracer (their requests are missing)",
    "bad_lines": "unreadable lines skipped",
    "bad_records": "corrupt records (the rest of their file skipped)",
    "bad_pages": "damaged or cut ring-buffer pages of a raw ftrace window (left out)",
    "lost_pages": "ring-buffer pages that follow lost events",
    "other_records": "records of other events in a raw ftrace window (skipped)",
    "missing_cpu_files": "CPU numbers without a per-CPU file (a CPU offline, or its file and events missing)",
    "beyond_bounds": "requests beyond 2^63 bytes or over 128 MiB long, more than any device takes (corrupt fields; "
                     "left out)",
    "time_jumps": "requests completed before their dispatch or over 300 s after it (corrupt times; their latency "
                  "left out)",
}


def suspect(counts: dict) -> list[str]:
    """What the counts say is missing or suspect in a trace, one phrase each."""
    return [f"{int(counts[key])} {what}" for key, what in SUSPECT_COUNTS.items() if counts.get(key, 0) > 0]


def trace_stats(paths: list[str], fmt: str, tolerate_errors: bool, page_bytes: int, progress=None) -> dict:
    """The statistics of the traces at paths, together; `progress(done, total, label)` is called before each
    source is read. Binary blktrace files alone go through the compiled pass where its library is built and the
    files' records are in time order; every other trace through the request frames."""
    sources = trace_sources(paths, fmt)
    measured = None
    if [kind for kind, _ in sources] == ["binary"] and native.available():
        if progress:
            progress(1, 1, f"{' '.join(sources[0][1])} (binary)")
            # the one source is announced: a fall-back to the request frames reads it without saying so again
            progress = None
        measured = native.blktrace_stats(sources[0][1], tolerate_errors, page_bytes)
    if measured is None:
        from .frame_stats import frame_stats

        measured = frame_stats(sources, tolerate_errors, page_bytes, progress)
    summary, counts, devices = measured
    latency = {key.removeprefix("latency_").removesuffix("_us"): summary.pop(key)
               for key in list(summary) if key.startswith("latency_")}
    return {
        **summary,
        "other_requests": sum(counts.get(key, 0) for key in OTHER_COUNTS),
        "page_size_bytes": page_bytes,
        "latency_us": latency,
        "counts": counts,
        "devices": devices,
    }
