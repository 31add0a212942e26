"""Statistics of any block trace, without a run directory (`tierlab trace-stats`).

Pages are aligned to the device (no file mapping is known), at the given page size.
"""

from pathlib import Path

from .attribute import attribute, extent_table
from .errors import TraceFormatError
from .metrics import access_summary, mark_sequential
from .parse_blktrace import parse_blkparse_text, parse_blktrace_binary
from .parse_ftrace import BlockTrace, concat_requests, parse_ftrace

FORMATS = ("auto", "binary", "blkparse", "ftrace")
BLKTRACE_MAGIC = 0x65617400
OTHER_COUNTS = ("flush", "discard", "other_op", "zero_length")


def detect_format(path: str) -> str:
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
    if len(head) >= 4 and any(int.from_bytes(head[:4], order) & 0xFFFFFF00 == BLKTRACE_MAGIC for order in ("little", "big")):
        return "binary"
    text = head.decode("utf-8", errors="replace")
    if "# tracer" in text or "block_rq_" in text or "tracing_mark_write" in text:
        return "ftrace"
    return "blkparse"


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
    for number, path in enumerate(paths, 1):
        kind = detect_format(path) if fmt == "auto" else fmt
        if progress:
            progress(number, len(paths), f"{path} ({kind})")
        if kind == "binary":
            parsed.append(parse_blktrace_binary([path], tolerate_errors))
        elif kind == "blkparse":
            parsed.append(parse_blkparse_text(path, tolerate_errors))
        else:
            parsed.append(parse_ftrace(path, tolerate_errors))
    requests = concat_requests([p.requests for p in parsed]).sort_values("ts_s", kind="stable")
    counts: dict[str, int] = {}
    for p in parsed:
        for key, value in p.counts.items():
            counts[key] = counts.get(key, 0) + value
    markers = sorted(m for p in parsed for m in p.markers)
    return BlockTrace(requests.reset_index(drop=True), markers, counts)


def trace_stats(trace: BlockTrace, page_bytes: int) -> dict:
    # no file is known: every page is device-aligned
    requests = attribute(trace.requests, extent_table([]), {})
    requests["sequential"] = mark_sequential(requests, page_bytes)
    summary = access_summary(requests, page_bytes)
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
