"""Decode blktrace output into dispatched requests matched with their completions.

Two inputs, one result (the BlockTrace of parse_ftrace: `requests` with REQUEST_COLUMNS,
`markers`, `counts`), with the counting and matching rules of parse_ftrace:

* parse_blktrace_binary: the binary files `blktrace` writes (`name.blktrace.N`, one per CPU)
  or a merged dump (`blkparse -d`), decoded with numpy over whole chunks of the files;
* parse_blkparse_text: blkparse's default text output.

write_blktrace writes binary records from a compact description (tests, benchmarks).

The binary format (include/uapi/linux/blktrace_api.h): every record is a 48-byte
struct blk_io_trace, followed by pdu_len bytes of payload, in the byte order of the
machine that traced (told apart by the magic):

    offset  0 u32 magic     0x65617400 | version (0x07)
            4 u32 sequence  per (device, CPU)
            8 u64 time      ns, monotonic clock
           16 u64 sector
           24 u32 bytes
           28 u32 action    __BLK_TA_* code in the low 16 bits, BLK_TC_* categories << 16
           32 u32 pid
           36 u32 device    kernel dev_t: major << 20 | minor
           40 u32 cpu
           44 u16 error
           46 u16 pdu_len

Notify records (BLK_TC_NOTIFY category) carry a process name (BLK_TN_PROCESS), the wall
clock at a trace time (BLK_TN_TIMESTAMP) or a kernel message (BLK_TN_MESSAGE).

What the result holds, and where it departs from blkparse:

* rows are the dispatches (D) of data requests (R or W in the RWBS, at least one sector),
  in time order; a completion (C) closes the oldest open dispatch with the same device and
  sector; flush, discard, other (including SCSI passthrough, BLK_TC_PC) and zero-length
  dispatches take part in matching but are only counted;
* RWBS is built from the category bits as blkparse does: R or N depends on the byte
  count, not on BLK_TC_READ, so a zero-length read is "N" (other_op), not zero_length;
* ts_s is the trace clock in seconds (blkparse prints times relative to the first event);
* process is the name of the last BLK_TN_PROCESS note for the pid at or before the
  dispatch, else the pid's first note (blkparse uses the first note for a pid throughout,
  which differs only where a pid was reused); missing where the pid has no note
  (blkparse prints "(null)");
* markers are the BLK_TN_MESSAGE texts, and each BLK_TN_TIMESTAMP as
  "blktrace wallclock SECONDS.NANOSECONDS" (the wall clock at that trace time);
* records with the cgroup flag (__BLK_TA_CGROUP) are decoded, their 8-byte cgroup id
  skipped (blkparse 1.2.0 rejects such D/C records as "Bad fs action");
* per-CPU files are merged by time, equal times in the order the files were given (CPU
  order for a prefix), then file order; each file is taken to be in time order, as the
  kernel writes it (blkparse assumes the same).

counts: flush, discard, other_op, zero_length, dispatch_without_completion,
completion_without_dispatch, and bad_records / bad_bytes (binary: corrupt or truncated
spots tolerated, bytes left undecoded) or bad_lines (text).

How the binary decoder goes about it: files are memory-mapped and read a chunk at a time;
runs of records of one size are viewed as numpy structured arrays (only records with
irregular payload sizes are walked one by one); a worker thread decodes and merges the
files by time while the caller's thread matches completions in batches (a sort by device
and sector per batch, see Matcher) and fills preallocated columns; the text columns are
categoricals over the codes kept meanwhile. Memory: about the result frame's own size (some
50 bytes per request) plus a few MB; with a sink (see Matcher), the requests in flight and a
chunk of final ones.
"""

import glob
import mmap
import os
import re
import struct
from collections import defaultdict
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from .block_trace import (
    LARGEST_SECTOR,
    MAX_LATENCY_US,
    REQUEST_COLUMNS,
    REQUEST_DTYPES,
    BlockTrace,
    classify,
    event_extent,
)
from .errors import TraceFormatError
from .open_dispatches import COUNTS as MATCH_COUNTS
from .open_dispatches import OpenDispatches
from .prefetch import prefetched

BLK_IO_TRACE_MAGIC = 0x65617400
BLK_IO_TRACE_VERSION = 0x07
HEADER_BYTES = 48

# categories (enum blktrace_cat), shifted left by BLK_TC_SHIFT in the action word
BLK_TC_SHIFT = 16
BLK_TC_READ = 1 << 0
BLK_TC_WRITE = 1 << 1
BLK_TC_FLUSH = 1 << 2
BLK_TC_SYNC = 1 << 3
BLK_TC_QUEUE = 1 << 4
BLK_TC_REQUEUE = 1 << 5
BLK_TC_ISSUE = 1 << 6
BLK_TC_COMPLETE = 1 << 7
BLK_TC_FS = 1 << 8
BLK_TC_PC = 1 << 9
BLK_TC_NOTIFY = 1 << 10
BLK_TC_AHEAD = 1 << 11
BLK_TC_META = 1 << 12
BLK_TC_DISCARD = 1 << 13
BLK_TC_DRV_DATA = 1 << 14
BLK_TC_FUA = 1 << 15

# actions (enum blktrace_act): blkparse's letter, the code and the category the kernel adds
ACTIONS = {"Q": (1, BLK_TC_QUEUE), "M": (2, BLK_TC_QUEUE), "F": (3, BLK_TC_QUEUE), "G": (4, BLK_TC_QUEUE),
           "S": (5, BLK_TC_QUEUE), "R": (6, BLK_TC_REQUEUE), "D": (7, BLK_TC_ISSUE), "C": (8, BLK_TC_COMPLETE),
           "I": (12, BLK_TC_QUEUE)}
BLK_TA_ISSUE = 7
BLK_TA_COMPLETE = 8
BLK_TA_CGROUP = 1 << 8
# notify actions (enum blktrace_notify)
BLK_TN_PROCESS = 0
BLK_TN_TIMESTAMP = 1
BLK_TN_MESSAGE = 2

CHUNK_BYTES = 2 << 20
_CODE_MASK = 0xFFFF & ~BLK_TA_CGROUP
_NOTIFY_BIT = BLK_TC_NOTIFY << BLK_TC_SHIFT
_MIN_RUN = 16        # records of one size in a row before they are decoded as one strided view
_MAX_WALK = 4096     # records walked one by one (irregular payload sizes) before trying a run again
_FIELDS = (("magic", "u4", 0), ("sequence", "u4", 4), ("time", "u8", 8), ("sector", "u8", 16), ("bytes", "u4", 24),
           ("action", "u4", 28), ("pid", "u4", 32), ("device", "u4", 36), ("cpu", "u4", 40), ("error", "u2", 44),
           ("pdu_len", "u2", 46))
_COUNT_KEYS = ("flush", "discard", "other_op", "zero_length", "beyond_bounds", "time_jumps",
               "dispatch_without_completion", "completion_without_dispatch")
SINK_ROWS = 1 << 18
DATA, FLUSH, DISCARD, OTHER = 0, 1, 2, 3


@cache
def record_dtype(byteorder: str = "<", itemsize: int = HEADER_BYTES, names: tuple[str, ...] | None = None) -> np.dtype:
    """The blk_io_trace header as a numpy dtype; itemsize > 48 strides over payloads."""
    fields = [f for f in _FIELDS if names is None or f[0] in names]
    return np.dtype({"names": [f[0] for f in fields], "formats": [byteorder + f[1] for f in fields],
                     "offsets": [f[2] for f in fields], "itemsize": itemsize})


def dev_t(device: str | int) -> int:
    """Kernel dev_t of "major:minor" (or "major,minor"); an int is returned as is."""
    if isinstance(device, int):
        return device
    major, minor = re.split(r"[:,]", device)
    return int(major) << 20 | int(minor)


def device_name(device: int) -> str:
    return f"{device >> 20}:{device & 0xFFFFF}"


def rwbs_string(categories: int, nbytes: int) -> str:
    """RWBS as blkparse prints it (fill_rwbs): F(lush) D|W|R|N F(ua) A(head) S(ync) M(eta)."""
    rwbs = "F" if categories & BLK_TC_FLUSH else ""
    if categories & BLK_TC_DISCARD:
        rwbs += "D"
    elif categories & BLK_TC_WRITE:
        rwbs += "W"
    else:
        rwbs += "R" if nbytes else "N"
    for bit, letter in ((BLK_TC_FUA, "F"), (BLK_TC_AHEAD, "A"), (BLK_TC_SYNC, "S"), (BLK_TC_META, "M")):
        if categories & bit:
            rwbs += letter
    return rwbs


def _kind(op: str, passthrough: bool) -> int:
    if passthrough or op == "N":
        return OTHER
    return {"F": FLUSH, "D": DISCARD}.get(op, DATA)


def categories_of(rwbs: str) -> int:
    """BLK_TC_* bits for an RWBS string as blkparse prints it (the inverse of rwbs_string), or as the
    kernel's blk_fill_rwbs writes it for ftrace, whose operation may also be DE (secure erase) or F (flush)."""
    match = re.fullmatch(r"(F?)(DE|[DWRNF])(F?)(A?)(S?)(M?)", rwbs)
    if match is None:
        raise ValueError(f"not an RWBS string: {rwbs!r}")
    flush, op, fua, ahead, sync, meta = match.groups()
    bits = {"D": BLK_TC_DISCARD, "DE": BLK_TC_DISCARD, "W": BLK_TC_WRITE, "R": BLK_TC_READ, "F": BLK_TC_FLUSH,
            "N": 0}[op]
    for flag, bit in ((flush, BLK_TC_FLUSH), (fua, BLK_TC_FUA), (ahead, BLK_TC_AHEAD), (sync, BLK_TC_SYNC),
                      (meta, BLK_TC_META)):
        if flag:
            bits |= bit
    return bits


def blk_action(letter: str | int, rwbs: str | int = 0) -> int:
    """The action word of an event: letter (one of ACTIONS, or a raw __BLK_TA_* code) and
    rwbs (an RWBS string, or raw BLK_TC_* category bits)."""
    code, category = ACTIONS[letter] if isinstance(letter, str) else (letter, 0)
    categories = categories_of(rwbs) if isinstance(rwbs, str) else rwbs
    if isinstance(rwbs, str):
        categories |= BLK_TC_FS
    return code | (category | categories) << BLK_TC_SHIFT


# RWBS lookup: (categories & _RWBS_MASK) | (bytes != 0) -> index into _RWBS; the byte flag uses
# the READ bit's place, which blkparse ignores. Non-passthrough entries come first (< 256).
_RWBS_MASK = BLK_TC_WRITE | BLK_TC_FLUSH | BLK_TC_SYNC | BLK_TC_PC | BLK_TC_AHEAD | BLK_TC_META | BLK_TC_DISCARD | BLK_TC_FUA


def _rwbs_table():
    flags = [BLK_TC_WRITE, BLK_TC_FLUSH, BLK_TC_SYNC, BLK_TC_AHEAD, BLK_TC_META, BLK_TC_DISCARD, BLK_TC_FUA, 1]
    lut = np.zeros(1 << 16, dtype=np.uint16)
    strings, ops, kinds = [], [], []
    for passthrough in (False, True):
        for combo in range(1 << len(flags)):
            code = sum(bit for i, bit in enumerate(flags) if combo >> i & 1) | (BLK_TC_PC if passthrough else 0)
            rwbs = rwbs_string(code, code & 1)
            lut[code] = len(strings)
            strings.append(rwbs)
            ops.append(classify(rwbs))
            kinds.append(_kind(ops[-1], passthrough))
    return lut, strings, ops, np.array(kinds, dtype=np.uint8)


_RWBS_LUT, _RWBS, _OPS, _KINDS = _rwbs_table()
# by the whole category word (action >> 16): for records with bytes, and without
_RWBS_WITH_BYTES = _RWBS_LUT[(np.arange(1 << 16) & _RWBS_MASK) | 1]
_RWBS_NO_BYTES = _RWBS_LUT[np.arange(1 << 16) & _RWBS_MASK]
_IS_DATA = _KINDS == DATA
# by RWBS code, what a dispatch of it that is no data row counts as (one of a data kind: zero length)
_COUNT_OF_KIND = {DATA: "zero_length", FLUSH: "flush", DISCARD: "discard", OTHER: "other_op"}
_COUNTED_AS = np.array([MATCH_COUNTS.index(_COUNT_OF_KIND[kind]) for kind in _KINDS.tolist()])


# ---------------------------------------------------------------------------------------------
# binary files


def _expand(paths) -> tuple[list[Path], int]:
    """The files of paths (a prefix stands for its per-CPU files), and how many CPU numbers the per-CPU files skip."""
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    files: list[Path] = []
    missing = 0
    for item in paths:
        path = Path(item)
        if path.is_file():
            files.append(path)
            continue
        per_cpu = sorted(((int(p.name.rsplit(".", 1)[1]), p) for p in path.parent.glob(f"{glob.escape(path.name)}.blktrace.*")
                          if p.name.rsplit(".", 1)[1].isdigit()), key=lambda pair: pair[0])
        if not per_cpu:
            raise FileNotFoundError(f"{path}: no such file, and no per-CPU files {path}.blktrace.N")
        # blktrace writes a file for every online CPU: a gap is an offline CPU, or a file lost
        missing += per_cpu[-1][0] + 1 - len(per_cpu)
        files.extend(p for _, p in per_cpu)
    seen: set[Path] = set()
    for path in files:
        if path.resolve() in seen:
            raise TraceFormatError(f"{path} would be read twice: give each per-CPU file once, or their prefix alone")
        seen.add(path.resolve())
    return files, missing


class Notes:
    """What notify records say, across files: process names, markers."""

    def __init__(self):
        self.process: list[tuple[int, int, str]] = []     # (time ns, pid, name)
        self.markers: list[tuple[int, str]] = []           # (time ns, text)

    def add(self, action: int, time: int, pid: int, payload: bytes, byteorder: str):
        if action & BLK_TA_CGROUP:
            payload = payload[8:]
        code = action & _CODE_MASK
        if code == BLK_TN_PROCESS:
            self.process.append((time, pid, payload.split(b"\0", 1)[0].decode("utf-8", "replace")))
        elif code == BLK_TN_TIMESTAMP and len(payload) == 8:
            sec, nsec = struct.unpack(byteorder + "II", payload)
            self.markers.append((time, f"blktrace wallclock {sec}.{nsec:09d}"))
        elif code == BLK_TN_MESSAGE:
            text = payload.split(b"\0", 1)[0].decode("utf-8", "replace").strip()
            if text:
                self.markers.append((time, text))


_EVENT_FIELDS = ("time", "sector", "bytes", "action", "pid", "device")
_EVENT_TYPES = (np.int64, np.uint64, np.uint32, np.uint32, np.uint32, np.uint32)
_PIECE = 8192        # records decoded at a time (their fields stay in cache while they are copied out)


def _empty_events() -> dict:
    return {name: np.empty(0, dtype) for name, dtype in zip(_EVENT_FIELDS, _EVENT_TYPES, strict=True)}


def _concat_events(parts: list[dict]) -> dict:
    parts = [p for p in parts if len(p["time"])]
    if not parts:
        return _empty_events()
    if len(parts) == 1:
        return parts[0]
    return {name: np.concatenate([p[name] for p in parts]) for name in _EVENT_FIELDS}


def _take(events: dict, index) -> dict:
    return {name: array[index] for name, array in events.items()}


def _by_time(parts: list[dict]) -> dict:
    """The events of several parts in time order, ties in part order then event order. Each field
    is scattered from its parts straight to its place (no concatenation of the parts first)."""
    parts = [part for part in parts if len(part["time"])]
    if len(parts) <= 1:
        events = parts[0] if parts else _empty_events()
        return events if _is_sorted(events["time"]) else _take(events, np.argsort(events["time"], kind="stable"))
    times = np.concatenate([part["time"] for part in parts])
    if _is_sorted(times):
        return _concat_events(parts)
    order = np.argsort(times, kind="stable")
    place = np.empty(len(order), dtype=np.int64)
    place[order] = np.arange(len(order))
    merged = {"time": times[order]}
    for name, dtype in zip(_EVENT_FIELDS[1:], _EVENT_TYPES[1:], strict=True):
        field = merged[name] = np.empty(len(order), dtype)
        start = 0
        for part in parts:
            stop = start + len(part["time"])
            field[place[start:stop]] = part[name]
            start = stop
    return merged


def _is_sorted(times: np.ndarray) -> bool:
    return bool(len(times) < 2 or (times[1:] >= times[:-1]).all())


class _Reader:
    """One binary file (memory-mapped), decoded a chunk at a time into its D and C events, in
    file order. Pages already decoded are dropped from the mapping as it goes."""

    def __init__(self, path: Path, notes: Notes, counts: dict, tolerate_errors: bool, chunk_bytes: int):
        self.path, self.notes, self.counts, self.tolerate = path, notes, counts, tolerate_errors
        self.chunk_bytes = max(chunk_bytes, HEADER_BYTES)
        with open(path, "rb") as f:
            self.size = os.fstat(f.fileno()).st_size
            self.map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if self.size else None
        self.pos = 0               # offset of the next record
        self.released = 0          # pages before this offset were given back
        self.eof = self.size == 0
        self.byteorder = None
        self.pending: list[dict] = []
        self.need_more = False

    def close(self):
        if self.map is not None:
            try:
                self.map.close()
            except BufferError:    # an array still views it; it goes when that does
                pass

    def fail(self, offset: int, problem: str):
        if not self.tolerate:
            raise TraceFormatError(
                f"{self.path}: at byte offset {offset}: {problem}; "
                "pass --tolerate-errors to keep the records before it (the problem is counted)")
        self.counts["bad_records"] += 1
        self.counts["bad_bytes"] += self.size - offset
        self.eof = True

    def next_events(self) -> dict:
        """The D/C events of the next chunk (possibly none); sets eof after the last."""
        if self.eof:
            return _empty_events()
        data = self.map
        if self.byteorder is None:
            if self.size < 4:
                self.fail(0, f"record header is truncated: {self.size} of {HEADER_BYTES} bytes")
                return _empty_events()
            for order in ("<", ">"):
                if struct.unpack_from(order + "I", data)[0] & 0xFFFFFF00 == BLK_IO_TRACE_MAGIC:
                    self.byteorder = order
                    break
            else:
                self.fail(0, f"bad magic 0x{struct.unpack_from('<I', data)[0]:08x} (not a blktrace file)")
                return _empty_events()
            self._header = struct.Struct(self.byteorder + "I42xH")
        pieces, stop, error = self._split(data, self.pos, min(self.pos + self.chunk_bytes, self.size))
        events = self._decode(data, pieces)
        self.pos = stop
        if error is not None:
            self.fail(error[0], error[1])
        elif stop >= self.size:
            self.eof = True
        release = stop - stop % mmap.PAGESIZE
        if release > self.released:
            self.map.madvise(mmap.MADV_DONTNEED, self.released, release - self.released)
            self.released = release
        return events

    def refill(self):
        """Decode chunks until at least one new D/C event is pending, or the file ends."""
        while not self.eof:
            events = self.next_events()
            if len(events["time"]):
                self.pending.append(events)
                return

    def pending_count(self) -> int:
        return sum(len(part["time"]) for part in self.pending)

    def last_time(self) -> int:
        return int(self.pending[-1]["time"][-1])

    def take_before(self, cutoff: int | None) -> list[dict]:
        """Pending events with time < cutoff (all if None), in file order; the rest stay."""
        if cutoff is None:
            taken, self.pending = self.pending, []
            return taken
        taken, kept = [], []
        for part in self.pending:
            times = part["time"]
            if _is_sorted(times):
                k = int(np.searchsorted(times, cutoff, "left"))
                taken.append(_take(part, slice(None, k)))
                kept.append(_take(part, slice(k, None)))
            else:
                before = times < cutoff
                taken.append(_take(part, before))
                kept.append(_take(part, ~before))
        self.pending = [part for part in kept if len(part["time"])]
        return taken

    def _split(self, data, pos: int, limit: int):
        """Cut the records starting in [pos, limit) into pieces: ("run", offset, stride, count) for
        records of one size in a row, ("walk", offsets) for others. Returns the pieces, the offset
        after them, and the first problem (file offset, text) if the file cannot be decoded further."""
        header, end = self._header, self.size
        pieces = []
        while pos < limit:
            if end - pos < HEADER_BYTES:
                return pieces, pos, (pos, f"record header is truncated: {end - pos} of {HEADER_BYTES} bytes")
            magic, pdu_len = header.unpack_from(data, pos)
            if magic & 0xFFFFFF00 != BLK_IO_TRACE_MAGIC:
                return pieces, pos, (pos, f"bad magic 0x{magic:08x}")
            if magic & 0xFF != BLK_IO_TRACE_VERSION:
                return pieces, pos, (pos, f"unsupported blktrace version {magic & 0xFF} (only {BLK_IO_TRACE_VERSION})")
            stride = HEADER_BYTES + pdu_len
            if end - pos < stride:
                return pieces, pos, (pos, f"payload runs past the end of the file (pdu_len {pdu_len}, "
                                          f"{end - pos - HEADER_BYTES} bytes left)")
            count = self._run_length(data, pos, limit, stride, magic, pdu_len)
            if count >= _MIN_RUN:
                pieces.append(("run", pos, stride, count))
                pos += count * stride
                continue
            offsets, same, last = [], 0, -1
            while pos < limit and len(offsets) < _MAX_WALK and end - pos >= HEADER_BYTES:
                magic, pdu_len = header.unpack_from(data, pos)
                stride = HEADER_BYTES + pdu_len
                if magic != BLK_IO_TRACE_MAGIC | BLK_IO_TRACE_VERSION or end - pos < stride:
                    break
                offsets.append(pos)
                pos += stride
                same = same + 1 if stride == last else 1
                last = stride
                if same >= _MIN_RUN:
                    break
            pieces.append(("walk", offsets))
        return pieces, pos, None

    def _run_length(self, data, pos: int, limit: int, stride: int, magic: int, pdu_len: int) -> int:
        """How many records of this stride follow at pos (the first starting before limit, the
        last ending by the end of the file)."""
        available = min((self.size - pos) // stride, (limit - pos + stride - 1) // stride)
        probe = record_dtype(self.byteorder, stride, ("magic", "pdu_len"))
        count, window = 1, _MIN_RUN
        while count < available:
            n = min(window, available - count)
            view = np.frombuffer(data, probe, count=n, offset=pos + count * stride)
            bad = (view["magic"] != magic) | (view["pdu_len"] != pdu_len)
            first = int(bad.argmax())
            if bad[first]:
                return count + first
            count += n
            window = min(window * 8, 1 << 22)
        return count

    def _decode(self, data, pieces: list) -> dict:
        total = sum(piece[3] if piece[0] == "run" else len(piece[1]) for piece in pieces)
        out = [np.empty(total, dtype) for dtype in _EVENT_TYPES]
        filled = 0
        for piece in pieces:
            if piece[0] == "run":
                _, pos, stride, count = piece
                records = np.frombuffer(data, record_dtype(self.byteorder, stride), count=count, offset=pos)
                for start in range(0, count, _PIECE):
                    first_payload = pos + HEADER_BYTES + stride * start
                    filled = self._decode_part(data, records[start:start + _PIECE],
                                               lambda i, at=first_payload, step=stride: at + step * i, out, filled)
            else:
                offsets = np.asarray(piece[1], dtype=np.int64)
                raw = np.frombuffer(data, np.uint8)[offsets[:, None] + np.arange(HEADER_BYTES)]
                records = raw.view(record_dtype(self.byteorder)).reshape(len(offsets))
                filled = self._decode_part(data, records, lambda i, at=offsets: at[i] + HEADER_BYTES, out, filled)
        return {name: array[:filled] for name, array in zip(_EVENT_FIELDS, out, strict=True)}

    def _decode_part(self, data, records: np.ndarray, payload_at, out: list, filled: int) -> int:
        """Copy the D and C events of records into out from position filled; hand notify records
        to the notes. payload_at(i): the file offset of record i's payload."""
        action = records["action"]
        notify = np.flatnonzero(action & _NOTIFY_BIT)
        for i in notify:
            start = int(payload_at(i))
            self.notes.add(int(action[i]), int(records["time"][i]), int(records["pid"][i]),
                           data[start:start + int(records["pdu_len"][i])], self.byteorder)
        code = action & (_CODE_MASK | _NOTIFY_BIT)
        keep = (code == BLK_TA_ISSUE) | (code == BLK_TA_COMPLETE)
        n = int(np.count_nonzero(keep))
        end = filled + n
        if n == len(records):
            for name, array in zip(_EVENT_FIELDS, out, strict=True):
                array[filled:end] = records[name]
        elif n:
            index = np.flatnonzero(keep)
            for name, array in zip(_EVENT_FIELDS, out, strict=True):
                array[filled:end] = records[name][index]
        return end


def _merged(readers: list[_Reader]):
    """Yield the D/C events of all files in time order, a batch at a time: a k-way merge of
    files that are each in time order (ties in file order). A single file goes chunk by chunk."""
    if len(readers) == 1:
        reader = readers[0]
        while not reader.eof:
            events = reader.next_events()
            if len(events["time"]):
                yield _by_time([events])
        return
    while True:
        for reader in readers:
            if not reader.eof and (reader.need_more or not reader.pending):
                reader.need_more = False
                reader.refill()
        live = [r for r in readers if not r.eof]
        if not live and not any(r.pending for r in readers):
            return
        cutoff = min(r.last_time() for r in live) if live else None
        for reader in live:
            if reader.last_time() == cutoff:
                reader.need_more = True
        events = _by_time([part for reader in readers for part in reader.take_before(cutoff)])
        if len(events["time"]):
            yield events


class _Column:
    """An array filled from the front and grown in place (realloc moves large blocks without
    copying them); pages never written are never touched."""

    def __init__(self, dtype, capacity: int):
        self.array = np.empty(max(capacity, 1024), dtype)
        self.length = 0

    def room(self, n: int) -> np.ndarray:
        """The whole array, with room for n more values after the first `length` (drop it before the next call)."""
        end = self.length + n
        if end > len(self.array):
            self.array.resize(max(end, len(self.array) * 3 // 2), refcheck=False)
        return self.array

    def done(self) -> np.ndarray:
        array, self.array = self.array, None
        array.resize(self.length, refcheck=False)
        return array

    def take_front(self, n: int) -> np.ndarray:
        """The first n values, removed (the rest move to the front)."""
        taken = self.array[:n].copy()
        self.array[:self.length - n] = self.array[n:self.length]
        self.length -= n
        return taken


class Matcher:
    """Matches completions to dispatches batch after batch, and collects the request rows.

    Events are taken in time order (ties as given); a completion closes the oldest open dispatch of its
    device and sector (see open_dispatches), and one without any is counted. Every dispatch takes part
    in the matching; only data dispatches (not flushes, discards or zero-length ones, nor requests
    beyond 2^63 bytes, which are counted) become rows.

    A request whose completion comes before its dispatch, or over MAX_LATENCY_US after it, has a time
    field out of step: it stays a row, without a latency, and is counted (time_jumps).

    With a sink, the rows are not kept to the end: whenever SINK_ROWS of them are final, they are handed to
    sink(frame) in dispatch order and dropped, so that memory follows the requests in flight, not the trace.
    The frame has REQUEST_COLUMNS but process (a pid's last name is known only at the end); its device's
    categories are every device seen so far, in the order they came, so that a device keeps its code from
    frame to frame. A row is final once it is closed, or open for MAX_LATENCY_US of the trace's clock (its
    completion, if one comes, is then a time jump)."""

    def __init__(self, capacity: int, sink=None):
        self.counts = dict.fromkeys(_COUNT_KEYS, 0)
        self.devices: dict[int, int] = {}
        self.sink = sink
        if sink is not None:
            capacity = min(capacity, 2 * SINK_ROWS)
        self.columns = {name: _Column(dtype, capacity) for name, dtype in (
            ("ts_s", np.float64), ("sector", np.int64), ("size", np.int64), ("latency", np.float64), ("pid", np.int64),
            ("dev", np.uint16), ("rwbs", np.uint8))}
        self.rows = 0
        self.base = 0          # the row in the columns' first place (the rows before went to the sink)
        self.latest = 0        # with a sink, the trace's clock so far, ns: the latest median time of a batch
        self.open = OpenDispatches()
        self._counts = np.zeros(len(MATCH_COUNTS), np.int64)   # the compiled pass's, into counts at finish

    def _device_codes(self, device: np.ndarray) -> np.ndarray:
        first = device[0]
        distinct = [first] if (device == first).all() else pd.unique(device)
        for value in distinct:
            self.devices.setdefault(int(value), len(self.devices))
        if len(distinct) == 1:
            return np.full(len(device), self.devices[int(first)], dtype=np.uint16)
        known = np.array(sorted(self.devices), dtype=np.uint32)
        codes = np.array([self.devices[int(v)] for v in known], dtype=np.uint16)
        return codes[np.searchsorted(known, device)]

    def feed(self, events: dict):
        times = np.asarray(events["time"], np.int64)
        n = len(times)
        if not n:
            return
        if self.sink is not None:
            # a median (of a sample), not the maximum: one corrupt time must not make every open dispatch stale
            self.latest = max(self.latest, int(np.median(times[::max(1, n // 63)])))
        cols = self.columns
        arrays = [cols[name].room(n) for name in ("ts_s", "sector", "size", "pid", "dev", "rwbs", "latency")]
        fields = (times, np.asarray(events["bytes"], np.uint32), np.asarray(events["action"], np.uint32),
                  np.asarray(events["sector"], np.uint64), np.asarray(events["pid"], np.uint32),
                  self._device_codes(events["device"]), BLK_TA_ISSUE, _CODE_MASK, BLK_TC_SHIFT,
                  _RWBS_WITH_BYTES, _RWBS_NO_BYTES, _IS_DATA, _COUNTED_AS)
        self.rows += self.open.match(fields, self.rows, self.base, arrays, self._counts)
        del arrays
        for column in cols.values():
            column.length = self.rows - self.base
        if self.sink is not None:
            self._hand_over(SINK_ROWS)

    def finish(self):
        self.counts.update(zip(MATCH_COUNTS, self._counts.tolist(), strict=True))
        self.counts["dispatch_without_completion"] = self.open.live
        if self.sink is not None:
            self._hand_over(1, final=True)

    def device_names(self) -> list[str]:
        """The devices' names by their codes in the dev column."""
        return [device_name(device) for device in sorted(self.devices, key=self.devices.get)]

    def _hand_over(self, least: int, final: bool = False) -> None:
        """The final rows to the sink, if there are at least `least` of them."""
        waiting = -1 if final else self.open.oldest_waiting_row(self.base, self.latest - int(MAX_LATENCY_US * 1000))
        final_rows = (self.rows if waiting < 0 else waiting) - self.base
        if final_rows < least:
            return
        taken = {name: column.take_front(final_rows) for name, column in self.columns.items()}
        self.base += final_rows
        self.sink(_frame(taken, self.device_names(), every_device=True))


def _categorical(values: list, codes: np.ndarray) -> pd.Categorical:
    """values[codes] as a categorical over the distinct values that occur (sorted); None is missing."""
    used = np.bincount(codes, minlength=len(values)) > 0
    categories = sorted({value for value, seen in zip(values, used, strict=True) if seen and value is not None})
    position = {value: i for i, value in enumerate(categories)}
    lookup = np.array([position.get(value, -1) for value in values], dtype=np.min_scalar_type(-len(categories) - 1))
    return pd.Categorical.from_codes(lookup[codes], categories)


def _process(pid: np.ndarray, ts_s: np.ndarray, notes: list[tuple[int, int, str]]) -> pd.Categorical:
    """Per row, the pid's last process note at or before the row's time, else its first note;
    missing for pids without notes."""
    history: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for time, note_pid, name in sorted(notes, key=lambda note: note[0]):
        history[note_pid].append((time, name))
    codes, distinct = pd.factorize(pid)
    names = [history[p][0][1] if p in history else None for p in distinct.tolist()]
    for p in distinct.tolist():
        if len({name for _, name in history.get(p, [])}) > 1:     # a reused pid
            times = np.array([time for time, _ in history[p]], dtype=np.int64) / 1e9
            rows = np.flatnonzero(pid == p)
            codes[rows] = len(names) + np.maximum(np.searchsorted(times, ts_s[rows], "right") - 1, 0)
            names.extend(name for _, name in history[p])
    return _categorical(names, codes)


def process_notes(events: dict, process: np.ndarray, last: dict[int, str], notes: Notes) -> None:
    """A process note wherever a pid's dispatches change name (and at its first), as blktrace writes them,
    for text traces whose dispatches carry their process's name (process: the name, None for the others);
    last: each pid's name so far, carried from batch to batch."""
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


def _frame(columns: dict, device_names: list[str], every_device: bool = False) -> pd.DataFrame:
    """The request frame of the matcher's columns, without process. The device's categories are the devices
    that occur, sorted; or, every_device, all of device_names in their order (the codes of the dev column)."""
    rwbs, dev = columns["rwbs"], columns["dev"]
    device = pd.Categorical.from_codes(dev, device_names) if every_device else _categorical(device_names, dev)
    return pd.DataFrame({"ts_s": columns["ts_s"], "device": device,
                         "op": _categorical(_OPS[:256], rwbs), "rwbs": _categorical(_RWBS[:256], rwbs),
                         "sector": columns["sector"], "size_sectors": columns["size"], "latency_us": columns["latency"],
                         "pid": columns["pid"]}, copy=False)


def request_frame(matcher: Matcher, notes: Notes) -> pd.DataFrame:
    """The rows the matcher kept (none where it had a sink), with their processes."""
    if matcher.columns["ts_s"].length == 0:
        return pd.DataFrame(columns=REQUEST_COLUMNS).astype(REQUEST_DTYPES)
    frame = _frame({name: column.done() for name, column in matcher.columns.items()}, matcher.device_names())
    frame["process"] = _process(frame["pid"].to_numpy(), frame["ts_s"].to_numpy(), notes.process)
    return frame


def parse_blktrace_binary(paths, tolerate_errors: bool = False, *, chunk_bytes: int = CHUNK_BYTES,
                          sink=None) -> BlockTrace:
    """Decode binary blktrace files into matched requests (the result of parse_ftrace).

    paths: one path or several; each an existing file (a per-CPU file, or a merged dump as
    `blkparse -d` writes it), or a blkparse-style prefix `name` standing for all of
    `name.blktrace.N`. Events of all files are merged by time.

    A truncated or corrupt file (bad magic or version, short record, payload past the end)
    raises TraceFormatError naming the file and byte offset; with tolerate_errors the records
    before the problem are kept, the rest of that file is skipped, and counts["bad_records"]
    and counts["bad_bytes"] say so.

    chunk_bytes: how much of each file is read and decoded at a time (memory against speed).
    sink: where the requests go as they are final (see Matcher), instead of the result's frame.
    """
    files, missing_cpu_files = _expand(paths)
    counts = {"bad_records": 0, "bad_bytes": 0, "missing_cpu_files": missing_cpu_files}
    notes = Notes()
    readers = [_Reader(path, notes, counts, tolerate_errors, chunk_bytes) for path in files]
    matcher = Matcher(sum(reader.size for reader in readers) // (2 * HEADER_BYTES), sink)
    batches = prefetched(_merged(readers))
    try:
        for events in batches:
            matcher.feed(events)
    finally:
        batches.close()
        for reader in readers:
            reader.close()
    matcher.finish()
    markers = [(time / 1e9, text) for time, text in sorted(notes.markers, key=lambda marker: marker[0])]
    return BlockTrace(request_frame(matcher, notes), markers, {**matcher.counts, **counts})


# ---------------------------------------------------------------------------------------------
# blkparse text

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


# ---------------------------------------------------------------------------------------------
# writer


def write_blktrace(path: str | Path, events, byteorder: str = "<", cpu: int = 0, append: bool = False) -> Path:
    """Write binary blk_io_trace records (tests and benchmarks).

    events is either

    * a numpy structured array with any of the fields sequence, time, sector, bytes, action,
      pid, device, cpu, error (missing ones are 0; sequence, when missing, is 1, 2, ...;
      cpu, when missing, is `cpu`); written in one go, without payloads; or
    * an iterable of tuples, written in the order given:

        (letter, time_ns, device, sector, nbytes, rwbs, pid[, cpu[, error]])
            letter: one of Q M F G S R D C I (blkparse's action letters), or a raw __BLK_TA_*
            code; rwbs: as blkparse prints it ("R", "WS", "FWFS", "FN", "DS", "RA", "WM"),
            adding BLK_TC_FS, or raw BLK_TC_* category bits (e.g. BLK_TC_PC | BLK_TC_READ)
        ("process", time_ns, device, pid, name[, cpu])      BLK_TN_PROCESS, 16-byte comm
        ("message", time_ns, device, text[, cpu])           BLK_TN_MESSAGE
        ("timestamp", time_ns, device, sec, nsec[, cpu])    BLK_TN_TIMESTAMP

      device: "major:minor" or a kernel dev_t. Events get sequence numbers 1, 2, ... per
      (device, cpu) in the order given (what blkparse checks); notify records get 0.

    byteorder: "<" (little-endian) or ">" (big-endian). cpu: the default CPU of the records;
    a per-CPU file `name.blktrace.N` should hold records of CPU N only (blkparse skips others).
    append: add to the end of the file (e.g. process notes first, then a numpy array of events).
    """
    path = Path(path)
    dtype = record_dtype(byteorder)
    if isinstance(events, np.ndarray):
        records = np.zeros(len(events), dtype=dtype)
        records["magic"] = BLK_IO_TRACE_MAGIC | BLK_IO_TRACE_VERSION
        records["sequence"] = np.arange(1, len(events) + 1)
        records["cpu"] = cpu
        for name in events.dtype.names:
            records[name] = events[name]
        with open(path, "ab" if append else "wb") as out:
            records.tofile(out)
        return path
    sequence: dict[tuple[int, int], int] = defaultdict(int)
    with open(path, "ab" if append else "wb") as out:
        for event in events:
            kind = event[0]
            payload = b""
            if kind in ("process", "message", "timestamp"):
                time, device = event[1], dev_t(event[2])
                if kind == "process":
                    pid, payload = event[3], event[4].encode()[:15].ljust(16, b"\0")
                    rest, code = event[5:], BLK_TN_PROCESS
                elif kind == "message":
                    pid, payload, rest, code = 0, event[3].encode(), event[4:], BLK_TN_MESSAGE
                else:
                    pid, payload, rest, code = 0, struct.pack(byteorder + "II", event[3], event[4]), event[5:], BLK_TN_TIMESTAMP
                record_cpu = rest[0] if rest else cpu
                values = dict(sequence=0, time=time, sector=0, bytes=0, action=code | _NOTIFY_BIT, pid=pid,
                              device=device, cpu=record_cpu, error=0)
            else:
                letter, time, device, sector, nbytes, rwbs, pid, *rest = event
                device = dev_t(device)
                record_cpu = rest[0] if rest else cpu
                sequence[(device, record_cpu)] += 1
                values = dict(sequence=sequence[(device, record_cpu)], time=time, sector=sector, bytes=nbytes,
                              action=blk_action(letter, rwbs), pid=pid, device=device, cpu=record_cpu,
                              error=rest[1] if len(rest) > 1 else 0)
            record = np.zeros(1, dtype=dtype)
            record["magic"] = BLK_IO_TRACE_MAGIC | BLK_IO_TRACE_VERSION
            for name, value in values.items():
                record[name] = value
            record["pdu_len"] = len(payload)
            out.write(record.tobytes() + payload)
    return path
