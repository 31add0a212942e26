"""Decode a raw ftrace window (the ring buffer's own pages, as the host agent captures them) into the
requests of parse_ftrace, with its counting and matching rules.

The file: the line b"tierlab ftrace-raw 1", one line of JSON (the layout: `page_bytes`, and per
format, from tracefs' format files when the window was traced, its `id` and each field's
[offset, size]), then the pages of every CPU's ring buffer, each page_bytes long, a CPU's pages in
time order:

    page    u64 time stamp (ns, the trace clock); u64 commit: the bytes of events that follow (low 27
            bits), 1 << 31 if events were lost before the page, 1 << 30 if their number (a u64) is
            stored right after the events; then the events
    event   u32 header: type_len (low 5 bits) and a time delta (high 27 bits), added to the time; then
              type_len 1 to 28: a record of type_len x 4 bytes
              0: a u32 length, then a record of length - 4 bytes
              29: padding: a u32 length of bytes to skip; with a zero delta, the rest of the page
              30: a u32 extending the delta: delta += u32 << 27
              31: an absolute time: u32 << 27 | delta
    record  u16 the format id, then the format's fields (common_pid, dev, sector, nr_sector, rwbs,
            comm for block_rq_issue and block_rq_complete; buf, NUL-ended, for a trace_marker print)

The pages are walked by one compiled pass (numba) twice, to count and then to fill the columns; the
CPUs' events are merged by time and fed to the matcher in batches.
"""

import json
from pathlib import Path

import numba
import numpy as np
import pandas as pd

from ..errors import TraceFormatError
from .blk import BLK_TA_COMPLETE, BLK_TA_ISSUE, BLK_TC_SHIFT, Notes
from .formats import FTRACE_RAW_MAGIC
from .frame import BlockTrace, event_extent
from .ftrace import categories
from .matcher import Matcher, process_notes, request_frame

COMMIT_BYTES_MASK = (1 << 27) - 1
MISSED_EVENTS = 1 << 31
MISSED_STORED = 1 << 30
PAGE_HEADER_BYTES = 16
# the records the walk keeps (kind) and what it counts (counts' slots)
ISSUE, COMPLETE, PRINT = 0, 1, 2
LOST_PAGES, LOST_EVENTS, BAD_PAGES, OTHER_RECORDS = range(4)
# each field the walk reads: (format, field), at its [offset, size] in the layout
FIELDS = (("block_rq_issue", "common_pid"), ("block_rq_issue", "dev"), ("block_rq_issue", "sector"),
          ("block_rq_issue", "nr_sector"), ("block_rq_issue", "rwbs"), ("block_rq_issue", "comm"),
          ("block_rq_complete", "dev"), ("block_rq_complete", "sector"), ("block_rq_complete", "nr_sector"),
          ("block_rq_complete", "rwbs"), ("print", "buf"))
BATCH_EVENTS = 1 << 20


def read_layout(path: Path) -> tuple[dict, int]:
    """The window's layout and where its pages start; a file that is not a raw window is refused."""
    with open(path, "rb") as f:
        magic = f.readline()
        header = f.readline()
    if magic != FTRACE_RAW_MAGIC:
        raise TraceFormatError(f"{path}: not a raw ftrace window (it does not begin with {FTRACE_RAW_MAGIC.strip().decode()!r})")
    try:
        layout = json.loads(header)
        page_bytes = int(layout["page_bytes"])
        formats = layout["formats"]
        ids = [int(formats[name]["id"]) for name in ("block_rq_issue", "block_rq_complete", "print")]
        fields = [[int(formats[name]["fields"][field][0]), int(formats[name]["fields"][field][1])]
                  for name, field in FIELDS]
    except (ValueError, KeyError, TypeError) as exc:
        raise TraceFormatError(f"{path}: the layout line of the raw ftrace window is unreadable ({exc}); "
                               "the file is damaged: trace the window again") from None
    if page_bytes < 64 or page_bytes & (page_bytes - 1) or not all(0 <= i < 1 << 16 for i in ids):
        raise TraceFormatError(f"{path}: the layout gives a page of {page_bytes} bytes or format ids {ids}; "
                               "the file is damaged: trace the window again")
    # the bytes a record of each kept format must have, up to the end of its last field the walk reads
    needed = [max(offset + size for (name, _), (offset, size) in zip(FIELDS, fields, strict=True) if name == wanted)
              for wanted in ("block_rq_issue", "block_rq_complete", "print")]
    return {"page_bytes": page_bytes, "ids": np.array(ids, np.int64), "needed": np.array(needed, np.int64),
            "fields": np.array(fields, np.int64)}, len(magic) + len(header)


@numba.njit(cache=True, nogil=True)
def _word(buf, start, size):
    """Up to 8 bytes of buf from start, as one number, first byte lowest."""
    word = np.uint64(0)
    for i in range(min(size, 8)):
        word |= np.uint64(buf[start + i]) << np.uint64(8 * i)
    return word


@numba.njit(cache=True, nogil=True)
def _walk(buf, start, page_bytes, ids, needed, fields, fill, kind, time, pid, dev, sector, size, rwbs, comm, counts):
    """Walk the pages of buf from start; with fill, write each kept record's columns (a print's text is where
    its sector and size are: its first and end offsets in buf); return how many there are. A page whose
    events run past its end, or whose record is shorter than its format, is counted bad and left from there."""
    n = 0
    pages = (len(buf) - start) // page_bytes
    for p in range(pages):
        page = start + p * page_bytes
        stamp = np.int64(_word(buf, page, 8))
        commit = _word(buf, page + 8, 8)
        used = np.int64(commit & np.uint64(COMMIT_BYTES_MASK))
        if used > page_bytes - PAGE_HEADER_BYTES:
            counts[BAD_PAGES] += 1
            continue
        end = page + PAGE_HEADER_BYTES + used
        if commit & np.uint64(MISSED_EVENTS):
            counts[LOST_PAGES] += 1
            if commit & np.uint64(MISSED_STORED) and end + 8 <= page + page_bytes:
                counts[LOST_EVENTS] += np.int64(_word(buf, end, 8))
        at = page + PAGE_HEADER_BYTES
        bad = False
        while at + 4 <= end:
            header = _word(buf, at, 4)
            type_len = np.int64(header & np.uint64(31))
            delta = np.int64(header >> np.uint64(5))
            if type_len == 29:
                if delta == 0:
                    break
                at += 4 + np.int64(_word(buf, at + 4, 4))
                continue
            if type_len == 30:
                stamp += (np.int64(_word(buf, at + 4, 4)) << 27) + delta
                at += 8
                continue
            if type_len == 31:
                stamp = (np.int64(_word(buf, at + 4, 4)) << 27) | delta
                at += 8
                continue
            if type_len == 0:
                record, length = at + 8, np.int64(_word(buf, at + 4, 4)) - 4
            else:
                record, length = at + 4, type_len * 4
            if length < 2 or record + length > end:
                bad = True
                break
            stamp += delta
            at = record + length
            format_id = np.int64(_word(buf, record, 2))
            which = -1
            for k in range(3):
                if format_id == ids[k]:
                    which = k
            if which < 0:
                counts[OTHER_RECORDS] += 1
                continue
            if needed[which] > length:
                bad = True
                break
            if which != PRINT:
                base = 1 if which == ISSUE else 6
                if fill:
                    kind[n] = which
                    time[n] = stamp
                    pid[n] = np.uint32(_word(buf, record + fields[0, 0], 4))
                    dev[n] = np.uint32(_word(buf, record + fields[base, 0], 4))
                    sector[n] = _word(buf, record + fields[base + 1, 0], 8)
                    size[n] = _word(buf, record + fields[base + 2, 0], 4)
                    rwbs[n, 0] = _word(buf, record + fields[base + 3, 0], fields[base + 3, 1])
                    rwbs[n, 1] = _word(buf, record + fields[base + 3, 0] + 8, fields[base + 3, 1] - 8)
                    if which == ISSUE:
                        comm[n, 0] = _word(buf, record + fields[5, 0], fields[5, 1])
                        comm[n, 1] = _word(buf, record + fields[5, 0] + 8, fields[5, 1] - 8)
            elif fill:
                kind[n] = PRINT
                time[n] = stamp
                first = record + fields[10, 0]
                last = first
                while last < record + length and buf[last] != 0:
                    last += 1
                sector[n] = first
                size[n] = last
            n += 1
        if bad:
            counts[BAD_PAGES] += 1
    return n


def _texts(words: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Codes of NUL-ended texts packed in rows of two words, and the distinct texts, decoded once each."""
    low, low_values = pd.factorize(words[:, 0])
    high, high_values = pd.factorize(words[:, 1])
    codes, pairs = pd.factorize(low * len(high_values) + high)
    texts = [np.array([low_values[pair // len(high_values)], high_values[pair % len(high_values)]], dtype="<u8")
             .tobytes().split(b"\0")[0].decode("utf-8", "replace") for pair in pairs]
    return codes, texts


def parse_ftrace_raw(path: str | Path, tolerate_errors: bool = False, sink=None) -> BlockTrace:
    """Decode one raw ftrace window. A damaged page (or a cut last page) raises TraceFormatError naming the
    file, unless tolerate_errors, which leaves it and counts it (bad_pages). sink: see Matcher."""
    path = Path(path)
    layout, start = read_layout(path)
    # mapped, not read: the pages stay in the page cache, which can let them go
    buf = np.memmap(path, dtype=np.uint8, mode="r")
    page_bytes = layout["page_bytes"]
    cut = (len(buf) - start) % page_bytes
    counts = np.zeros(4, np.int64)
    args = (buf, start, page_bytes, layout["ids"], layout["needed"], layout["fields"])
    empty = np.empty(0, np.uint8), np.empty(0, np.int64), np.empty(0, np.uint32), np.empty(0, np.uint32), \
        np.empty(0, np.uint64), np.empty(0, np.uint64), np.empty((0, 2), np.uint64), np.empty((0, 2), np.uint64)
    n = _walk(*args, False, *empty, counts)
    kind, time = np.empty(n, np.uint8), np.empty(n, np.int64)
    pid, dev = np.empty(n, np.uint32), np.empty(n, np.uint32)
    sector, size = np.empty(n, np.uint64), np.empty(n, np.uint64)
    rwbs, comm = np.zeros((n, 2), np.uint64), np.zeros((n, 2), np.uint64)
    counts[:] = 0
    _walk(*args, True, kind, time, pid, dev, sector, size, rwbs, comm, counts)
    bad_pages = int(counts[BAD_PAGES]) + (1 if cut else 0)
    if bad_pages and not tolerate_errors:
        raise TraceFormatError(f"{path}: {bad_pages} damaged or cut page(s) of the raw ftrace window; pass "
                               "--tolerate-errors to leave them out (they are counted)")
    # each CPU's records are in time order; merging them is a stable sort over a few sorted runs, taken a
    # batch at a time rather than copied whole
    order = np.argsort(time, kind="stable")
    prints = order[kind[order] == PRINT]
    markers = [(float(time[i]) / 1e9, bytes(buf[sector[i]:size[i]]).decode("utf-8", "replace").strip())
               for i in prints]
    block = order[kind[order] != PRINT]
    del order
    rwbs_codes, rwbs_names = _texts(rwbs)
    bits = np.array([categories(name) for name in rwbs_names], dtype=np.uint32)
    comm_codes, comm_names = _texts(comm)
    comm_names = np.array(comm_names, dtype=object)
    matcher, notes, last_process = Matcher(len(block) // 2, sink), Notes(), {}
    for first in range(0, len(block), BATCH_EVENTS):
        rows = block[first:first + BATCH_EVENTS]
        issue = kind[rows] == ISSUE
        events_sector, events_bytes = event_extent(sector[rows], size[rows])
        batch = {"time": time[rows], "sector": events_sector, "bytes": events_bytes,
                 "action": np.where(issue, BLK_TA_ISSUE, BLK_TA_COMPLETE).astype(np.uint32)
                 | bits[rwbs_codes[rows]] << BLK_TC_SHIFT,
                 "pid": pid[rows], "device": dev[rows]}
        process_notes(batch, np.where(issue, comm_names[comm_codes[rows]], None), last_process, notes)
        matcher.feed(batch)
    matcher.finish()
    return BlockTrace(request_frame(matcher, notes), markers, {**matcher.counts, "bad_pages": bad_pages,
                                       "lost_events": int(counts[LOST_EVENTS]), "lost_pages": int(counts[LOST_PAGES]),
                                       "other_records": int(counts[OTHER_RECORDS])})


# The layout of the kernel this was written on (6.18): what write_ftrace_raw writes by default.
KERNEL_LAYOUT = {"page_bytes": 4096, "formats": {
    "header_page": {"id": None, "fields": {"timestamp": [0, 8], "commit": [8, 8], "overwrite": [8, 1], "data": [16, 4080]}},
    "block_rq_issue": {"id": 2104, "fields": {
        "common_type": [0, 2], "common_flags": [2, 1], "common_preempt_count": [3, 1], "common_pid": [4, 4],
        "dev": [8, 4], "sector": [16, 8], "nr_sector": [24, 4], "bytes": [28, 4], "ioprio": [32, 2], "rwbs": [34, 10],
        "comm": [44, 16], "cmd": [60, 4]}},
    "block_rq_complete": {"id": 2107, "fields": {
        "common_type": [0, 2], "common_flags": [2, 1], "common_preempt_count": [3, 1], "common_pid": [4, 4],
        "dev": [8, 4], "sector": [16, 8], "nr_sector": [24, 4], "error": [28, 4], "ioprio": [32, 2], "rwbs": [34, 10],
        "cmd": [44, 4]}},
    "print": {"id": 5, "fields": {
        "common_type": [0, 2], "common_flags": [2, 1], "common_preempt_count": [3, 1], "common_pid": [4, 4],
        "ip": [8, 8], "buf": [16, 0]}},
}}


def _record(layout: dict, event: tuple) -> bytes:
    """One record of KERNEL_LAYOUT-like formats: (kind, time_ns, pid, major:minor, sector, sectors, rwbs[, comm])
    for "issue" and "complete", (kind, time_ns, text) for "print"."""
    kind = event[0]
    name = {"issue": "block_rq_issue", "complete": "block_rq_complete", "print": "print"}[kind]
    fmt = layout["formats"][name]
    fields = fmt["fields"]

    def put(record: bytearray, field: str, value: bytes) -> None:
        offset, size = fields[field]
        record[offset:offset + len(value[:size or None])] = value[:size or None]

    if kind == "print":
        text = event[2].encode() + b"\n\0"
        record = bytearray(fields["buf"][0] + len(text))
        put(record, "common_type", fmt["id"].to_bytes(2, "little"))
        record[fields["buf"][0]:] = text
        return bytes(record)
    _, _, pid, device, sector, sectors, rwbs, *comm = event
    major, minor = (int(part) for part in device.split(":"))
    record = bytearray(max(offset + size for offset, size in fields.values()) + 1)
    put(record, "common_type", fmt["id"].to_bytes(2, "little"))
    put(record, "common_pid", pid.to_bytes(4, "little"))
    put(record, "dev", (major << 20 | minor).to_bytes(4, "little"))
    put(record, "sector", sector.to_bytes(8, "little"))
    put(record, "nr_sector", sectors.to_bytes(4, "little"))
    put(record, "rwbs", rwbs.encode())
    if comm:
        put(record, "comm", comm[0].encode())
    return bytes(record)


def write_ftrace_raw(path: str | Path, cpus: list[list[tuple]], layout: dict = KERNEL_LAYOUT,
                     lost: dict[tuple[int, int], int] | None = None) -> Path:
    """Write a raw ftrace window (tests and benchmarks): per CPU, its events in time order (see _record),
    packed into ring-buffer pages as the kernel packs them (a time extend before a delta too large for
    27 bits); lost: {(cpu, page): events lost before that page}."""
    path = Path(path)
    page_bytes = layout["page_bytes"]
    with open(path, "wb") as out:
        out.write(FTRACE_RAW_MAGIC + json.dumps(layout).encode() + b"\n")
        for cpu, events in enumerate(cpus):
            pages, body, page_time, last = [], bytearray(), None, None
            for event in events:
                record = _record(layout, event)
                padded = record + bytes(-len(record) % 4)
                if len(padded) <= 28 * 4:
                    entry = bytearray(4) + padded
                    type_len = len(padded) // 4
                else:
                    entry = bytearray(4) + (len(padded) + 4).to_bytes(4, "little") + padded
                    type_len = 0
                delta = 0 if last is None else event[1] - last
                extend = b""
                if delta >= 1 << 27:
                    extend = ((delta & ((1 << 27) - 1)) << 5 | 30).to_bytes(4, "little") + (delta >> 27).to_bytes(4, "little")
                    delta = 0
                if page_time is None or PAGE_HEADER_BYTES + len(body) + len(extend) + len(entry) > page_bytes:
                    if page_time is not None:
                        pages.append((page_time, bytes(body)))
                    body, page_time, extend, delta = bytearray(), event[1], b"", 0
                entry[:4] = (delta << 5 | type_len).to_bytes(4, "little")
                body += extend + entry
                last = event[1]
            if page_time is not None:
                pages.append((page_time, bytes(body)))
            for number, (stamp, data) in enumerate(pages):
                missed = (lost or {}).get((cpu, number))
                commit = len(data) | (MISSED_EVENTS | MISSED_STORED if missed else 0)
                page = stamp.to_bytes(8, "little") + commit.to_bytes(8, "little") + data
                if missed:
                    page += missed.to_bytes(8, "little")
                out.write(page + bytes(page_bytes - len(page)))
    return path
