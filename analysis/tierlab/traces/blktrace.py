"""Decode the binary files blktrace writes (`name.blktrace.N`, one per CPU, or a merged dump as `blkparse -d`
writes it) into dispatched requests matched with their completions (traces.matcher's rules; the record
layout is traces.blk's). write_blktrace writes such files from a compact description (tests, benchmarks).

Where the result departs from blkparse:

* markers are the BLK_TN_MESSAGE texts, and each BLK_TN_TIMESTAMP as "blktrace wallclock SECONDS.NANOSECONDS"
  (the wall clock at that trace time);
* records with the cgroup flag (__BLK_TA_CGROUP) are decoded, their 8-byte cgroup id skipped (blkparse 1.2.0
  rejects such D/C records as "Bad fs action");
* per-CPU files are merged by time, equal times in the order the files were given (CPU order for a prefix),
  then file order; each file is taken to be in time order, as the kernel writes it (blkparse assumes the same).

counts: those of the matcher, and bad_records / bad_bytes (corrupt or truncated spots tolerated, bytes left
undecoded) and missing_cpu_files.

How it goes about it: files are memory-mapped and read a chunk at a time; runs of records of one size are viewed
as numpy structured arrays (only records with irregular payload sizes are walked one by one); a worker thread
decodes and merges the files by time while the caller's thread matches completions in batches and fills
preallocated columns; the text columns are categoricals over the codes kept meanwhile. Memory: about the result
frame's own size (some 50 bytes per request) plus a few MB; with a sink (see Matcher), the requests in flight
and a chunk of final ones.
"""

import mmap
import os
import struct
from collections import defaultdict
from pathlib import Path

import numpy as np

from .blk import (
    BLK_IO_TRACE_MAGIC,
    BLK_IO_TRACE_VERSION,
    BLK_TA_COMPLETE,
    BLK_TA_ISSUE,
    BLK_TN_MESSAGE,
    BLK_TN_PROCESS,
    BLK_TN_TIMESTAMP,
    CODE_MASK,
    HEADER_BYTES,
    NOTIFY_BIT,
    Notes,
    blk_action,
    blktrace_files,
    corrupt_record,
    dev_t,
    record_dtype,
)
from .frame import BlockTrace
from .matcher import Matcher, request_frame
from .prefetch import prefetched

CHUNK_BYTES = 2 << 20
_MIN_RUN = 16        # records of one size in a row before they are decoded as one strided view
_MAX_WALK = 4096     # records walked one by one (irregular payload sizes) before trying a run again


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
            raise corrupt_record(self.path, offset, problem)
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
        notify = np.flatnonzero(action & NOTIFY_BIT)
        for i in notify:
            start = int(payload_at(i))
            self.notes.add(int(action[i]), int(records["time"][i]), int(records["pid"][i]),
                           data[start:start + int(records["pdu_len"][i])], self.byteorder)
        code = action & (CODE_MASK | NOTIFY_BIT)
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
    files, missing_cpu_files = blktrace_files(paths)
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
                values = dict(sequence=0, time=time, sector=0, bytes=0, action=code | NOTIFY_BIT, pid=pid,
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
