"""Statistics of any block trace, without a run directory (`tierlab trace-stats`).

Pages are aligned to the device (no file mapping is known), at the given page size. A trace is read
as a stream: its requests go to the metrics a chunk at a time as they are matched, so that memory
follows what the metrics keep (the distinct page runs, the latencies), not the trace.
"""

import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..catalog.analysis import FORMATS
from ..errors import TraceFormatError
from ..metrics.patterns import AccessTotals, Pieces, Streams, device_codes, sequential_of
from .blkparse_text import parse_blkparse_text
from .blktrace import parse_blktrace_binary
from .frame import concat_requests
from .ftrace import parse_ftrace
from .ftrace_raw import MAGIC as RAW_MAGIC
from .ftrace_raw import parse_ftrace_raw
from .matcher import SINK_ROWS
from .prefetch import sink_on_thread

BLKTRACE_MAGIC = 0x65617400
# a blkparse event line starts with the device: "  7,1    0        1     0.000000000 ..."
BLKPARSE_LINE = re.compile(r"^\s*\d+,\d+\s+\d+\s+\d+\s+\d+\.\d+\s", re.MULTILINE)
OTHER_COUNTS = ("flush", "discard", "other_op", "zero_length")
PARSERS = {"blkparse": parse_blkparse_text, "ftrace": parse_ftrace, "ftrace-raw": parse_ftrace_raw}
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


def detect_format(path: str) -> str:
    """binary, blkparse, ftrace or ftrace-raw, from the file's first bytes; anything else is refused."""
    candidate = Path(path)
    if candidate.is_dir():
        raise TraceFormatError(f"{path} is a directory; give a trace file, or the prefix of per-CPU blktrace files "
                               "(DIR/loop0 for DIR/loop0.blktrace.N)")
    if not candidate.exists():
        if sorted(candidate.parent.glob(candidate.name + ".blktrace.*")):
            return "binary"
        raise TraceFormatError(f"{path}: no such file, nor per-CPU files {path}.blktrace.N")
    with open(candidate, "rb") as f:
        head = f.read(4096)
    if head.startswith(RAW_MAGIC):
        return "ftrace-raw"
    if len(head) >= 4 and any(int.from_bytes(head[:4], order) & 0xFFFFFF00 == BLKTRACE_MAGIC for order in ("little", "big")):
        return "binary"
    text = head.decode("utf-8", errors="replace")
    if "# tracer" in text or "block_rq_" in text or "tracing_mark_write" in text:
        return "ftrace"
    if BLKPARSE_LINE.search(text):
        return "blkparse"
    raise TraceFormatError(f"{path} is {'empty' if not head else 'not a block trace'}: its first {len(head)} bytes are "
                           "neither binary blktrace, nor blkparse's text, nor ftrace's text or raw window")


def trace_sources(paths: list[str], fmt: str = "auto") -> list[tuple[str, list[str]]]:
    """The traces to read, as (format, paths): every binary file in one source (the decoder merges them by
    time, and pairs a completion with its dispatch whichever CPU's file holds it), each other file alone.
    Refuses an unknown format, a path given twice, and a file whose format is not the one asked for."""
    if fmt not in FORMATS:
        raise TraceFormatError(f"format {fmt!r} is unknown; allowed: {', '.join(FORMATS)}")
    seen: dict[Path, str] = {}
    for path in paths:
        real = Path(path).resolve()
        if real in seen:
            raise TraceFormatError(f"{path} is the same trace as {seen[real]}; give each trace once")
        seen[real] = path
    kinds = [detect_format(path) for path in paths]
    for path, kind in zip(paths, kinds, strict=True):
        if fmt not in ("auto", kind):
            raise TraceFormatError(f"{path} is in the {kind} format, not {fmt}: give --format {kind}, or leave --format out")
    binary = [path for path, kind in zip(paths, kinds, strict=True) if kind == "binary"]
    return ([("binary", binary)] if binary else []) + [(kind, [path]) for path, kind in zip(paths, kinds, strict=True)
                                                       if kind != "binary"]


class StatsSink:
    """The metrics of requests given a chunk at a time, in dispatch order (a Matcher's sink). A chunk is made
    request pieces (`pieces`, which carries the sequential test's streams from chunk to chunk, so chunks
    come in order) and added to the totals (`add`): two steps, so that they can run on two threads."""

    def __init__(self, page_bytes: int):
        self.page_bytes = page_bytes
        self.totals, self.streams = AccessTotals(), Streams(0)
        self.devices: set[str] = set()

    def __call__(self, requests: pd.DataFrame) -> None:
        self.add(self.pieces(requests))

    def pieces(self, requests: pd.DataFrame) -> Pieces:
        reads = (requests["op"] == "R").to_numpy()
        sequential = np.zeros(len(requests), dtype=bool)
        sequential[reads] = sequential_of(requests["ts_s"].to_numpy()[reads], device_codes(requests["device"])[reads],
                                          requests["sector"].to_numpy(dtype=np.int64)[reads],
                                          requests["size_sectors"].to_numpy(dtype=np.int64)[reads],
                                          self.page_bytes, streams=self.streams)
        self.devices.update(requests["device"].unique().tolist())
        return Pieces.of_requests(requests, sequential, self.page_bytes)

    def add(self, pieces: Pieces) -> None:
        self.totals.add(pieces)


def _parse(kind: str, paths: list[str], tolerate_errors: bool, sink=None):
    if kind == "binary":
        return parse_blktrace_binary(paths, tolerate_errors, sink=sink)
    return PARSERS[kind](paths[0], tolerate_errors, sink=sink)


def trace_stats(paths: list[str], fmt: str, tolerate_errors: bool, page_bytes: int, progress=None) -> dict:
    """The statistics of the traces at paths, together; `progress(done, total, label)` is called before each
    source is read. One source streams into the metrics; several (say a binary trace and an ftrace file)
    are read whole, merged by dispatch time, then measured in the same chunks."""
    sources = trace_sources(paths, fmt)
    sink = StatsSink(page_bytes)
    counts: dict[str, int] = {}
    parsed = []
    # the matcher's thread makes each chunk's pieces, the sink's adds them up: the adding (the page unions'
    # merges) is the larger share
    with sink_on_thread(sink.add) as add:
        def measure(requests: pd.DataFrame) -> None:
            add(sink.pieces(requests))

        for number, (kind, source) in enumerate(sources, 1):
            if progress:
                progress(number, len(sources), f"{' '.join(source)} ({kind})")
            trace = _parse(kind, source, tolerate_errors, measure if len(sources) == 1 else None)
            for key, value in trace.counts.items():
                counts[key] = counts.get(key, 0) + value
            parsed.append(trace.requests)
        if len(sources) > 1:
            requests = concat_requests(parsed).sort_values("ts_s", kind="stable").reset_index(drop=True)
            del parsed
            for begin in range(0, len(requests), SINK_ROWS):
                measure(requests.iloc[begin:begin + SINK_ROWS])
    summary = sink.totals.summary()
    latency = {key.removeprefix("latency_").removesuffix("_us"): summary.pop(key)
               for key in list(summary) if key.startswith("latency_")}
    return {
        **summary,
        "other_requests": sum(counts.get(key, 0) for key in OTHER_COUNTS),
        "page_size_bytes": page_bytes,
        "latency_us": latency,
        "counts": counts,
        "devices": sorted(sink.devices),
    }
