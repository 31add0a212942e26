"""Which format a block trace is in, from its first bytes, and the traces a command reads, grouped by format."""

import re
from pathlib import Path

from ..catalog.analysis import FORMATS
from ..errors import TraceFormatError
from .blk import BLK_IO_TRACE_MAGIC

# the first line of a raw ftrace window as tierlab's tracer writes it (traces/ftrace_raw.py)
FTRACE_RAW_MAGIC = b"tierlab ftrace-raw 1\n"
# a blkparse event line starts with the device: "  7,1    0        1     0.000000000 ..."
BLKPARSE_LINE = re.compile(r"^\s*\d+,\d+\s+\d+\s+\d+\s+\d+\.\d+\s", re.MULTILINE)


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
    if head.startswith(FTRACE_RAW_MAGIC):
        return "ftrace-raw"
    if len(head) >= 4 and any(int.from_bytes(head[:4], order) & 0xFFFFFF00 == BLK_IO_TRACE_MAGIC for order in ("little", "big")):
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
