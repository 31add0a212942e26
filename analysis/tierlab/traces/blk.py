"""The blktrace ABI (include/uapi/linux/blktrace_api.h), which every trace format is decoded into.

Every record is a 48-byte struct blk_io_trace, followed by pdu_len bytes of payload, in the byte order of the
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

Notify records (BLK_TC_NOTIFY category) carry a process name (BLK_TN_PROCESS), the wall clock at a trace
time (BLK_TN_TIMESTAMP) or a kernel message (BLK_TN_MESSAGE). RWBS is built from the category bits as
blkparse does: R or N depends on the byte count, not on BLK_TC_READ, so a zero-length read is "N".
"""

import glob
import os
import re
import struct
from functools import cache
from pathlib import Path

import numpy as np

from ..errors import TraceFormatError

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

CODE_MASK = 0xFFFF & ~BLK_TA_CGROUP
NOTIFY_BIT = BLK_TC_NOTIFY << BLK_TC_SHIFT
FIELDS = (("magic", "u4", 0), ("sequence", "u4", 4), ("time", "u8", 8), ("sector", "u8", 16), ("bytes", "u4", 24),
           ("action", "u4", 28), ("pid", "u4", 32), ("device", "u4", 36), ("cpu", "u4", 40), ("error", "u2", 44),
           ("pdu_len", "u2", 46))
DATA, FLUSH, DISCARD, OTHER = 0, 1, 2, 3
# what the matcher counts of the dispatches and completions that make no row, by position in its counts array
MATCH_COUNTS = ("flush", "discard", "other_op", "zero_length", "beyond_bounds", "time_jumps",
                "completion_without_dispatch")
# every count of the matcher, as its results list them
COUNT_KEYS = ("flush", "discard", "other_op", "zero_length", "beyond_bounds", "time_jumps",
              "dispatch_without_completion", "completion_without_dispatch")


@cache
def record_dtype(byteorder: str = "<", itemsize: int = HEADER_BYTES, names: tuple[str, ...] | None = None) -> np.dtype:
    """The blk_io_trace header as a numpy dtype; itemsize > 48 strides over payloads."""
    fields = [f for f in FIELDS if names is None or f[0] in names]
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


def classify(rwbs: str) -> str:
    """R, W, F (bare flush), D (discard) or N (anything else) from an RWBS string.

    A write carrying data with flush/FUA flags (WFS, FWFS) is a write; a bare
    flush (FN) is a flush.
    """
    if "D" in rwbs:
        return "D"
    if "R" in rwbs:
        return "R"
    if "W" in rwbs:
        return "W"
    if "F" in rwbs:
        return "F"
    return "N"


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


# RWBS lookup: (categories & _RWBS_MASK) | (bytes != 0) -> index into RWBS; the byte flag uses
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


_RWBS_LUT, RWBS, OPS, _KINDS = _rwbs_table()
# by the whole category word (action >> 16): for records with bytes, and without
RWBS_WITH_BYTES = _RWBS_LUT[(np.arange(1 << 16) & _RWBS_MASK) | 1]
RWBS_NO_BYTES = _RWBS_LUT[np.arange(1 << 16) & _RWBS_MASK]
IS_DATA = _KINDS == DATA
# by RWBS code, what a dispatch of it that is no data row counts as (one of a data kind: zero length)
_COUNT_OF_KIND = {DATA: "zero_length", FLUSH: "flush", DISCARD: "discard", OTHER: "other_op"}
COUNTED_AS = np.array([MATCH_COUNTS.index(_COUNT_OF_KIND[kind]) for kind in _KINDS.tolist()])


def blktrace_files(paths) -> tuple[list[Path], int]:
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


def corrupt_record(path, offset: int, problem: str) -> TraceFormatError:
    """The error of a binary file that cannot be decoded past offset."""
    return TraceFormatError(f"{path}: at byte offset {offset}: {problem}; "
                            "pass --tolerate-errors to keep the records before it (the problem is counted)")


class Notes:
    """What notify records say, across files: process names, markers."""

    def __init__(self):
        self.process: list[tuple[int, int, str]] = []     # (time ns, pid, name)
        self.markers: list[tuple[int, str]] = []           # (time ns, text)

    def add(self, action: int, time: int, pid: int, payload: bytes, byteorder: str):
        if action & BLK_TA_CGROUP:
            payload = payload[8:]
        code = action & CODE_MASK
        if code == BLK_TN_PROCESS:
            self.process.append((time, pid, payload.split(b"\0", 1)[0].decode("utf-8", "replace")))
        elif code == BLK_TN_TIMESTAMP and len(payload) == 8:
            sec, nsec = struct.unpack(byteorder + "II", payload)
            self.markers.append((time, f"blktrace wallclock {sec}.{nsec:09d}"))
        elif code == BLK_TN_MESSAGE:
            text = payload.split(b"\0", 1)[0].decode("utf-8", "replace").strip()
            if text:
                self.markers.append((time, text))
