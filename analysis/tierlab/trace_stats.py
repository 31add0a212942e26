"""Statistics of any block trace, without a run directory (`tierlab trace-stats`).

Pages are aligned to the device (no file mapping is known), at the given page size.
"""

import re
from pathlib import Path

import numpy as np

from .block_trace import BlockTrace, concat_requests
from .errors import TraceFormatError
from .metrics import AccessTotals, Pieces, Streams, sequential_flags
from .parse_blktrace import parse_blkparse_text, parse_blktrace_binary
from .parse_ftrace import parse_ftrace
from .parse_ftrace_raw import MAGIC as RAW_MAGIC
from .parse_ftrace_raw import parse_ftrace_raw

FORMATS = ("auto", "binary", "blkparse", "ftrace", "ftrace-raw")
BLKTRACE_MAGIC = 0x65617400
# a blkparse event line starts with the device: "  7,1    0        1     0.000000000 ..."
BLKPARSE_LINE = re.compile(r"^\s*\d+,\d+\s+\d+\s+\d+\s+\d+\.\d+\s", re.MULTILINE)
OTHER_COUNTS = ("flush", "discard", "other_op", "zero_length")
CHUNK_REQUESTS = 1 << 18
# counts that mean the trace is not the whole truth: what each says, for a warning
SUSPECT_COUNTS = {
    "lost_events": "events lost by the tracer (their requests are missing)",
    "bad_lines": "unreadable lines skipped",
    "bad_records": "corrupt records (the rest of their file skipped)",
    "bad_pages": "damaged or cut ring-buffer pages of a raw ftrace window (left out)",
    "lost_pages": "ring-buffer pages that follow lost events",
    "other_records": "records of other events in a raw ftrace window (skipped)",
    "missing_cpu_files": "CPU numbers without a per-CPU file (a CPU offline, or its file and events missing)",
    "beyond_bounds": "requests beyond 2^63 bytes or 4 GiB long (corrupt fields; left out)",
    "time_jumps": "requests completed before their dispatch or over 300 s after it (corrupt times; left out)",
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


def read_traces(paths: list[str], fmt: str = "auto", tolerate_errors: bool = False, progress=None) -> BlockTrace:
    """All paths parsed into one trace; `progress(done, total, label)` is called before each."""
    if fmt not in FORMATS:
        raise TraceFormatError(f"format {fmt!r} is unknown; allowed: {', '.join(FORMATS)}")
    seen: dict[Path, str] = {}
    for path in paths:
        real = Path(path).resolve()
        if real in seen:
            raise TraceFormatError(f"{path} is the same trace as {seen[real]}; give each trace once")
        seen[real] = path
    parsed = []
    kinds = [detect_format(path) for path in paths]
    for path, kind in zip(paths, kinds, strict=True):
        if fmt not in ("auto", kind):
            raise TraceFormatError(f"{path} is in the {kind} format, not {fmt}: give --format {kind}, or leave --format out")
    for number, (path, kind) in enumerate(zip(paths, kinds, strict=True), 1):
        if progress:
            progress(number, len(paths), f"{path} ({kind})")
        if kind == "binary":
            parsed.append(parse_blktrace_binary([path], tolerate_errors))
        elif kind == "blkparse":
            parsed.append(parse_blkparse_text(path, tolerate_errors))
        elif kind == "ftrace-raw":
            parsed.append(parse_ftrace_raw(path, tolerate_errors))
        else:
            parsed.append(parse_ftrace(path, tolerate_errors))
    requests = parsed[0].requests if len(parsed) == 1 else concat_requests([p.requests for p in parsed])
    if not requests["ts_s"].is_monotonic_increasing:
        requests = requests.sort_values("ts_s", kind="stable").reset_index(drop=True)
    counts: dict[str, int] = {}
    for p in parsed:
        for key, value in p.counts.items():
            counts[key] = counts.get(key, 0) + value
    markers = sorted(m for p in parsed for m in p.markers)
    return BlockTrace(requests, markers, counts)


def trace_stats(trace: BlockTrace, page_bytes: int) -> dict:
    # no file is known: every request is one piece, and its pages are device-aligned; the trace is
    # in dispatch order, and read a chunk at a time, so that what the metrics hold beside it stays small
    requests = trace.requests
    totals, streams = AccessTotals(), Streams(len(requests["device"].cat.categories))
    for begin in range(0, len(requests), CHUNK_REQUESTS):
        chunk = requests.iloc[begin:begin + CHUNK_REQUESTS]
        reads = (chunk["op"] == "R").to_numpy()
        sequential = np.zeros(len(chunk), dtype=bool)
        sequential[reads] = sequential_flags(chunk.loc[reads, ["ts_s", "device", "sector", "size_sectors"]], page_bytes,
                                             streams=streams)
        totals.add(Pieces.of_requests(chunk, sequential, page_bytes))
    summary = totals.summary()
    latency = {key.removeprefix("latency_").removesuffix("_us"): summary.pop(key)
               for key in list(summary) if key.startswith("latency_")}
    return {
        **summary,
        "other_requests": sum(trace.counts.get(key, 0) for key in OTHER_COUNTS),
        "page_size_bytes": page_bytes,
        "latency_us": latency,
        "counts": trace.counts,
        "devices": sorted(requests["device"].unique().tolist()),
    }
