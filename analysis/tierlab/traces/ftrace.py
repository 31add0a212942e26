"""Parse ftrace text (block_rq_issue/block_rq_complete tracepoints, or the `blk`
tracer's D/C lines) into dispatched requests matched with their completions.

No statistics here: the frame has one row per dispatched data request, as
parse_blktrace_binary gives it, and the same matcher pairs the events:
completions run in IRQ context (pid 0), so a completion is matched to the
oldest open dispatch with the same device and sector.

The file is read a chunk of lines at a time. The tracepoint lines, nearly all
of a trace, are read by one compiled pass over the whole chunk (numba, no
Python per line); the few other lines (markers, the header, lost events, the
`blk` tracer's lines, unreadable ones) line by line.
"""

import os
import re
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numba
import numpy as np
import pandas as pd

from ..errors import TraceFormatError
from .blk import (
    BLK_TA_COMPLETE,
    BLK_TA_ISSUE,
    BLK_TC_DISCARD,
    BLK_TC_FLUSH,
    BLK_TC_FS,
    BLK_TC_PC,
    BLK_TC_READ,
    BLK_TC_SHIFT,
    BLK_TC_WRITE,
    Notes,
    categories_of,
)
from .frame import LARGEST_SECTOR, BlockTrace, event_extent
from .matcher import Matcher, process_notes, request_frame

CHUNK_BYTES = 4 << 20
# The shape nearly every tracepoint line has, read by compiled code (see _scan), in regular-expression terms:
#   ^ *[^ ].*-PID +\[CPU\] FLAGS +SEC.FRAC: block_rq_(issue: MAJ,MIN RWBS BYTES|complete: MAJ,MIN RWBS)
#   \(\) SECTOR \+ SIZE( [a-z]+,[0-9]+,[0-9]+)? \[COMM\]$
# with PID, SEC, FRAC and SIZE of 1 to 9 digits, MAJ 1 to 4, MIN 1 to 7, SECTOR 1 to 19, RWBS 1 to 8 capitals,
# COMM up to 16 bytes without a space or "]"; e.g.
# "  mariadbd-12033   [000] .....  1000.000009: block_rq_issue: 7,1 RS 16384 () 305152 + 32 be,0,4 [mariadbd]"
_KEY = np.frombuffer(b": block_rq_", dtype=np.uint8)
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
        self.columns: dict[str, list] = {name: [] for name in ("line", "time", "sector", "size", "action", "pid",
                                                                 "device", "process")}

    def add(self, **values: np.ndarray) -> None:
        for name, column in self.columns.items():
            column.append(values[name])

    def events(self) -> tuple[dict, np.ndarray]:
        """The matcher's events in line order, and each event's process name (None for a completion)."""
        merged = {name: np.concatenate(parts) if parts else np.empty(0) for name, parts in self.columns.items()}
        order = np.argsort(merged.pop("line"), kind="stable")
        process = merged.pop("process")[order]
        types = {"time": np.int64, "sector": np.uint64, "size": np.uint64, "action": np.uint32, "pid": np.uint32,
                 "device": np.uint32}
        events = {name: merged[name][order].astype(types[name]) for name in types}
        events["sector"], events["bytes"] = event_extent(events["sector"], events.pop("size"))
        return events, process


@numba.njit(cache=True, nogil=True)
def _digits(buf, start, end, most):
    """The decimal number buf[start:end] if it is 1 to `most` digits, else -1."""
    if end - start < 1 or end - start > most:
        return -1
    value = 0
    for i in range(start, end):
        digit = buf[i] - 48
        if digit < 0 or digit > 9:
            return -1
        value = value * 10 + digit
    return value


@numba.njit(cache=True, nogil=True)
def _run_end(buf, start, stop, low, high):
    """Where the run of bytes from low to high that begins at `start` ends (at most at stop)."""
    end = start
    while end < stop and low <= buf[end] <= high:
        end += 1
    return end


@numba.njit(cache=True, nogil=True)
def _left_digits(buf, end, floor):
    """Where the run of digits that ends at `end` (exclusive) starts, not before floor."""
    start = end
    while start > floor and 48 <= buf[start - 1] <= 57:
        start -= 1
    return start


@numba.njit(cache=True, nogil=True)
def _scan(buf, ends, out):
    """Fill out[:, line] for each line of the usual shape (see _KEY) and return whether each line was.

    out's rows: issue (1) or complete (0), time in ns, sector, size in sectors, major, minor, pid, where
    the RWBS and the issuing command start and end, and their bytes packed into numbers (see _names).
    The line is found by its ": block_rq_" and read both ways from there; anything unexpected leaves the
    line to the line-by-line reader."""
    usual = np.zeros(len(ends), np.bool_)
    key = _KEY
    start = 0
    for line in range(len(ends)):
        begin, stop = start, ends[line] - 1          # stop: the newline
        start = ends[line]
        at = -1
        for i in range(begin, stop - len(key)):
            if buf[i] == 58 and buf[i + 1] == 32 and buf[i + 2] == 98:
                same = True
                for k in range(len(key)):
                    if buf[i + k] != key[k]:
                        same = False
                        break
                if same:
                    at = i
                    break
        if at < 0:
            continue
        # leftwards: SEC.FRAC, spaces, flags, one space, [cpu], spaces, pid, '-', the task
        frac_start = _left_digits(buf, at, begin)
        if frac_start == at or at - frac_start > 9 or buf[frac_start - 1] != 46:
            continue
        sec_start = _left_digits(buf, frac_start - 1, begin)
        seconds = _digits(buf, sec_start, frac_start - 1, 9)
        if seconds < 0:
            continue
        fraction = _digits(buf, frac_start, at, 9)
        i = sec_start - 1
        if buf[i] != 32:
            continue
        while i > begin and buf[i] == 32:
            i -= 1
        while i > begin and buf[i] != 32:            # the flags
            i -= 1
        if buf[i] != 32 or buf[i - 1] != 93:
            continue
        cpu_start = _left_digits(buf, i - 1, begin)
        if cpu_start == i - 1 or buf[cpu_start - 1] != 91 or buf[cpu_start - 2] != 32:
            continue
        i = cpu_start - 2
        while i > begin and buf[i] == 32:
            i -= 1
        pid_start = _left_digits(buf, i + 1, begin)
        pid = _digits(buf, pid_start, i + 1, 9)
        first = begin
        while first < stop and buf[first] == 32:
            first += 1
        if pid < 0 or buf[pid_start - 1] != 45 or pid_start - 1 <= first:
            continue
        # rightwards: issue: or complete:, MAJ,MIN RWBS [BYTES] () SECTOR + SIZE [ioprio] [COMM]
        i = at + len(key)
        if stop - i > 7 and buf[i] == 105 and buf[i + 1] == 115 and buf[i + 5] == 58 and buf[i + 6] == 32:
            issue, i = 1, i + 7                       # "issue: "
        elif (stop - i > 10 and buf[i] == 99 and buf[i + 1] == 111 and buf[i + 8] == 58 and buf[i + 9] == 32
              and buf[i + 5] == 101):
            issue, i = 0, i + 10                      # "complete: "
        else:
            continue
        comma = _run_end(buf, i, stop, 48, 57)
        major = _digits(buf, i, comma, 4)
        if major < 0 or buf[comma] != 44:
            continue
        j = _run_end(buf, comma + 1, stop, 48, 57)
        minor = _digits(buf, comma + 1, j, 7)
        if minor < 0 or buf[j] != 32:
            continue
        rwbs_start = j + 1
        rwbs_end = _run_end(buf, rwbs_start, stop, 65, 90)
        if rwbs_end == rwbs_start or rwbs_end - rwbs_start > 8 or buf[rwbs_end] != 32:
            continue
        j = rwbs_end + 1
        if issue:
            k = _run_end(buf, j, stop, 48, 57)
            if k == j or buf[k] != 32:
                continue
            j = k + 1
        if stop - j < 3 or buf[j] != 40 or buf[j + 1] != 41 or buf[j + 2] != 32:
            continue
        j += 3
        k = _run_end(buf, j, stop, 48, 57)
        if k == j or k - j > 19 or stop - k < 3 or buf[k] != 32 or buf[k + 1] != 43 or buf[k + 2] != 32:
            continue
        sector = np.uint64(0)
        for d in range(j, k):
            sector = sector * np.uint64(10) + np.uint64(buf[d] - 48)
        j = k + 3
        k = _run_end(buf, j, stop, 48, 57)
        size = _digits(buf, j, k, 9)
        if size < 0 or buf[k] != 32:
            continue
        j = k + 1
        if 97 <= buf[j] <= 122:                       # the I/O priority, "be,0,4"
            k = _run_end(buf, j, stop, 97, 122)
            level = _run_end(buf, k + 1, stop, 48, 57)
            if buf[k] != 44 or level == k + 1 or buf[level] != 44:
                continue
            k = _run_end(buf, level + 1, stop, 48, 57)
            if k == level + 1 or buf[k] != 32:
                continue
            j = k + 1
        if buf[j] != 91 or buf[stop - 1] != 93 or stop - 1 - (j + 1) > 16:
            continue
        ok = True
        for k in range(j + 1, stop - 1):
            if buf[k] == 32 or buf[k] == 93:
                ok = False
                break
        if not ok:
            continue
        usual[line] = True
        out[0, line] = issue
        out[1, line] = seconds * 1_000_000_000 + fraction * 10 ** (9 - (at - frac_start))
        out[2, line] = sector
        out[3, line] = size
        out[4, line] = major
        out[5, line] = minor
        out[6, line] = pid
        out[7, line] = rwbs_start
        out[8, line] = rwbs_end
        out[9, line] = j + 1
        out[10, line] = stop - 1
        out[11, line] = _packed(buf, rwbs_start, rwbs_end)
        out[12, line] = _packed(buf, j + 1, min(j + 9, stop - 1))
        out[13, line] = _packed(buf, j + 9, stop - 1)
    return usual


@numba.njit(cache=True, nogil=True)
def _packed(buf, start, end):
    """buf[start:end] (at most 8 bytes) as one number, first byte lowest."""
    word = np.uint64(0)
    for i in range(start, end):
        word |= np.uint64(buf[i]) << np.uint64(8 * (i - start))
    return word


def _names(data: bytes, start: np.ndarray, end: np.ndarray, *words: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """The texts data[start:end], whose bytes `words` hold, as codes into their distinct values, decoded once each."""
    codes = np.zeros(len(start), dtype=np.int64)
    for word in words:
        part, values = pd.factorize(word)
        codes = codes * len(values) + part
    codes, _ = pd.factorize(codes)
    # factorize numbers the values in the order they first occur
    first = np.flatnonzero(~pd.Series(codes).duplicated().to_numpy())
    return codes, [data[start[i]:end[i]].decode("utf-8", "replace") for i in first]


def _device(major: np.ndarray, minor: np.ndarray) -> np.ndarray:
    return ((major & 0xFFF) << 20 | (minor & 0xFFFFF)).astype(np.uint32)


def _tracepoints(data: bytes, ends: np.ndarray, first_line: int, rwbs_bits: dict, chunk: _Chunk) -> np.ndarray:
    """Add the chunk's tracepoint lines of the usual shape to chunk; return the indexes of the other lines."""
    fields = np.zeros((14, len(ends)), dtype=np.uint64)
    usual = _scan(np.frombuffer(data, dtype=np.uint8), ends, fields)
    index = np.flatnonzero(usual)
    if not len(index):
        return np.flatnonzero(~usual)
    (issue, time, sector, size, major, minor, pid, rwbs_start, rwbs_end, comm_start, comm_end,
     rwbs_word, comm_low, comm_high) = fields[:, index]
    rwbs_codes, rwbs_names = _names(data, rwbs_start, rwbs_end, rwbs_word)
    bits = np.array([rwbs_bits.setdefault(name, categories(name)) for name in rwbs_names], dtype=np.uint32)
    comm_codes, comm_names = _names(data, comm_start, comm_end, comm_low, comm_high)
    chunk.add(line=index + first_line, time=time.astype(np.int64), sector=sector, size=size,
              action=np.where(issue == 1, BLK_TA_ISSUE, BLK_TA_COMPLETE).astype(np.uint32)
              | bits[rwbs_codes] << BLK_TC_SHIFT,
              pid=pid.astype(np.uint32), device=_device(major, minor),
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
        comm = m.groupdict().get("comm")
        chunk.add(line=np.array([number]), time=np.array([time]),
                  sector=np.array([min(int(m["sector"]), LARGEST_SECTOR)], dtype=np.uint64),
                  size=np.array([min(int(m["size"]), LARGEST_SECTOR)], dtype=np.uint64),
                  action=np.array([(BLK_TA_ISSUE if issue else BLK_TA_COMPLETE) | bits << BLK_TC_SHIFT]),
                  pid=np.array([int(line["pid"])]),
                  device=_device(np.array([int(m["maj"])]), np.array([int(m["min"])])),
                  process=np.array([(comm or line["task"]) if issue else None], dtype=object))


def _chunks(path: Path):
    """(first line number, the chunk's bytes: whole lines, the last with its newline), read in place."""
    first_line = 1
    with open(path, "rb") as f:
        rest = b""
        while True:
            data = bytearray(len(rest) + CHUNK_BYTES)
            data[:len(rest)] = rest
            with memoryview(data) as view, view[len(rest):] as free:
                size = len(rest) + f.readinto(free)
            if size == len(rest):
                if rest:
                    yield first_line, rest + b"\n"
                return
            cut = data.rfind(b"\n", 0, size) + 1
            rest = bytes(data[cut:size])
            if cut == 0:
                continue
            del data[cut:]
            yield first_line, data
            # numpy counts the newlines three times faster than bytearray.count
            first_line += int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n")))


def _line_ends(data: bytes) -> np.ndarray:
    return np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n")) + 1


def _read(path: Path, tolerate_errors: bool, first_line: int, data: bytes) -> tuple[dict, np.ndarray, _Other]:
    """One chunk's events (see _Chunk.events) and what its other lines said."""
    chunk, other, rwbs_bits = _Chunk(), _Other(path, tolerate_errors), {}
    ends = _line_ends(data)
    for i in _tracepoints(data, ends, first_line, rwbs_bits, chunk):
        line = data[ends[i - 1] if i else 0:ends[i]]
        other.read(line.decode("utf-8", "replace"), first_line + int(i), rwbs_bits, chunk)
    return *chunk.events(), other


def _read_ahead(path: Path, tolerate_errors: bool):
    """_read of each chunk in file order, the next ones read meanwhile on the other CPUs (numpy and the
    compiled scan let go of the GIL); only as many chunks as CPUs are held at once."""
    workers = os.cpu_count() or 1
    with ThreadPoolExecutor(workers) as pool:
        pending: deque = deque()
        for chunk in _chunks(path):
            pending.append(pool.submit(_read, path, tolerate_errors, *chunk))
            if len(pending) > workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def parse_ftrace(path: str | Path, tolerate_errors: bool = False, sink=None) -> BlockTrace:
    """Parse one ftrace text file. Unparseable event lines raise TraceFormatError
    naming the file and line, unless tolerate_errors, which skips and counts them. sink: see Matcher."""
    path = Path(path)
    matcher = Matcher(path.stat().st_size // 200, sink)
    notes = Notes()
    markers: list[tuple[float, str]] = []
    bad_lines = lost_events = 0
    last_process: dict[int, str] = {}
    for events, process, other in _read_ahead(path, tolerate_errors):
        markers += other.markers
        bad_lines += other.bad_lines
        lost_events += other.lost_events
        if len(events["time"]):
            process_notes(events, process, last_process, notes)
            matcher.feed(events)
    matcher.finish()
    return BlockTrace(request_frame(matcher, notes), sorted(markers, key=lambda marker: marker[0]),
                      {**matcher.counts, "bad_lines": bad_lines, "lost_events": lost_events})
