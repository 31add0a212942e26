"""The metrics (docs/metrics.md), as pure functions of request pieces.

A requests frame has one row per piece of a dispatched data request (see parse_ftrace and
attribute): `object` and `file_offset_bytes` from attribution, `sequential` from
mark_sequential. `Pieces` holds the columns the metrics read as numpy arrays, so that one
set of requests is converted once and its subsets (a tier, a table) are masks of it. Pages
are aligned to the start of the file that holds them, or to the device where no file is known.
"""

from dataclasses import dataclass, fields

import numba
import numpy as np
import pandas as pd

from ..catalog.analysis import RANDOM_PCT_THRESHOLD, REPEAT_THRESHOLD, STREAM_WINDOW
from .summary import TALLIED, access_figures

SECTOR_BYTES = 512
# the chunk of the device that crowded accesses meet in (the contract's rule, Wu et al.)
CHUNK_SECTORS = 8
SIZE_BUCKETS_BYTES = [512, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576]
# upper bounds (inclusive) of latency buckets: 100 per decade from 0.01 us to 1000 s, so that a run's latency
# distribution is kept in a fixed size whatever its number of requests (each bound within 2.3% of the next)
LATENCY_EDGES_US = 10.0 ** (np.arange(-200, 901) / 100)


@dataclass
class Pieces:
    """Per piece, in page order (see page_order), which subsets keep, so that the page counts of a query,
    its tiers and its tables sort once (the requests of a trace, which have no subsets, stay in dispatch
    order): its row in the requests frame it came from, its page space (a
    number: objects >= 0, each device's unmapped space < 0), first and last page, whether it is a read, a
    write, sequential (see mark_sequential), and the head (piece 0) of its request; and the request's
    dispatch time, latency, whole size, and whether its first sector is off a 4 KiB boundary."""
    row: np.ndarray
    space: np.ndarray
    first_page: np.ndarray
    last_page: np.ndarray
    read: np.ndarray
    write: np.ndarray
    sequential: np.ndarray
    head: np.ndarray
    ts_s: np.ndarray
    latency_us: np.ndarray
    request_size_sectors: np.ndarray
    misaligned: np.ndarray

    @classmethod
    def of(cls, requests: pd.DataFrame, page_bytes: int) -> "Pieces":
        """The pieces of an attributed requests frame (see attribute) with its `sequential` column; pages
        are aligned to their file, or to the device where no file is known."""
        offset = requests["file_offset_bytes"].to_numpy(dtype=np.float64)
        mapped = ~np.isnan(offset)
        sector = requests["sector"].to_numpy(dtype=np.int64)
        objects, _ = pd.factorize(requests["object"])
        devices = device_codes(requests["device"]).astype(np.int64)
        space = np.where(mapped, objects, -1 - devices)
        start_bytes = np.where(mapped, np.nan_to_num(offset), sector * SECTOR_BYTES).astype(np.int64)
        return cls._ordered(requests, page_bytes, page_order(space, start_bytes // page_bytes), space=space,
                            start_bytes=start_bytes, head=requests["piece"].to_numpy() == 0,
                            request_size_sectors=requests["request_size_sectors"].to_numpy(),
                            sequential=requests["sequential"].to_numpy(dtype=bool))

    @classmethod
    def of_requests(cls, requests: pd.DataFrame, sequential: np.ndarray, page_bytes: int) -> "Pieces":
        """The requests of a trace with no file map (one piece each, device-aligned pages, in the frame's
        order), and their sequential flags."""
        devices = device_codes(requests["device"]).astype(np.int64)
        return cls._ordered(requests, page_bytes, None, space=-1 - devices,
                            start_bytes=requests["sector"].to_numpy(dtype=np.int64) * SECTOR_BYTES,
                            head=np.ones(len(requests), dtype=bool),
                            request_size_sectors=requests["size_sectors"].to_numpy(), sequential=sequential)

    @classmethod
    def _ordered(cls, requests: pd.DataFrame, page_bytes: int, order: np.ndarray | None, space: np.ndarray,
                 start_bytes: np.ndarray, head: np.ndarray, request_size_sectors: np.ndarray,
                 sequential: np.ndarray) -> "Pieces":
        """The pieces in the given order of the frame's rows (None: the frame's own)."""
        row = np.arange(len(requests)) if order is None else order
        pick = slice(None) if order is None else order
        first_page = start_bytes // page_bytes
        sizes = requests["size_sectors"].to_numpy(dtype=np.int64)[pick]
        # 4-byte numbers where the range allows: memory is what bounds the largest trace
        return cls(row=row.astype(np.min_scalar_type(len(row))), space=space[pick].astype(np.int32),
                   first_page=first_page[pick], last_page=(start_bytes[pick] + sizes * SECTOR_BYTES - 1) // page_bytes,
                   read=(requests["op"] == "R").to_numpy()[pick], write=(requests["op"] == "W").to_numpy()[pick],
                   sequential=sequential[pick], head=head[pick],
                   ts_s=requests["ts_s"].to_numpy(dtype=np.float64)[pick],
                   latency_us=requests["latency_us"].to_numpy(dtype=np.float64)[pick],
                   request_size_sectors=request_size_sectors[pick].astype(np.int32),
                   misaligned=requests["sector"].to_numpy()[pick] % 8 != 0)

    def __getitem__(self, mask: np.ndarray) -> "Pieces":
        return Pieces(**{f.name: getattr(self, f.name)[mask] for f in fields(self)})

    def __len__(self) -> int:
        return len(self.space)


def page_counts(space: np.ndarray, first_page: np.ndarray, last_page: np.ndarray) -> tuple[int, int]:
    """(pages accessed with repetition, distinct pages) of page ranges; see PageUnion."""
    union = PageUnion()
    union.add(space, first_page, last_page, np.ones(len(space), dtype=bool))
    return int((last_page - first_page + 1).sum()), union.distinct()


class PageUnion:
    """The distinct pages of page ranges given in chunks: the union of the ranges in each space, kept as
    disjoint runs of pages in page order (space, first page, last page), so that memory follows the number
    of runs, never the ranges' sizes or count. The runs are kept in levels, each less than twice the size
    of the one after it: a chunk's ranges become a level, and levels of like size merge, so that a range
    is merged about log2(chunks) times, not once for every chunk after it."""

    def __init__(self):
        self.levels: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def add(self, space: np.ndarray, first_page: np.ndarray, last_page: np.ndarray, keep: np.ndarray) -> None:
        """The ranges where keep is true (a mask, so that the ranges of reads and of writes need no copies)."""
        if not keep.any():
            return
        if not _in_page_order(space, first_page):
            order = page_order(space, first_page)
            space, first_page, last_page, keep = space[order], first_page[order], last_page[order], keep[order]
        self.levels.append(_runs(space, first_page, last_page, keep))
        while len(self.levels) > 1 and 2 * len(self.levels[-1][0]) >= len(self.levels[-2][0]):
            self._merge_last()

    def runs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every run, in one level."""
        while len(self.levels) > 1:
            self._merge_last()
        return self.levels[0] if self.levels else _NO_RUNS

    def distinct(self) -> int:
        _, first, last = self.runs()
        return int((last - first + 1).sum())

    def _merge_last(self) -> None:
        newer = self.levels.pop()
        self.levels.append(_merged_runs(*self.levels.pop(), *newer))


_NO_RUNS = (np.empty(0, np.int32), np.empty(0, np.int64), np.empty(0, np.int64))


def union_pages(one: PageUnion, other: PageUnion) -> int:
    """The distinct pages of both unions together."""
    return int(_union_pages(*one.runs(), *other.runs()))


@numba.njit(cache=True, nogil=True)
def _next_range(a_space, a_first, a_last, i, b_space, b_first, b_last, j):
    """Two lists of ranges in page order walked together: the next range (space, first, last) and the two
    positions after it."""
    if j == len(b_space) or (i < len(a_space) and (a_space[i] < b_space[j] or (
            a_space[i] == b_space[j] and a_first[i] <= b_first[j]))):
        return np.int64(a_space[i]), a_first[i], a_last[i], i + 1, j
    return np.int64(b_space[j]), b_first[j], b_last[j], i, j + 1


@numba.njit(cache=True, nogil=True)
def _union_pages(a_space, a_first, a_last, b_space, b_first, b_last):
    """The pages of the union of two sets of disjoint runs in page order, walked together without a copy."""
    i = j = 0
    total = 0
    open_run = False
    space = first = last = 0
    while i < len(a_space) or j < len(b_space):
        one_space, one_first, one_last, i, j = _next_range(a_space, a_first, a_last, i, b_space, b_first, b_last, j)
        if open_run and one_space == space and one_first <= last + 1:
            last = max(last, one_last)
        else:
            if open_run:
                total += last - first + 1
            open_run = True
            space, first, last = one_space, one_first, one_last
    if open_run:
        total += last - first + 1
    return total


@numba.njit(cache=True, nogil=True)
def _runs(space, first_page, last_page, keep):
    """The disjoint runs of the kept ranges, in page order (touching ones join)."""
    kept = 0
    for i in range(len(keep)):
        kept += keep[i]
    out_space = np.empty(kept, np.int32)
    out_first = np.empty(kept, np.int64)
    out_last = np.empty(kept, np.int64)
    k = -1
    for i in range(len(space)):
        if keep[i]:
            k = _joined(out_space, out_first, out_last, k, space[i], first_page[i], last_page[i])
    return _kept(out_space, out_first, out_last, k + 1)


@numba.njit(cache=True, nogil=True, inline="always")
def _joined(out_space, out_first, out_last, k, space, first, last):
    """A range that comes after run k in page order, joined to run k where it touches it, else made run k + 1;
    returns the last run's number."""
    if k >= 0 and space == out_space[k] and first <= out_last[k] + 1:
        out_last[k] = max(out_last[k], last)
        return k
    out_space[k + 1], out_first[k + 1], out_last[k + 1] = space, first, last
    return k + 1


@numba.njit(cache=True, nogil=True)
def _kept(out_space, out_first, out_last, runs):
    """The first `runs` of arrays made for more: copies where they would hold much less than the arrays."""
    if 2 * runs >= len(out_space):
        return out_space[:runs], out_first[:runs], out_last[:runs]
    return out_space[:runs].copy(), out_first[:runs].copy(), out_last[:runs].copy()


@numba.njit(cache=True, nogil=True)
def _merged_runs(run_space, run_first, run_last, space, first_page, last_page):
    """Disjoint runs and ranges, both in page order, merged into disjoint runs (touching ones join)."""
    total = len(run_space) + len(space)
    out_space = np.empty(total, np.int32)
    out_first = np.empty(total, np.int64)
    out_last = np.empty(total, np.int64)
    i = j = 0
    k = -1
    while i < len(run_space) or j < len(space):
        one_space, first, last, i, j = _next_range(run_space, run_first, run_last, i, space, first_page, last_page, j)
        k = _joined(out_space, out_first, out_last, k, one_space, first, last)
    return _kept(out_space, out_first, out_last, k + 1)


def page_order(space: np.ndarray, first_page: np.ndarray) -> np.ndarray:
    """Positions by space, then by first page (np.lexsort is three times slower; ties need no order)."""
    by_page = _increasing(first_page)
    if not len(space) or (space == space[0]).all():     # one device, or one object: no second sort
        return by_page
    spaces = space - space.min(initial=0)
    return by_page[np.argsort(spaces.astype(np.min_scalar_type(spaces.max(initial=0)))[by_page], kind="stable")]


def _increasing(values: np.ndarray) -> np.ndarray:
    """Positions of integers in increasing order, ties in the order of their positions: where the values
    leave room, a sort of the values with their positions in the low bits, three times faster than
    np.argsort."""
    n = len(values)
    bits = max(1, (n - 1).bit_length())
    if not n or values.min() < 0 or values.max() >= 1 << (63 - bits):
        return np.argsort(values, kind="stable")
    packed = values.astype(np.int64) << bits
    packed |= np.arange(n)
    packed.sort()
    packed &= (1 << bits) - 1
    return packed


@numba.njit(cache=True, nogil=True)
def _in_page_order(space, first_page):
    for i in range(1, len(space)):
        if space[i] < space[i - 1] or (space[i] == space[i - 1] and first_page[i] < first_page[i - 1]):
            return False
    return True


def repeat_access_rate(pieces: Pieces) -> float:
    total, distinct = page_counts(pieces.space, pieces.first_page, pieces.last_page)
    return total / distinct if distinct else float("nan")


class Streams:
    """Per device, the ends of its last `window` requests not yet continued (oldest first): what the
    sequential test remembers from one chunk of a trace to the next."""

    def __init__(self, devices: int, window: int = STREAM_WINDOW):
        self.ends = np.empty((devices, window), np.int64)
        self.lengths = np.zeros(devices, np.int64)

    def cover(self, devices: int) -> None:
        """Room for devices numbered below `devices` (a device first seen in a later chunk starts afresh)."""
        if devices > len(self.lengths):
            self.ends = np.concatenate([self.ends, np.empty((devices - len(self.lengths), self.ends.shape[1]), np.int64)])
            self.lengths = np.concatenate([self.lengths, np.zeros(devices - len(self.lengths), np.int64)])


def sequential_flags(requests: pd.DataFrame, page_bytes: int, window: int = STREAM_WINDOW,
                     streams: Streams | None = None) -> np.ndarray:
    """Block-level proxy of read-ahead: a request is sequential if it starts where one of the last `window`
    requests to the same device ended (that end then continues this request's stream, and is no longer
    waited on), or spans more than one page. `streams` carries the state from an earlier chunk of the
    same trace (its devices numbered alike: see device_codes); without it, every stream starts afresh."""
    return sequential_of(requests["ts_s"].to_numpy(), device_codes(requests["device"]),
                         requests["sector"].to_numpy(dtype=np.int64), requests["size_sectors"].to_numpy(dtype=np.int64),
                         page_bytes, window, streams)


def sequential_of(ts_s: np.ndarray, devices: np.ndarray, sector: np.ndarray, size_sectors: np.ndarray,
                  page_bytes: int, window: int = STREAM_WINDOW, streams: Streams | None = None) -> np.ndarray:
    """sequential_flags of requests given as arrays (devices: their codes)."""
    order = None if (ts_s[1:] >= ts_s[:-1]).all() else np.argsort(ts_s, kind="stable")
    pick = slice(None) if order is None else order
    devices = devices.astype(np.int64)
    streams = streams or Streams(0, window)
    streams.cover(int(devices.max(initial=-1)) + 1)
    starts, sizes = sector[pick], size_sectors[pick]
    continued = _continued(devices[pick], starts, starts + sizes, streams.ends, streams.lengths)
    flags = continued | (sizes > page_bytes // SECTOR_BYTES)
    if order is None:
        return flags
    in_place = np.empty(len(order), dtype=bool)
    in_place[order] = flags
    return in_place


def device_codes(device: pd.Series) -> np.ndarray:
    """A number per device: the categories' codes of a categorical column (the same in every slice of a
    trace), else numbered as they first occur."""
    if isinstance(device.dtype, pd.CategoricalDtype):
        return device.cat.codes.to_numpy()
    return pd.factorize(device)[0]


@numba.njit(cache=True, nogil=True)
def _continued(devices, starts, ends, queues, lengths):
    """Per request in time order, whether it starts where one of its device's remembered request ends
    lies (oldest first); a matched end leaves the queue, a full queue drops its oldest."""
    window = queues.shape[1]
    found = np.zeros(len(starts), np.bool_)
    for i in range(len(starts)):
        queue = queues[devices[i]]
        length = lengths[devices[i]]
        for j in range(length):
            if queue[j] == starts[i]:
                found[i] = True
                _drop(queue, j, length)
                length -= 1
                break
        if length == window:
            _drop(queue, 0, length)
            length -= 1
        queue[length] = ends[i]
        lengths[devices[i]] = length + 1
    return found


@numba.njit(cache=True, nogil=True, inline="always")
def _drop(queue, j, length):
    """Remove queue[j] of the first `length`, the later ones moving up (a loop: a slice copy would take a
    temporary array, as the two slices overlap)."""
    for m in range(j, length - 1):
        queue[m] = queue[m + 1]


def mark_sequential(requests: pd.DataFrame, page_bytes: int, window: int = STREAM_WINDOW) -> np.ndarray:
    """Per piece (see attribute), whether its read request is sequential; writes are not."""
    request = requests["request"].to_numpy()
    heads = ((requests["piece"] == 0) & (requests["op"] == "R")).to_numpy()
    whole = requests.loc[heads, ["ts_s", "device", "sector", "request_size_sectors"]]
    by_request = np.zeros(request.max(initial=-1) + 1, dtype=bool)
    by_request[request[heads]] = sequential_flags(whole.rename(columns={"request_size_sectors": "size_sectors"}),
                                                  page_bytes, window)
    return by_request[request]


class InFlight:
    """io_time_s: the time with at least one request in flight (the union of the dispatch-to-completion
    intervals); inflight_mean and inflight_max: the requests in flight, time-weighted while busy, and at
    most. Requests come in chunks in dispatch time (each chunk's dispatches at or after the last one's; in
    any order within a chunk); those without a completion (NaN latency) are left out.

    The dispatches and the completions, each sorted on its own, are swept in time order (a completion at
    the same instant as a dispatch first, so back-to-back requests are not overlap): the depth is the
    requests dispatched so far less those completed; the time with a depth above zero is busy; the time
    integral of the depth is the sum of the latencies, so the mean is that sum over the busy time."""

    def __init__(self):
        self.busy_s = self.latency_sum_us = 0.0
        self.swept_to = -np.inf         # the time of the last event swept
        self.dispatched = self.completed = self.peak = 0
        self.pending = np.empty(0)      # completion times after the last dispatch, sorted

    def add(self, ts_s: np.ndarray, latency_us: np.ndarray) -> None:
        done = ~np.isnan(latency_us)
        if not done.any():
            return
        starts, latency_us = ts_s[done], latency_us[done]
        ends = np.sort(np.concatenate([self.pending, starts + latency_us / 1e6]))
        if not (starts[1:] >= starts[:-1]).all():
            starts = np.sort(starts)
        peak, gone, busy_s, self.swept_to = _sweep(starts, ends, self.dispatched - self.completed, self.swept_to)
        self.peak = max(self.peak, peak)
        self.busy_s += busy_s
        self.latency_sum_us += float(latency_us.sum())
        self.dispatched += len(starts)
        self.completed += gone
        self.pending = ends[gone:]

    def summary(self) -> dict:
        # after the last dispatch the depth only falls: busy until the last completion
        busy_s = self.busy_s + (self.pending[-1] - self.swept_to if len(self.pending) else 0.0)
        return {"io_time_s": busy_s,
                "inflight_mean": self.latency_sum_us / 1e6 / busy_s if busy_s > 0 else float("nan"),
                "inflight_max": self.peak}


@numba.njit(cache=True, nogil=True)
def _sweep(starts, ends, in_flight, swept_to):
    """Dispatches (sorted) and completions (sorted, those of the in_flight requests dispatched before
    included) swept in time order from swept_to up to the last dispatch: the most requests in flight at a
    dispatch, how many completions come at or before the last dispatch, the time with a request in flight,
    and the time of the last event."""
    peak = 0
    gone = 0
    busy = 0.0
    for i in range(len(starts)):
        while gone < len(ends) and ends[gone] <= starts[i]:
            if in_flight + i - gone > 0:
                busy += ends[gone] - swept_to
            swept_to = ends[gone]
            gone += 1
        if in_flight + i - gone > 0:
            busy += starts[i] - swept_to
        swept_to = starts[i]
        peak = max(peak, in_flight + i + 1 - gone)
    return peak, gone, busy, swept_to


def size_histogram(pieces: Pieces) -> pd.DataFrame:
    """Requests per size bucket: `size_le_bytes` is the bucket's upper bound (inclusive); the last is open."""
    sizes = pieces.request_size_sectors[pieces.head].astype(np.int64) * SECTOR_BYTES
    counts = np.bincount(np.searchsorted(SIZE_BUCKETS_BYTES, sizes, side="left"), minlength=len(SIZE_BUCKETS_BYTES) + 1)
    found = counts > 0
    return pd.DataFrame({"size_le_bytes": np.array([*SIZE_BUCKETS_BYTES, -1])[found], "requests": counts[found]})


def latency_histogram(latency_us: np.ndarray) -> np.ndarray:
    """Requests per bucket of LATENCY_EDGES_US; requests without a completion (NaN) are left out."""
    values = latency_us[~np.isnan(latency_us)]
    bucket = np.minimum(np.searchsorted(LATENCY_EDGES_US, values, side="left"), len(LATENCY_EDGES_US) - 1)
    return np.bincount(bucket, minlength=len(LATENCY_EDGES_US))


@numba.njit(cache=True, nogil=True)
def _tally(first_page, last_page, read, write, sequential, head, size_sectors, misaligned):
    """AccessTotals' counts of pieces, in the order of TALLIED: pages of every piece; requests, their bytes,
    tiny (under 4 KiB) and misaligned ones from the heads."""
    tally = np.zeros(len(TALLIED), np.int64)
    for i in range(len(first_page)):
        pages = last_page[i] - first_page[i] + 1
        tally[0] += pages
        if read[i]:
            tally[1] += pages
            if sequential[i]:
                tally[2] += pages
        if head[i]:
            tally[3] += 1
            if read[i]:
                tally[4] += 1
                tally[6] += size_sectors[i] * SECTOR_BYTES
            if write[i]:
                tally[5] += 1
                tally[7] += size_sectors[i] * SECTOR_BYTES
            tally[8] += size_sectors[i] < 8
            tally[9] += misaligned[i]
    return tally


class AccessTotals:
    """The access-pattern metrics of a set of request pieces given in one or more chunks (in dispatch
    order; see InFlight), every figure exact whatever the chunking. Page metrics count every piece;
    request-level metrics (counts, sizes, latency, busy time) read the heads (piece 0) with the
    request's whole size."""

    def __init__(self):
        self.counts = dict.fromkeys(TALLIED, 0)
        # reads and writes apart: the read pages are a metric of their own, and all pages their union
        self.read_pages, self.write_pages = PageUnion(), PageUnion()
        self.flight = InFlight()
        self.latencies: list[np.ndarray] = []

    def add(self, pieces: Pieces) -> None:
        read = pieces.read
        tally = _tally(pieces.first_page, pieces.last_page, read, pieces.write, pieces.sequential, pieces.head,
                       pieces.request_size_sectors, pieces.misaligned)
        for key, value in zip(TALLIED, tally.tolist(), strict=True):
            self.counts[key] += value
        self.read_pages.add(pieces.space, pieces.first_page, pieces.last_page, read)
        self.write_pages.add(pieces.space, pieces.first_page, pieces.last_page, ~read)
        head = pieces.head
        ts_s, latency = (pieces.ts_s, pieces.latency_us) if head.all() else (pieces.ts_s[head], pieces.latency_us[head])
        self.flight.add(ts_s, latency)
        self.latencies.append(latency[~np.isnan(latency)])

    def summary(self, random_threshold: float = RANDOM_PCT_THRESHOLD, repeat_threshold: float = REPEAT_THRESHOLD) -> dict:
        return access_figures(self.counts, union_pages(self.read_pages, self.write_pages), self.read_pages.distinct(),
                              self.flight.summary(), self._latencies(), random_threshold, repeat_threshold)

    def _latencies(self) -> np.ndarray:
        """Every chunk's latencies in one array, which then replaces the chunks' (one copy held, not two)."""
        self.latencies = [np.concatenate(self.latencies) if self.latencies else np.empty(0)]
        return self.latencies[0]


def access_summary(pieces: Pieces, random_threshold: float = RANDOM_PCT_THRESHOLD,
                   repeat_threshold: float = REPEAT_THRESHOLD) -> dict:
    """The access-pattern metrics of one set of request pieces (a query, a query x table, a tier): see AccessTotals."""
    totals = AccessTotals()
    totals.add(pieces)
    return totals.summary(random_threshold, repeat_threshold)


def contention(requests: pd.DataFrame, rows: np.ndarray) -> dict:
    """How the requests of a requests frame at rows (a mask: one tier's) meet in flight, each once from its
    head piece: crowded_pct, the share of requests dispatched while another one that started in the same
    4 KiB chunk of the device was still in flight; reads_beside_writes_pct, the share of reads dispatched
    while a write to the same device was in flight. A request whose latency is unknown (a time jump) counts
    as never in flight."""
    heads = rows & (requests["piece"].to_numpy() == 0)
    device = device_codes(requests["device"])[heads].astype(np.int64)
    ts = requests["ts_s"].to_numpy(dtype=np.float64)[heads]
    end = ts + np.nan_to_num(requests["latency_us"].to_numpy(dtype=np.float64)[heads]) / 1e6
    # one number per device and chunk: sectors stay below 2^54 (requests past 2^63 bytes are left out)
    chunk = requests["sector"].to_numpy(dtype=np.int64)[heads] // CHUNK_SECTORS * (device.max(initial=0) + 1) + device
    # by chunk, then by time: a trace's requests come in dispatch order, so sorting by chunk keeps their order
    by_time = np.arange(len(ts)) if (ts[1:] >= ts[:-1]).all() else np.argsort(ts, kind="stable")
    order = by_time[_increasing(chunk[by_time])]
    crowded = _crowded(chunk[order], ts[order], end[order])
    reads, writes = (requests["op"] == "R").to_numpy()[heads], (requests["op"] == "W").to_numpy()[heads]
    beside = 0
    for code in np.unique(device[reads & np.isin(device, device[writes])]):
        started, ended = np.sort(ts[writes & (device == code)]), np.sort(end[writes & (device == code)])
        at = ts[reads & (device == code)]
        beside += int((np.searchsorted(started, at, "left") - np.searchsorted(ended, at, "right") > 0).sum())
    return {"crowded_pct": 100.0 * crowded / len(ts) if len(ts) else float("nan"),
            "reads_beside_writes_pct": 100.0 * beside / reads.sum() if reads.any() else float("nan")}


@numba.njit(cache=True, nogil=True)
def _crowded(chunk, ts, end):
    """How many requests, sorted by chunk and then dispatch time, start while an earlier request of their
    chunk is still in flight."""
    crowded = 0
    latest = -np.inf
    for i in range(len(chunk)):
        if i and chunk[i] == chunk[i - 1]:
            crowded += ts[i] < latest
            latest = max(latest, end[i])
        else:
            latest = end[i]
    return crowded
