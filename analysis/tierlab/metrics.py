"""The metrics of STUDY.md section 2, as pure functions of request pieces.

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

SECTOR_BYTES = 512
STREAM_WINDOW = 8
RANDOM_PCT_THRESHOLD = 50.0
REPEAT_THRESHOLD = 1.1
LATENCY_QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p99_9": 0.999, "p99_99": 0.9999}
CATEGORIES = {
    (True, True): "1 random repeated",
    (True, False): "2 random",
    (False, False): "3 sequential",
    (False, True): "4 sequential repeated",
}
SIZE_BUCKETS_BYTES = [512, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576]
# upper bounds (inclusive) of latency buckets: 100 per decade from 0.01 us to 1000 s, so that a run's latency
# distribution is kept in a fixed size whatever its number of requests (each bound within 2.3% of the next)
LATENCY_EDGES_US = 10.0 ** (np.arange(-200, 901) / 100)


@dataclass
class Pieces:
    """Per piece, in page order (see page_order), which subsets keep, so that the page counts of a query,
    its tiers and its tables sort once: its row in the requests frame it came from, its page space (a
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
        devices, _ = pd.factorize(requests["device"])
        return cls._in_page_order(requests, page_bytes, space=np.where(mapped, objects, -1 - devices),
                                  start_bytes=np.where(mapped, np.nan_to_num(offset), sector * SECTOR_BYTES).astype(np.int64),
                                  head=requests["piece"].to_numpy() == 0,
                                  request_size_sectors=requests["request_size_sectors"].to_numpy(),
                                  sequential=requests["sequential"].to_numpy(dtype=bool))

    @classmethod
    def of_requests(cls, requests: pd.DataFrame, sequential: np.ndarray, page_bytes: int) -> "Pieces":
        """The requests of a trace with no file map (one piece each, device-aligned pages), and their
        sequential flags."""
        devices, _ = pd.factorize(requests["device"])
        return cls._in_page_order(requests, page_bytes, space=-1 - devices,
                                  start_bytes=requests["sector"].to_numpy(dtype=np.int64) * SECTOR_BYTES,
                                  head=np.ones(len(requests), dtype=bool),
                                  request_size_sectors=requests["size_sectors"].to_numpy(), sequential=sequential)

    @classmethod
    def _in_page_order(cls, requests: pd.DataFrame, page_bytes: int, space: np.ndarray, start_bytes: np.ndarray,
                       head: np.ndarray, request_size_sectors: np.ndarray, sequential: np.ndarray) -> "Pieces":
        first_page = start_bytes // page_bytes
        order = page_order(space, first_page)
        sizes = requests["size_sectors"].to_numpy(dtype=np.int64)[order]
        # 4-byte numbers where the range allows: memory is what bounds the largest trace
        return cls(row=order.astype(np.min_scalar_type(len(order))), space=space[order].astype(np.int32),
                   first_page=first_page[order], last_page=(start_bytes[order] + sizes * SECTOR_BYTES - 1) // page_bytes,
                   read=(requests["op"] == "R").to_numpy()[order], write=(requests["op"] == "W").to_numpy()[order],
                   sequential=sequential[order], head=head[order],
                   ts_s=requests["ts_s"].to_numpy(dtype=np.float64)[order],
                   latency_us=requests["latency_us"].to_numpy(dtype=np.float64)[order],
                   request_size_sectors=request_size_sectors[order].astype(np.int32),
                   misaligned=requests["sector"].to_numpy()[order] % 8 != 0)

    def __getitem__(self, mask: np.ndarray) -> "Pieces":
        return Pieces(**{f.name: getattr(self, f.name)[mask] for f in fields(self)})

    def __len__(self) -> int:
        return len(self.space)


def page_counts(space: np.ndarray, first_page: np.ndarray, last_page: np.ndarray) -> tuple[int, int]:
    """(pages accessed with repetition, distinct pages). Distinct pages are the size of the union of the
    pieces' page ranges in each space, so that memory follows the number of pieces, not their sizes."""
    if not len(space):
        return 0, 0
    if not _in_page_order(space, first_page):
        order = page_order(space, first_page)
        space, first_page, last_page = space[order], first_page[order], last_page[order]
    bounds = np.flatnonzero(np.diff(space)) + 1
    distinct = 0
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(space)], strict=True):
        begin, end = first_page[lo:hi], last_page[lo:hi]
        # by first page: each range adds the pages beyond the furthest one an earlier range reached
        reached = np.maximum.accumulate(end)
        before = np.r_[begin[0] - 1, np.maximum(reached[:-1], begin[1:] - 1)]
        distinct += int((end - before).clip(min=0).sum())
    return int((last_page - first_page + 1).sum()), distinct


def page_order(space: np.ndarray, first_page: np.ndarray) -> np.ndarray:
    """Positions by space, then by first page (np.lexsort is three times slower; ties need no order)."""
    by_page = np.argsort(first_page)
    spaces = space - space.min(initial=0)
    return by_page[np.argsort(spaces.astype(np.min_scalar_type(spaces.max(initial=0)))[by_page], kind="stable")]


def _in_page_order(space: np.ndarray, first_page: np.ndarray) -> bool:
    same = space[1:] == space[:-1]
    return bool(((space[1:] > space[:-1]) | (same & (first_page[1:] >= first_page[:-1]))).all())


def repeat_access_rate(pieces: Pieces) -> float:
    total, distinct = page_counts(pieces.space, pieces.first_page, pieces.last_page)
    return total / distinct if distinct else float("nan")


def sequential_flags(requests: pd.DataFrame, page_bytes: int, window: int = STREAM_WINDOW) -> np.ndarray:
    """Block-level proxy of read-ahead: a request is sequential if it starts where one of the last `window`
    requests to the same device ended (that end then continues this request's stream, and is no longer
    waited on), or spans more than one page."""
    order = np.argsort(requests["ts_s"].to_numpy(), kind="stable")
    devices = pd.factorize(requests["device"])[0][order]
    starts = requests["sector"].to_numpy(dtype=np.int64)[order]
    sizes = requests["size_sectors"].to_numpy(dtype=np.int64)[order]
    continued = _continued(devices.astype(np.int64), starts, starts + sizes, window, devices.max(initial=-1) + 1)
    flags = np.empty(len(order), dtype=bool)
    flags[order] = continued | (sizes > page_bytes // SECTOR_BYTES)
    return flags


@numba.njit(cache=True)
def _continued(devices, starts, ends, window, device_count):
    """Per request in time order, whether it starts where one of its device's last `window` unmatched
    request ends lies (oldest first); a matched end leaves the queue, a full queue drops its oldest."""
    queues = np.empty((device_count, window), np.int64)
    lengths = np.zeros(device_count, np.int64)
    found = np.zeros(len(starts), np.bool_)
    for i in range(len(starts)):
        queue = queues[devices[i]]
        length = lengths[devices[i]]
        for j in range(length):
            if queue[j] == starts[i]:
                found[i] = True
                queue[j:length - 1] = queue[j + 1:length]
                length -= 1
                break
        if length == window:
            queue[:length - 1] = queue[1:length]
            length -= 1
        queue[length] = ends[i]
        lengths[devices[i]] = length + 1
    return found


def mark_sequential(requests: pd.DataFrame, page_bytes: int, window: int = STREAM_WINDOW) -> np.ndarray:
    """Per piece (see attribute), whether its read request is sequential; writes are not."""
    request = requests["request"].to_numpy()
    heads = ((requests["piece"] == 0) & (requests["op"] == "R")).to_numpy()
    whole = requests.loc[heads, ["ts_s", "device", "sector", "request_size_sectors"]]
    by_request = np.zeros(request.max(initial=-1) + 1, dtype=bool)
    by_request[request[heads]] = sequential_flags(whole.rename(columns={"request_size_sectors": "size_sectors"}),
                                                  page_bytes, window)
    return by_request[request]


def in_flight(ts_s: np.ndarray, latency_us: np.ndarray) -> dict[str, float]:
    """io_time_s: the time with at least one request in flight (the union of the dispatch-to-completion
    intervals); inflight_mean and inflight_max: the requests in flight, time-weighted while busy, and at
    most. Requests without a completion (NaN latency) are left out.

    The time integral of the depth is the sum of the latencies, so the mean is that sum over the busy
    time; the depth peaks at a dispatch, where it is the requests dispatched so far less those completed
    by then (a completion at the same instant first, so back-to-back requests are not overlap)."""
    done = ~np.isnan(latency_us)
    if not done.any():
        return {"io_time_s": 0.0, "inflight_mean": float("nan"), "inflight_max": 0}
    order = np.argsort(ts_s[done])
    starts = ts_s[done][order]
    ends = starts + latency_us[done][order] / 1e6
    covered_to = np.maximum.accumulate(ends)
    # a new busy period starts where a request begins after everything before it ended
    gaps = np.maximum(starts[1:] - covered_to[:-1], 0)
    busy = float(covered_to[-1] - starts[0] - gaps.sum())
    depth = np.arange(1, len(starts) + 1) - np.searchsorted(np.sort(ends), starts, side="right")
    return {"io_time_s": busy, "inflight_mean": float(latency_us[done].sum() / 1e6 / busy) if busy > 0 else float("nan"),
            "inflight_max": int(depth.max())}


def size_histogram(pieces: Pieces) -> pd.DataFrame:
    """Requests per size bucket: `size_le_bytes` is the bucket's upper bound (inclusive); the last is open."""
    sizes = pieces.request_size_sectors[pieces.head].astype(np.int64) * SECTOR_BYTES
    labels = np.array([*SIZE_BUCKETS_BYTES, -1])[np.searchsorted(SIZE_BUCKETS_BYTES, sizes, side="left")]
    counts = pd.Series(labels).value_counts()
    return pd.DataFrame({"size_le_bytes": counts.index, "requests": counts.to_numpy()}).sort_values(
        "size_le_bytes", key=lambda s: s.where(s >= 0, np.iinfo(np.int64).max)).reset_index(drop=True)


def latency_histogram(latency_us: np.ndarray) -> np.ndarray:
    """Requests per bucket of LATENCY_EDGES_US; requests without a completion (NaN) are left out."""
    values = latency_us[~np.isnan(latency_us)]
    bucket = np.minimum(np.searchsorted(LATENCY_EDGES_US, values, side="left"), len(LATENCY_EDGES_US) - 1)
    return np.bincount(bucket, minlength=len(LATENCY_EDGES_US))


def latency_percentiles(latency_us: np.ndarray) -> dict[str, float]:
    values = latency_us[~np.isnan(latency_us)]
    if not len(values):
        return {f"latency_{k}_us": float("nan") for k in LATENCY_QUANTILES}
    found = np.quantile(values, list(LATENCY_QUANTILES.values()))
    return {f"latency_{k}_us": float(v) for k, v in zip(LATENCY_QUANTILES, found, strict=True)}


def category(random_pct: float, repeat_rate: float,
             random_threshold: float = RANDOM_PCT_THRESHOLD, repeat_threshold: float = REPEAT_THRESHOLD) -> str:
    if np.isnan(random_pct):
        return "no reads"
    return CATEGORIES[(random_pct > random_threshold, repeat_rate > repeat_threshold)]


def access_summary(pieces: Pieces, random_threshold: float = RANDOM_PCT_THRESHOLD,
                   repeat_threshold: float = REPEAT_THRESHOLD) -> dict:
    """The access-pattern metrics of one set of request pieces (a query, a query x table, a trace).

    Page metrics count every piece; request-level metrics (counts, sizes, latency, busy time) read
    the heads (piece 0) with the request's whole size."""
    pages, distinct = page_counts(pieces.space, pieces.first_page, pieces.last_page)
    read = pieces.read
    read_pages, read_distinct = page_counts(pieces.space[read], pieces.first_page[read], pieces.last_page[read])
    sequential = read & pieces.sequential
    sequential_pages = int((pieces.last_page[sequential] - pieces.first_page[sequential] + 1).sum())
    sequential_pct = 100.0 * sequential_pages / read_pages if read_pages else float("nan")
    random_pct = 100.0 - sequential_pct if read_pages else float("nan")
    repeat_rate = pages / distinct if distinct else float("nan")
    head = pieces.head
    sizes, head_read, head_write = pieces.request_size_sectors[head], read[head], pieces.write[head]
    return {
        "requests": len(sizes),
        "read_requests": int(head_read.sum()),
        "write_requests": int(head_write.sum()),
        "read_bytes": int(sizes[head_read].sum() * SECTOR_BYTES),
        "write_bytes": int(sizes[head_write].sum() * SECTOR_BYTES),
        "pages": pages,
        "distinct_pages": distinct,
        "read_pages": read_pages,
        "distinct_read_pages": read_distinct,
        "sequential_pct": sequential_pct,
        "random_pct": random_pct,
        "repeat_access_rate": repeat_rate,
        "read_repeat_access_rate": read_pages / read_distinct if read_distinct else float("nan"),
        "category": category(random_pct, repeat_rate, random_threshold, repeat_threshold),
        "tiny_pct": 100.0 * float((sizes < 8).mean()) if len(sizes) else float("nan"),
        "misaligned_pct": 100.0 * float(pieces.misaligned[head].mean()) if len(sizes) else float("nan"),
        **in_flight(pieces.ts_s[head], pieces.latency_us[head]),
        **latency_percentiles(pieces.latency_us[head]),
    }
