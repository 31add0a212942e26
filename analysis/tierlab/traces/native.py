"""trace-stats of binary blktrace files in one compiled pass (emulator/src/trace_stats.c, built into
emulator/libtierlab-trace.so by `make setup`): decoding, matching and the metrics fused, some twenty times
faster than the request frames and without pandas or numba, whose start-up alone outweighs a small trace.

The pass follows the rules of the Python path (traces/frame_stats.py), which it is tested against: the matcher's
classification tables and bounds are handed to it from blk.py and frame.py, and its tallies become figures in
metrics/summary.py. Where the library is missing (tierlab installed without its checkout), or a file's records
are out of time order (the Python path sorts them a chunk at a time), or the trace has more devices or pages
than the pass numbers, the Python path measures instead."""

import ctypes
import functools
import os

import numpy as np

from ..catalog.analysis import STREAM_WINDOW
from ..checkout import PROJECT
from ..metrics.summary import access_figures
from .blk import (
    COUNT_KEYS,
    COUNTED_AS,
    IS_DATA,
    MATCH_COUNTS,
    OPS,
    RWBS_NO_BYTES,
    RWBS_WITH_BYTES,
    blktrace_files,
    corrupt_record,
    device_name,
)
from .frame import MAX_END_SECTOR, MAX_LATENCY_US, MAX_REQUEST_SECTORS

LIBRARY = PROJECT / "emulator" / "libtierlab-trace.so"
# trace_stats' arguments and results as this module reads them (emulator/src/trace_stats.h)
ABI = 1
RESULTS = ("requests", "read_requests", "write_requests", "read_bytes", "write_bytes", "pages", "distinct_pages",
           "read_pages", "distinct_read_pages", "sequential_pages", "tiny", "misaligned", "inflight_max", "latencies",
           "devices", "dispatch_without_completion", "bad_records", "bad_bytes", "error_file", "error_offset")
OK, BAD_TRACE, UNORDERED, UNSUPPORTED = 0, 1, 2, 3
DEVICES_ROOM = 1024


class _Rules(ctypes.Structure):
    _fields_ = [("rwbs_with_bytes", ctypes.c_void_p), ("rwbs_no_bytes", ctypes.c_void_p),
                ("is_data", ctypes.c_void_p), ("is_read", ctypes.c_void_p), ("counted_as", ctypes.c_void_p),
                ("beyond_bounds", ctypes.c_int64), ("time_jumps", ctypes.c_int64),
                ("completion_without_dispatch", ctypes.c_int64), ("max_end_sector", ctypes.c_uint64),
                ("max_request_sectors", ctypes.c_uint64), ("max_latency_us", ctypes.c_double),
                ("stream_window", ctypes.c_uint)]


@functools.cache
def _library() -> ctypes.CDLL | None:
    """The pass, loaded once; None where it is not built or was built from other sources."""
    if not LIBRARY.exists():
        return None
    library = ctypes.CDLL(str(LIBRARY))
    if library.trace_stats_abi() != ABI:
        return None
    library.trace_stats.restype = ctypes.c_int
    library.trace_stats.argtypes = [
        ctypes.POINTER(ctypes.c_char_p), ctypes.c_uint, ctypes.c_uint64, ctypes.c_int, ctypes.POINTER(_Rules),
        np.ctypeslib.ndpointer(np.int64, flags="C"), np.ctypeslib.ndpointer(np.int64, flags="C"),
        np.ctypeslib.ndpointer(np.float64, flags="C"), np.ctypeslib.ndpointer(np.uint32, flags="C"), ctypes.c_uint,
        ctypes.POINTER(ctypes.POINTER(ctypes.c_double)), ctypes.c_char_p, ctypes.c_size_t]
    library.trace_stats_free.argtypes = [ctypes.POINTER(ctypes.c_double)]
    return library


def available() -> bool:
    return _library() is not None


@functools.cache
def _rules() -> tuple[_Rules, tuple]:
    """The matcher's rules as the pass takes them, with the arrays they point into (kept alive with them)."""
    arrays = (np.ascontiguousarray(RWBS_WITH_BYTES, np.uint16), np.ascontiguousarray(RWBS_NO_BYTES, np.uint16),
              IS_DATA.astype(np.uint8), (np.array(OPS) == "R").astype(np.uint8), COUNTED_AS.astype(np.int64))
    rules = _Rules(*(array.ctypes.data for array in arrays), MATCH_COUNTS.index("beyond_bounds"),
                   MATCH_COUNTS.index("time_jumps"), MATCH_COUNTS.index("completion_without_dispatch"),
                   MAX_END_SECTOR, MAX_REQUEST_SECTORS, MAX_LATENCY_US, STREAM_WINDOW)
    return rules, arrays


def blktrace_stats(paths: list[str], tolerate_errors: bool, page_bytes: int) -> tuple[dict, dict, list[str]] | None:
    """What frame_stats gives of binary blktrace files (paths, or prefixes of per-CPU files), or None where the
    pass leaves them to it."""
    library = _library()
    files, missing_cpu_files = blktrace_files(paths)
    names = (ctypes.c_char_p * len(files))(*(os.fsencode(path) for path in files))
    result = np.zeros(len(RESULTS), np.int64)
    match_counts = np.zeros(len(MATCH_COUNTS), np.int64)
    figures = np.zeros(2)
    devices = np.zeros(DEVICES_ROOM, np.uint32)
    latencies = ctypes.POINTER(ctypes.c_double)()
    err = ctypes.create_string_buffer(512)
    rules, _ = _rules()
    status = library.trace_stats(names, len(files), page_bytes, tolerate_errors, ctypes.byref(rules), result,
                                 match_counts, figures, devices, DEVICES_ROOM, ctypes.byref(latencies), err, len(err))
    found = dict(zip(RESULTS, result.tolist(), strict=True))
    if status == BAD_TRACE:
        raise corrupt_record(files[found["error_file"]], found["error_offset"], err.value.decode())
    if status in (UNORDERED, UNSUPPORTED):
        return None
    if status != OK:
        raise OSError(err.value.decode())
    try:
        latency_us = np.ctypeslib.as_array(latencies, (found["latencies"],)) if found["latencies"] else np.empty(0)
        busy_s, latency_sum_us = figures.tolist()
        flight = {"io_time_s": busy_s,
                  "inflight_mean": latency_sum_us / 1e6 / busy_s if busy_s > 0 else float("nan"),
                  "inflight_max": found["inflight_max"]}
        summary = access_figures(found, found["distinct_pages"], found["distinct_read_pages"], flight, latency_us)
    finally:
        library.trace_stats_free(latencies)
    counts = dict.fromkeys(COUNT_KEYS, 0)
    counts.update(zip(MATCH_COUNTS, match_counts.tolist(), strict=True))
    counts.update({key: found[key] for key in ("dispatch_without_completion", "bad_records", "bad_bytes")},
                  missing_cpu_files=missing_cpu_files)
    return summary, counts, sorted(device_name(int(device)) for device in devices[:found["devices"]])
