"""Parse ftrace text (block_rq_issue/block_rq_complete tracepoints, or the `blk`
tracer's D/C lines) into dispatched requests matched with their completions.

No statistics here: the frame has one row per dispatched data request, as
parse_blktrace_binary gives it, and the same matcher pairs the events:
completions run in IRQ context (pid 0), so a completion is matched to the
oldest open dispatch with the same device and sector.

The file is read a chunk of lines at a time. The tracepoint lines, nearly all
of a trace, are read by one regular expression over the whole chunk (Arrow's
RE2, no Python per line); the few other lines (markers, the header, lost
events, the `blk` tracer's lines, unreadable ones) line by line.
"""

import os
import re
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .block_trace import MAX_SIZE_SECTORS as _MAX_SIZE_SECTORS
from .block_trace import BlockTrace, without_time_jumps
from .errors import TraceFormatError
from .parse_blktrace import (
    BLK_TA_COMPLETE,
    BLK_TA_ISSUE,
    BLK_TC_DISCARD,
    BLK_TC_FLUSH,
    BLK_TC_FS,
    BLK_TC_PC,
    BLK_TC_READ,
    BLK_TC_SHIFT,
    BLK_TC_WRITE,
    Matcher,
    Notes,
    categories_of,
    request_frame,
)

CHUNK_BYTES = 4 << 20
# the shape nearly every tracepoint line has, read without Python per line (see _tracepoints):
# "  mariadbd-12033   [000] .....  1000.000009: block_rq_issue: 7,1 RS 16384 () 305152 + 32 be,0,4 [mariadbd]"
_USUAL = (
    r"^ *[^ ].*-[0-9]{1,9} +\[[0-9]+\] [^ ]+ +[0-9]{1,9}\.[0-9]{1,9}: block_rq_"
    r"(?:issue: [0-9]{1,4},[0-9]{1,7} [A-Z]{1,8} [0-9]+|complete: [0-9]{1,4},[0-9]{1,7} [A-Z]{1,8}) "
    r"\(\) [0-9]{1,19} \+ [0-9]{1,9}(?: [a-z]+,[0-9]+,[0-9]+)? \[[^ \]]{0,16}\]\n$"
)
_LINE = re.compile(
    r"^\s*(?P<task>.+?)-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?"
    r"(?P<sec>\d+)\.(?P<frac>\d{1,9}):\s+(?P<rest>.*)$"
)
# the rest, line by line: tracepoint lines of other shapes (a tgid column, a command payload, a name with
# spaces) and the global `blk` tracer's "7,0 D RS 305152 + 32 [mariadbd]" (also with an "(...)" payload)
_ISSUE = re.compile(
    r"^block_rq_issue:\s+(?P<maj>\d+),(?P<min>\d+)\s+(?P<rwbs>\S+)\s+\d+\s+\(.*?\)\s+"
    r"(?P<sector>\d+)\s+\+\s+(?P<size>\d+)(?:\s+\S+)?\s+\[(?P<comm>.*)\]$"
)
_COMPLETE = re.compile(
    r"^block_rq_complete:\s+(?P<maj>\d+),(?P<min>\d+)\s+(?P<rwbs>\S+)\s+\(.*?\)\s+"
    r"(?P<sector>\d+)\s+\+\s+(?P<size>\d+)(?:\s+\S+)?\s+\[(?P<error>-?\d+)\]$"
)
_BLK = re.compile(
    r"^(?P<maj>\d+),(?P<min>\d+)\s+(?P<action>[A-Z])\s+(?P<rwbs>\S+)\s+(?:\(.*?\)\s+)?"
    r"(?P<sector>\d+)\s+\+\s+(?P<size>\d+)(?:\s+\[(?P<comm>.*?)\])?"
)
_MARKER = re.compile(r"^tracing_mark_write:\s+(?P<text>.*)$")
# events the ring buffer dropped: overwritten before the trace was read (the header's two counts differ),
# or lost while it was read (a line of its own)
_WRITTEN = re.compile(r"^#\s+entries-in-buffer/entries-written:\s+(?P<kept>\d+)/(?P<written>\d+)")
_LOST = re.compile(r"^CPU:\d+ \[LOST (?P<lost>\d+) EVENTS\]$")
# the categories that name a request's operation
_OPERATIONS = BLK_TC_READ | BLK_TC_WRITE | BLK_TC_DISCARD | BLK_TC_FLUSH
# where a request that reaches beyond every bound is put, for the matcher to count it
_LARGEST_SECTOR = (1 << 64) - 1
_FRACTION_SCALE = np.array([10 ** (9 - digits) for digits in range(10)], dtype=np.int64)


def categories(rwbs: str) -> int:
    """BLK_TC_* bits of an RWBS string from a tracepoint (see categories_of). One without an operation
    (N) or unknown is marked passthrough, so that it is counted apart from data whatever its length."""
    try:
        bits = categories_of(rwbs)
    except ValueError:
        bits = 0
    if not bits & _OPERATIONS:
        bits |= BLK_TC_PC
    return bits | BLK_TC_FS


class _Chunk:
    """The events of one chunk of lines, in line order."""

    def __init__(self):
        self.columns: dict[str, list] = {name: [] for name in ("line", "time", "sector", "bytes", "action", "pid",
                                                                 "device", "process")}

    def add(self, **values: np.ndarray) -> None:
        for name, column in self.columns.items():
            column.append(values[name])

    def events(self) -> tuple[dict, np.ndarray]:
        """The matcher's events in line order, and each event's process name (None for a completion)."""
        merged = {name: np.concatenate(parts) if parts else np.empty(0) for name, parts in self.columns.items()}
        order = np.argsort(merged.pop("line"), kind="stable")
        process = merged.pop("process")[order]
        types = {"time": np.int64, "sector": np.uint64, "bytes": np.uint32, "action": np.uint32, "pid": np.uint32,
                 "device": np.uint32}
        return {name: merged[name][order].astype(types[name]) for name in types}, process


def _number(buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The decimal numbers buf[start:end] (digits only, at most 19), as uint64."""
    length = end - start
    value = np.zeros(len(start), dtype=np.uint64)
    for j in range(int(length.max(initial=0))):
        digit = buf[np.minimum(start + j, len(buf) - 1)].astype(np.uint64) - np.uint64(ord("0"))
        value = np.where(j < length, value * np.uint64(10) + digit, value)
    return value


def _names(data: bytes, buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """The texts data[start:end] (at most 16 bytes, no NUL) as codes into their distinct values, decoded once each."""
    length = end - start
    words = [np.zeros(len(start), dtype=np.uint64), np.zeros(len(start), dtype=np.uint64)]
    for j in range(int(length.max(initial=0))):
        byte = buf[np.minimum(start + j, len(buf) - 1)].astype(np.uint64) << np.uint64(8 * (j % 8))
        words[j // 8] |= np.where(j < length, byte, np.uint64(0))
    low, low_values = pd.factorize(words[0])
    high, high_values = pd.factorize(words[1])
    codes, _ = pd.factorize(low.astype(np.int64) * len(high_values) + high)
    # factorize numbers the values in the order they first occur
    first = np.flatnonzero(~pd.Series(codes).duplicated().to_numpy())
    return codes, [data[start[i]:end[i]].decode("utf-8", "replace") for i in first]


def _before(positions: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The last of positions (sorted) before each of at."""
    return positions[np.searchsorted(positions, at) - 1]


def _device(major: np.ndarray, minor: np.ndarray) -> np.ndarray:
    return ((major & 0xFFF) << 20 | (minor & 0xFFFFF)).astype(np.uint32)


def _tracepoints(data: bytes, lines: pa.Array, first_line: int, rwbs_bits: dict, chunk: _Chunk) -> np.ndarray:
    """Add the chunk's tracepoint lines of the usual shape to chunk; return the indexes of the other lines.

    A line of the usual shape (see _USUAL) is cut at its spaces, counted from its end: its payload's
    tokens are one space apart, so the k-th space from the end starts the same field on every line
    of one event (issue or complete) and one kernel (with or without the I/O priority)."""
    usual = pc.match_substring_regex(lines, _USUAL).to_numpy(zero_copy_only=False)
    index = np.flatnonzero(usual)
    if not len(index):
        return np.flatnonzero(~usual)
    buf = np.frombuffer(data, dtype=np.uint8)
    line_end = np.frombuffer(lines.buffers()[1], dtype=np.int64)[1:len(lines) + 1][index] - 1
    spaces = np.flatnonzero(buf == ord(" "))
    # the first space of the run each space belongs to
    run = np.maximum.accumulate(np.where(np.r_[True, spaces[1:] != spaces[:-1] + 1], np.arange(len(spaces)), 0))
    last = np.searchsorted(spaces, line_end) - 1

    def token(j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return spaces[last - j] + 1, np.where(j == 0, line_end, spaces[np.minimum(last - j + 1, len(spaces) - 1)])

    ioprio = (buf[spaces[last - 1] + 1] >= ord("a")).astype(np.int64)
    issue = (buf[spaces[last - 5 - ioprio] + 1] <= ord("9")).astype(np.int64)
    shift = ioprio + issue
    size = _number(buf, *token(1 + ioprio))
    sector = _number(buf, *token(3 + ioprio))
    rwbs_start, rwbs_end = token(5 + shift)
    rwbs_codes, rwbs_names = _names(data, buf, rwbs_start, rwbs_end)
    bits = np.array([rwbs_bits.setdefault(name, categories(name)) for name in rwbs_names], dtype=np.uint32)
    dev_start, dev_end = token(6 + shift)
    comma = _before(np.flatnonzero(buf == ord(",")), dev_end)
    ts_start, ts_end = token(8 + shift)
    dot = _before(np.flatnonzero(buf == ord(".")), ts_end)
    time = (_number(buf, ts_start, dot).astype(np.int64) * 1_000_000_000
            + _number(buf, dot + 1, ts_end - 1).astype(np.int64) * _FRACTION_SCALE[ts_end - 2 - dot])
    # left of the time: padding, the flags, one space, [cpu], padding, task-pid
    flags_run = run[last - 8 - shift]
    pid_end = spaces[run[flags_run - 2]]
    pid = _number(buf, _before(np.flatnonzero(buf == ord("-")), pid_end) + 1, pid_end)
    comm_codes, comm_names = _names(data, buf, spaces[last] + 2, line_end - 1)
    # a size the block layer cannot carry moves the request beyond every bound, where the matcher counts it
    sector = np.where(size > _MAX_SIZE_SECTORS, np.uint64(_LARGEST_SECTOR), sector)
    chunk.add(line=index + first_line, time=time, sector=sector,
              bytes=(np.minimum(size, _MAX_SIZE_SECTORS) * 512).astype(np.uint32),
              action=np.where(issue, BLK_TA_ISSUE, BLK_TA_COMPLETE).astype(np.uint32) | bits[rwbs_codes] << BLK_TC_SHIFT,
              pid=pid.astype(np.uint32),
              device=_device(_number(buf, dev_start, comma), _number(buf, comma + 1, dev_end)),
              process=np.where(issue == 1, np.array(comm_names, dtype=object)[comm_codes], None))
    return np.flatnonzero(~usual)


class _Other:
    """What the lines that are not tracepoints say."""

    def __init__(self, path: Path, tolerate_errors: bool):
        self.path, self.tolerate_errors = path, tolerate_errors
        self.markers: list[tuple[float, str]] = []
        self.bad_lines = self.lost_events = 0

    def read(self, line: str, number: int, rwbs_bits: dict, chunk: _Chunk) -> None:
        line = line.rstrip("\n")
        if line.startswith("#") or not line.strip():
            if (m := _WRITTEN.match(line)) is not None:
                self.lost_events += int(m["written"]) - int(m["kept"])
            return
        if (m := _LOST.match(line)) is not None:
            self.lost_events += int(m["lost"])
            return
        match = _LINE.match(line)
        if match is not None:
            rest = match["rest"]
            time = int(match["sec"]) * 1_000_000_000 + int(match["frac"]) * int(_FRACTION_SCALE[len(match["frac"])])
            if (m := _MARKER.match(rest)) is not None:
                self.markers.append((time / 1e9, m["text"].strip()))
                return
            if (m := _ISSUE.match(rest)) is not None:
                self._event(True, m, match, time, number, rwbs_bits, chunk)
                return
            if (m := _COMPLETE.match(rest)) is not None:
                self._event(False, m, match, time, number, rwbs_bits, chunk)
                return
            if (m := _BLK.match(rest)) is not None:
                if m["action"] in ("D", "C"):
                    self._event(m["action"] == "D", m, match, time, number, rwbs_bits, chunk)
                return
            if rest.startswith("block_") and not rest.startswith(("block_rq_issue:", "block_rq_complete:")):
                return
        self.bad_lines += 1
        if not self.tolerate_errors:
            raise TraceFormatError(f"{self.path}:{number}: not an ftrace block event line: {line.strip()[:120]!r}; "
                                   "pass --tolerate-errors to skip such lines (they are counted)")

    @staticmethod
    def _event(issue: bool, m: re.Match, line: re.Match, time: int, number: int, rwbs_bits: dict, chunk: _Chunk) -> None:
        bits = rwbs_bits.setdefault(m["rwbs"], categories(m["rwbs"]))
        size, sector = int(m["size"]), int(m["sector"])
        if size > _MAX_SIZE_SECTORS:
            sector = _LARGEST_SECTOR
        comm = m.groupdict().get("comm")
        chunk.add(line=np.array([number]), time=np.array([time]),
                  sector=np.array([min(sector, _LARGEST_SECTOR)], dtype=np.uint64),
                  bytes=np.array([min(size, _MAX_SIZE_SECTORS) * 512]),
                  action=np.array([(BLK_TA_ISSUE if issue else BLK_TA_COMPLETE) | bits << BLK_TC_SHIFT]),
                  pid=np.array([int(line["pid"])]),
                  device=_device(np.array([int(m["maj"])]), np.array([int(m["min"])])),
                  process=np.array([(comm or line["task"]) if issue else None], dtype=object))


def _chunks(path: Path):
    """(first line number, the chunk's bytes, its lines as an Arrow binary array, each with its newline)."""
    first_line = 1
    with open(path, "rb") as f:
        rest = b""
        while True:
            block = f.read(CHUNK_BYTES)
            data = rest + block
            if not block:
                if data:
                    data += b"\n"
                    yield first_line, data, _lines(data)
                return
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                rest = data
                continue
            data, rest = data[:cut], data[cut:]
            lines = _lines(data)
            yield first_line, data, lines
            first_line += len(lines)


def _lines(data: bytes) -> pa.Array:
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n")) + 1
    offsets = np.concatenate([[0], ends]).astype(np.int64)
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(ends), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _process_notes(events: dict, process: np.ndarray, last: dict[int, str], notes: Notes) -> None:
    """A process note wherever a pid's dispatches change name (and at its first), as blktrace writes them;
    last: each pid's name so far, carried from chunk to chunk."""
    dispatches = np.flatnonzero(pd.notna(process))
    if not len(dispatches):
        return
    codes, names = pd.factorize(process[dispatches])
    pids = events["pid"][dispatches]
    order = np.argsort(pids, kind="stable")
    pid, code = pids[order], codes[order]
    first = np.r_[True, pid[1:] != pid[:-1]]
    for j in np.flatnonzero(first | np.r_[True, code[1:] != code[:-1]]):
        who, name = int(pid[j]), names[code[j]]
        if not first[j] or last.get(who) != name:
            notes.process.append((int(events["time"][dispatches[order[j]]]), who, name))
    is_last = np.r_[pid[1:] != pid[:-1], True]
    last.update(zip(pid[is_last].tolist(), names[code[is_last]], strict=True))


def _read(path: Path, tolerate_errors: bool, first_line: int, data: bytes, lines: pa.Array) -> tuple[dict, np.ndarray, _Other]:
    """One chunk's events (see _Chunk.events) and what its other lines said."""
    chunk, other, rwbs_bits = _Chunk(), _Other(path, tolerate_errors), {}
    for i in _tracepoints(data, lines, first_line, rwbs_bits, chunk):
        other.read(lines[int(i)].as_py().decode("utf-8", "replace"), first_line + int(i), rwbs_bits, chunk)
    return *chunk.events(), other


def _read_ahead(path: Path, tolerate_errors: bool):
    """_read of each chunk in file order, the next ones read meanwhile on the other CPUs (numpy and Arrow
    let go of the GIL); only as many chunks as CPUs are held at once."""
    workers = os.cpu_count() or 1
    with ThreadPoolExecutor(workers) as pool:
        pending: deque = deque()
        for chunk in _chunks(path):
            pending.append(pool.submit(_read, path, tolerate_errors, *chunk))
            if len(pending) > workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def parse_ftrace(path: str | Path, tolerate_errors: bool = False) -> BlockTrace:
    """Parse one ftrace text file. Unparseable event lines raise TraceFormatError
    naming the file and line, unless tolerate_errors, which skips and counts them."""
    path = Path(path)
    matcher = Matcher(path.stat().st_size // 200)
    notes = Notes()
    markers: list[tuple[float, str]] = []
    bad_lines = lost_events = 0
    last_process: dict[int, str] = {}
    for events, process, other in _read_ahead(path, tolerate_errors):
        markers += other.markers
        bad_lines += other.bad_lines
        lost_events += other.lost_events
        if len(events["time"]):
            _process_notes(events, process, last_process, notes)
            matcher.feed(events)
    matcher.finish()
    frame, time_jumps = without_time_jumps(request_frame(matcher, notes))
    return BlockTrace(frame, sorted(markers, key=lambda marker: marker[0]),
                      {**matcher.counts, "time_jumps": time_jumps, "bad_lines": bad_lines, "lost_events": lost_events})
