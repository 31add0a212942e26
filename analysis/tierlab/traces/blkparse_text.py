"""blkparse's default text output, decoded into dispatched requests matched with their completions (the
matcher's rules, traces.matcher)."""

import re
from pathlib import Path

import numpy as np

from ..errors import TraceFormatError
from .blk import (
    BLK_TC_FS,
    BLK_TC_PC,
    Notes,
    blk_action,
    categories_of,
    dev_t,
)
from .frame import LARGEST_SECTOR, BlockTrace, event_extent
from .matcher import Matcher, process_notes, request_frame

_TEXT_EVENT = re.compile(
    r"^\s*(?P<maj>\d+),(?P<min>\d+)\s+(?P<cpu>\d+)\s+(?P<seq>\d+)\s+(?P<sec>\d+)\.(?P<nsec>\d{9})\s+(?P<pid>\d+)\s+"
    r"(?P<action>[A-Za-z]+)\s+(?P<rwbs>[A-Z]+)(?: (?P<rest>.*))?$")
_TEXT_START = re.compile(r"^\s*\d+,\d+\s")
_ELAPSED = r"(?:\(\s*\d+\) )?"
_FS_DATA = re.compile(rf"^(?P<sector>\d+) \+ (?P<size>\d+) {_ELAPSED}\[(?P<tail>.*)\]$")
_FS_C_EMPTY = re.compile(rf"^(?P<sector>\d+) {_ELAPSED}\[(?P<tail>-?\d+)\]$")
_FS_D_EMPTY = re.compile(rf"^{_ELAPSED}\[(?P<tail>.*)\]$")
_PC_D = re.compile(r"^(?P<bytes>\d+) (?:\(.*\) )?\[(?P<tail>.*)\]$")
_PC_C = re.compile(r"^(?:\(.*\) )?\[(?P<tail>-?\d+)\]$")


def _text_event(action: str, rest: str, rwbs: str):
    """(categories, sector, size, tail) of a D or C line's text after the RWBS, or None; a passthrough
    request (no sector printed) is marked BLK_TC_PC, a file-system one BLK_TC_FS."""
    try:
        bits = categories_of(rwbs)
    except ValueError:
        return None
    if (m := _FS_DATA.match(rest)) is not None:
        return bits | BLK_TC_FS, int(m["sector"]), int(m["size"]), m["tail"]
    if action == "C":
        if (m := _FS_C_EMPTY.match(rest)) is not None:
            return bits | BLK_TC_FS, int(m["sector"]), 0, m["tail"]
        if (m := _PC_C.match(rest)) is not None:
            return bits | BLK_TC_PC, 0, 0, m["tail"]
        return None
    if (m := _FS_D_EMPTY.match(rest)) is not None:
        return bits | BLK_TC_FS, 0, 0, m["tail"]
    if (m := _PC_D.match(rest)) is not None:
        return bits | BLK_TC_PC, 0, int(m["bytes"]) >> 9, m["tail"]
    return None


def parse_blkparse_text(path: str | Path, tolerate_errors: bool = False, sink=None) -> BlockTrace:
    """Parse blkparse's default text output (D and C lines; `m N` messages become markers).

    Times are relative to the trace's first event, as blkparse prints them. blkparse prints
    no sector for a zero-length dispatch and none for passthrough requests: those are taken
    to be at sector 0 (where the kernel puts flushes). "(null)" (a pid without a process
    note) becomes a missing process. Other actions, the "Input file" lines and the summary are ignored; a
    line that starts like an event but cannot be read raises TraceFormatError naming the
    file and line, unless tolerate_errors, which skips and counts it (bad_lines). The events
    are paired by the binary decoder's matcher, a batch of lines at a time; sink: see Matcher."""
    path = Path(path)
    matcher, notes, batch = Matcher(path.stat().st_size // 100, sink), Notes(), _TextBatch()
    markers: list[tuple[float, str]] = []
    bad_lines = 0
    last_process: dict[int, str] = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not _TEXT_START.match(line):
                continue
            match = _TEXT_EVENT.match(line)
            event = None
            if match is not None:
                action, rest = match["action"], match["rest"] or ""
                if action == "m":
                    markers.append((int(match["sec"]) + int(match["nsec"]) / 1e9, rest.strip()))
                    continue
                if action not in ("D", "C"):
                    continue
                event = _text_event(action, rest, match["rwbs"])
            if event is None:
                bad_lines += 1
                if not tolerate_errors:
                    raise TraceFormatError(
                        f"{path}:{number}: not a blkparse event line: {line.strip()[:120]!r}; "
                        "pass --tolerate-errors to skip such lines (they are counted)")
                continue
            categories, sector, size, tail = event
            batch.add(int(match["sec"]) * 1_000_000_000 + int(match["nsec"]), sector, size,
                      blk_action(action, categories), int(match["pid"]), dev_t(f"{match['maj']}:{match['min']}"),
                      None if action == "C" or tail == "(null)" else tail)
            if len(batch.time) == _TEXT_BATCH:
                batch.feed(matcher, notes, last_process)
                batch = _TextBatch()
    batch.feed(matcher, notes, last_process)
    matcher.finish()
    return BlockTrace(request_frame(matcher, notes), markers, {**matcher.counts, "bad_lines": bad_lines})


_TEXT_BATCH = 1 << 16


class _TextBatch:
    """Events of text lines, gathered for the matcher."""

    def __init__(self):
        self.time, self.sector, self.size, self.action, self.pid, self.device, self.process = [], [], [], [], [], [], []

    def add(self, time: int, sector: int, size: int, action: int, pid: int, device: int, process: str | None) -> None:
        for column, value in ((self.time, time), (self.sector, min(sector, LARGEST_SECTOR)),
                              (self.size, min(size, LARGEST_SECTOR)), (self.action, action), (self.pid, pid),
                              (self.device, device), (self.process, process)):
            column.append(value)

    def feed(self, matcher: Matcher, notes: Notes, last_process: dict[int, str]) -> None:
        if not self.time:
            return
        sector, nbytes = event_extent(np.array(self.sector, dtype=np.uint64), np.array(self.size, dtype=np.uint64))
        events = {"time": np.array(self.time, dtype=np.int64), "sector": sector, "bytes": nbytes,
                  "action": np.array(self.action, dtype=np.uint32), "pid": np.array(self.pid, dtype=np.uint32),
                  "device": np.array(self.device, dtype=np.uint32)}
        process_notes(events, np.array(self.process, dtype=object), last_process, notes)
        matcher.feed(events)
