"""The metrics of STUDY.md section 2, as pure functions of a requests frame.

The frame has one row per dispatched data request (see parse_ftrace), plus
`object` and `file_offset_bytes` from attribution. Pages are aligned to the
start of the file that holds them, or to the device where no file is known.
"""

from collections import deque

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


def page_spans(requests: pd.DataFrame, page_bytes: int) -> pd.DataFrame:
    """Per request: the page space it lives in (an object, or a device where no file is known; a number)
    and its first and last page."""
    mapped = requests["file_offset_bytes"].notna().to_numpy()
    start = np.where(mapped, requests["file_offset_bytes"].fillna(0).to_numpy(),
                     requests["sector"].to_numpy() * SECTOR_BYTES).astype(np.int64)
    end = start + requests["size_sectors"].to_numpy() * SECTOR_BYTES - 1
    # a number per page space: 0, 1, ... for the objects, -1, -2, ... for the devices' unmapped space
    objects, _ = pd.factorize(requests["object"])
    devices, _ = pd.factorize(requests["device"])
    space = np.where(mapped, objects, -1 - devices)
    return pd.DataFrame({"space": space, "first_page": start // page_bytes, "last_page": end // page_bytes},
                        index=requests.index)


def page_counts(spans: pd.DataFrame) -> tuple[int, int]:
    """(pages accessed with repetition, distinct pages). Distinct pages are the size of the union of the
    requests' page ranges in each space, so that memory follows the number of requests, not their sizes."""
    if spans.empty:
        return 0, 0
    codes, _ = pd.factorize(spans["space"])
    first, last = spans["first_page"].to_numpy(), spans["last_page"].to_numpy()
    distinct = 0
    for space in range(codes.max() + 1):
        mine = codes == space
        order = np.argsort(first[mine], kind="stable")
        begins, ends = first[mine][order], last[mine][order]
        # by first page: each range adds the pages beyond the furthest one an earlier range reached
        reached = np.maximum.accumulate(ends)
        before = np.r_[begins[0] - 1, np.maximum(reached[:-1], begins[1:] - 1)]
        distinct += int((ends - before).clip(min=0).sum())
    return int((last - first + 1).sum()), distinct


def repeat_access_rate(spans: pd.DataFrame) -> float:
    total, distinct = page_counts(spans)
    return total / distinct if distinct else float("nan")


def sequential_flags(requests: pd.DataFrame, page_bytes: int, window: int = STREAM_WINDOW) -> np.ndarray:
    """Block-level proxy of read-ahead: a request is sequential if it starts where one of the last `window`
    requests to the same device ended (that end then continues this request's stream, and is no longer
    waited on), or spans more than one page."""
    order = np.argsort(requests["ts_s"].to_numpy(), kind="stable")
    devices, _ = pd.factorize(requests["device"].to_numpy()[order])
    starts = requests["sector"].to_numpy()[order]
    sizes = requests["size_sectors"].to_numpy()[order]
    continued = np.zeros(len(order), dtype=bool)
    for device in range(devices.max(initial=-1) + 1):
        mine = np.flatnonzero(devices == device)
        continued[mine] = _continued(starts[mine].tolist(), (starts[mine] + sizes[mine]).tolist(), window)
    flags = np.empty(len(order), dtype=bool)
    flags[order] = continued | (sizes > page_bytes // SECTOR_BYTES)
    return flags


def _continued(starts: list[int], ends: list[int], window: int) -> list[bool]:
    """Per request of one device, whether it starts where one of the last `window` requests ended."""
    recent: deque = deque(maxlen=window)
    found = []
    for start, end in zip(starts, ends, strict=True):
        if start in recent:
            recent.remove(start)
            found.append(True)
        else:
            found.append(False)
        recent.append(end)
    return found


def mark_sequential(requests: pd.DataFrame, page_bytes: int, window: int = STREAM_WINDOW) -> np.ndarray:
    """Per piece (see attribute), whether its read request is sequential; writes are not."""
    heads = requests[(requests["piece"] == 0) & (requests["op"] == "R")]
    whole = heads.assign(size_sectors=heads["request_size_sectors"])
    sequential = pd.Series(sequential_flags(whole, page_bytes, window), index=heads["request"].to_numpy())
    return requests["request"].map(sequential).fillna(False).to_numpy(dtype=bool)


def busy_time_s(requests: pd.DataFrame) -> float:
    """Time with at least one request in flight (union of dispatch-to-completion intervals)."""
    done = requests.dropna(subset=["latency_us"])
    if done.empty:
        return 0.0
    starts = done["ts_s"].to_numpy()
    ends = starts + done["latency_us"].to_numpy() / 1e6
    order = np.argsort(starts)
    starts, ends = starts[order], ends[order]
    covered_to = np.maximum.accumulate(ends)
    # a new busy period starts where a request begins after everything before it ended
    gaps = np.maximum(starts[1:] - covered_to[:-1], 0)
    return float(covered_to[-1] - starts[0] - gaps.sum())


def inflight_depth(requests: pd.DataFrame) -> dict[str, float]:
    """Requests in flight (dispatched, not completed): time-weighted mean while busy, and maximum."""
    done = requests.dropna(subset=["latency_us"])
    if done.empty:
        return {"inflight_mean": float("nan"), "inflight_max": 0}
    starts = done["ts_s"].to_numpy()
    ends = starts + done["latency_us"].to_numpy() / 1e6
    times = np.concatenate([starts, ends])
    steps = np.concatenate([np.ones(len(starts)), -np.ones(len(ends))])
    # at equal times a completion is counted before a dispatch, so back-to-back requests are not overlap
    order = np.lexsort((steps, times))
    times, depth = times[order], np.cumsum(steps[order])
    durations = np.diff(times)
    busy = depth[:-1] > 0
    busy_time = durations[busy].sum()
    mean = float((depth[:-1][busy] * durations[busy]).sum() / busy_time) if busy_time > 0 else float("nan")
    return {"inflight_mean": mean, "inflight_max": int(depth.max())}


SIZE_BUCKETS_BYTES = [512, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576]


def size_histogram(requests: pd.DataFrame) -> pd.DataFrame:
    """Requests per size bucket: `size_le_bytes` is the bucket's upper bound (inclusive); the last is open."""
    heads = requests[requests["piece"] == 0]
    sizes = heads["request_size_sectors"].to_numpy() * SECTOR_BYTES
    bucket = np.searchsorted(SIZE_BUCKETS_BYTES, sizes, side="left")
    labels = np.array([*SIZE_BUCKETS_BYTES, -1])[bucket]
    counts = pd.Series(labels).value_counts()
    return pd.DataFrame({"size_le_bytes": counts.index, "requests": counts.to_numpy()}).sort_values(
        "size_le_bytes", key=lambda s: s.where(s >= 0, np.iinfo(np.int64).max)).reset_index(drop=True)


def latency_percentiles(latency_us: pd.Series) -> dict[str, float]:
    values = latency_us.dropna()
    if values.empty:
        return {f"latency_{k}_us": float("nan") for k in LATENCY_QUANTILES}
    return {f"latency_{k}_us": float(values.quantile(q)) for k, q in LATENCY_QUANTILES.items()}


def category(random_pct: float, repeat_rate: float,
             random_threshold: float = RANDOM_PCT_THRESHOLD, repeat_threshold: float = REPEAT_THRESHOLD) -> str:
    if np.isnan(random_pct):
        return "no reads"
    return CATEGORIES[(random_pct > random_threshold, repeat_rate > repeat_threshold)]


def access_summary(requests: pd.DataFrame, page_bytes: int,
                   random_threshold: float = RANDOM_PCT_THRESHOLD,
                   repeat_threshold: float = REPEAT_THRESHOLD) -> dict:
    """The access-pattern metrics of one set of requests (a query, a query x table, a trace).

    Rows are request pieces (see attribute): page metrics count every piece, request-level
    metrics (counts, sizes, latency, busy time) read piece 0 with request_size_sectors.
    `requests` must carry a boolean `sequential` column (see sequential_flags)."""
    heads = requests[requests["piece"] == 0]
    is_read = (requests["op"] == "R").to_numpy()
    spans = page_spans(requests, page_bytes)
    read_spans = spans[is_read]
    pages, distinct = page_counts(spans)
    read_pages, read_distinct = page_counts(read_spans)
    read_lengths = read_spans["last_page"] - read_spans["first_page"] + 1
    sequential_pages = int(read_lengths[requests["sequential"].to_numpy()[is_read]].sum())
    sequential_pct = 100.0 * sequential_pages / read_pages if read_pages else float("nan")
    random_pct = 100.0 - sequential_pct if read_pages else float("nan")
    repeat_rate = pages / distinct if distinct else float("nan")
    sizes = heads["request_size_sectors"].to_numpy()
    read_heads = heads["op"] == "R"
    write_heads = heads["op"] == "W"
    return {
        "requests": len(heads),
        "read_requests": int(read_heads.sum()),
        "write_requests": int(write_heads.sum()),
        "read_bytes": int(heads.loc[read_heads, "request_size_sectors"].sum() * SECTOR_BYTES),
        "write_bytes": int(heads.loc[write_heads, "request_size_sectors"].sum() * SECTOR_BYTES),
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
        "misaligned_pct": 100.0 * float((heads["sector"].to_numpy() % 8 != 0).mean()) if len(sizes) else float("nan"),
        "io_time_s": busy_time_s(heads),
        **inflight_depth(heads),
        **latency_percentiles(heads["latency_us"]),
    }
