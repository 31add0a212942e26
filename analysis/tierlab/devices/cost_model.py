"""The trace-driven cost model: a traced query's requests re-costed on each tier's device model.

The device model is the emulator's own (emulator/src/model.c, loaded in-process from
emulator/libtierlab-model.so), not a second one: each request is submitted at the time it was dispatched
in the traced run (in the model's time: the run's time divided by its dilation), and the model gives its
latency on the profile's device.

How a query's time follows (docs/recommend.md states the same for users):
- its non-I/O time (elapsed minus the time with a request in flight) does not depend on placement;
- its I/O time scales with the model's I/O time: each request's latency on the model times its share of
  the traced time in flight (1 alone, 1/k while k requests were in flight), summed. The requests' overlap
  stays as traced: a lookup the query waited for alone weighs its whole latency, a read-ahead burst's
  requests a part each, as the busy time they made. The model's absolute error and the run's dilation
  cancel in the ratio to the layout that was traced. On emulated tiers costed on their own models, the I/O
  time beyond the dilated model's is the host's own (replies late on a busy host) and stays as traced
  (predict.TracedQuery.host_s);
- each tier's requests under a layout are replayed together as one device's stream, because tables that
  share a device interfere: interleaved with random reads of another table, a scan loses the device's
  read-ahead (TPC-H Q3 traced with everything on nand: orders alone costs the nand model 230 ms, among
  lineitem's reads 629 ms, and 669 ms were measured);
- a table moved to the other tier keeps its offsets, apart from the other device's (no collisions);
- requests no table owns (`other`: logs, temporary files) stay on the tier they were traced on.

The block cache is an LRU of pages on the fast tier, empty when each query starts (its runs are cold), in
two policies (CACHE_POLICIES): ideal, and admitting as dm-cache and bcache do. A read request is a hit when
every page it covers is in the cache. Hits cost the fast profile, misses and writes the capacity profile;
filling the cache costs nothing.
"""

import ctypes
import functools
import json
import os
import subprocess
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import product
from pathlib import Path

import numba
import numpy as np
import pandas as pd

from ..checkout import PROJECT, require_checkout
from ..errors import DeviceProfileError, InputError
from ..metrics.attribute import OTHER
from ..metrics.patterns import SECTOR_BYTES

EMULATOR = PROJECT / "emulator" / "tierlab-emu"
MODEL_LIBRARY = EMULATOR.with_name("libtierlab-model.so")
# requests from different traced devices never share offsets on the device they are replayed on
DEVICE_SPAN_BYTES = 1 << 48
# a query reading more tables than this has too many splits between the tiers to replay each
MAX_TABLES_READ = 10
# model_replay's arguments as this module passes them (emulator/src/replay.h, REPLAY_ABI)
REPLAY_ABI = 2
# the roles a request can be served by, as the device model's replay numbers them
ROLES = ("fast", "capacity")
# the replays of one query's splits and caches run side by side: the model releases the interpreter
WORKERS = os.cpu_count() or 1


def _model(profile_file: Path, args: list[str]) -> bytes:
    """What the device model (tierlab-emu on a profile) writes for args."""
    require_checkout("the device model (tierlab-emu)")
    if not EMULATOR.exists():
        raise DeviceProfileError(f"{EMULATOR} is missing: build the emulator with `make -C {EMULATOR.parent}` "
                                 "(it needs gcc, make, pkg-config and libfuse3-dev)")
    done = subprocess.run([str(EMULATOR), "--profile", str(profile_file), *args], capture_output=True)
    if done.returncode != 0:
        raise DeviceProfileError(f"tierlab-emu {' '.join(args)} with {profile_file}: {done.stderr.decode().strip()}")
    return done.stdout


def closed_loop(profile_file: Path, rw: str, block_bytes: int, iodepth: int) -> dict:
    """The model under fio's closed loop (a job of reads or writes kept at iodepth): IOPS, latency percentiles."""
    return json.loads(_model(profile_file, ["--job", rw, str(block_bytes), str(iodepth)]))


@functools.cache
def _library() -> ctypes.CDLL:
    """The emulator's device model as a library (emulator/src/replay.h), loaded once."""
    require_checkout("the device model (emulator/libtierlab-model.so)")
    if not MODEL_LIBRARY.exists():
        raise DeviceProfileError(f"{MODEL_LIBRARY} is missing: build it with `make -C {EMULATOR.parent} "
                                 f"{MODEL_LIBRARY.name}` (it needs gcc and make)")
    library = ctypes.CDLL(str(MODEL_LIBRARY))
    built = library.model_replay_abi() if hasattr(library, "model_replay_abi") else 1
    if built != REPLAY_ABI:
        raise DeviceProfileError(f"{MODEL_LIBRARY} was built from other sources than this tierlab's (replay ABI "
                                 f"{built}, this tierlab calls {REPLAY_ABI}): rebuild it with "
                                 f"`make -C {EMULATOR.parent} {MODEL_LIBRARY.name}`")
    array = np.ctypeslib.ndpointer
    library.model_replay.argtypes = [
        ctypes.POINTER(ctypes.c_char_p), ctypes.c_uint, ctypes.c_size_t, array(np.uint64, flags="C"),
        array(np.uint8, flags="C"), array(np.uint64, flags="C"), array(np.uint64, flags="C"),
        array(np.uint8, flags="C"), array(np.float32, flags="C"), array(np.float64, flags="C"), ctypes.c_char_p,
        ctypes.c_size_t]
    library.model_replay.restype = ctypes.c_int
    return library


def heads(requests: pd.DataFrame) -> pd.DataFrame:
    """One row per request (its first piece), with the object of its first piece and its whole size, in
    dispatch order; the frame itself when it is that already."""
    first = (requests["piece"] == 0).to_numpy()
    if first.all() and requests["ts_s"].is_monotonic_increasing:
        return requests
    return requests[first].sort_values("ts_s", kind="stable")


# Window.roles' hits when no cache serves any request
NO_HITS = np.zeros(0, dtype=bool)
# what Window.of gathers of each chunk of requests, and as what
_PART_FIELDS = {"writes": np.uint8, "offset_bytes": np.uint64, "length_bytes": np.uint64, "sequential": bool,
                "table": np.int16, "traced": np.uint8}


def _codes(values: pd.Series, seen: dict[str, int]) -> np.ndarray:
    """Each value's number, numbered across chunks (seen: the numbers so far, given to the new values too);
    -1 for none."""
    values = values.astype("category")
    codes = values.cat.codes.to_numpy()
    # the categories this chunk holds (a row group's dictionary can name other windows' values too)
    present = np.zeros(len(values.cat.categories) + 1, dtype=bool)
    present[codes] = True
    numbers = [seen.setdefault(name, len(seen)) if there else -1
               for name, there in zip(values.cat.categories, present[:-1], strict=True)]
    return np.array([*numbers, -1], dtype=np.int64)[codes]


def _joined(parts: list[np.ndarray], dtype) -> np.ndarray:
    """The parts one after the other, each let go as soon as it is copied."""
    joined = np.empty(sum(len(part) for part in parts), dtype=dtype)
    at = 0
    while parts:
        part = parts.pop(0)
        joined[at:at + len(part)] = part
        at += len(part)
    return joined


@dataclass
class Window:
    """A traced query window's requests (heads, in dispatch order) as the cost model takes them, built once
    and replayed under every split and cache: dispatch times in the model's clock (ns) from the window's
    first request, offsets apart per traced device, each request's table (an index into tables, -1 for
    `other`), the role of the tier it was traced on (an index into ROLES) and its share of the traced time
    in flight (_shares). About 32 bytes a request."""
    at_ns: np.ndarray
    writes: np.ndarray
    offset_bytes: np.ndarray
    length_bytes: np.ndarray
    sequential: np.ndarray
    table: np.ndarray
    tables: list[str]
    traced: np.ndarray
    share: np.ndarray

    @classmethod
    def of(cls, chunks: Iterable[pd.DataFrame], tier_roles: dict[str, str], dilation: float) -> "Window":
        """The window of the requests in chunks (frames of requests, one after the other in dispatch order:
        a window of millions is read a part at a time and each part let go once it is in the arrays)."""
        devices: dict[str, int] = {}
        objects: dict[str, int] = {}
        tiers: dict[str, int] = {}
        parts: dict[str, list[np.ndarray]] = {name: [] for name in ("ts_us", "latency_us", *_PART_FIELDS)}
        for chunk in chunks:
            reads = heads(chunk)
            tier = _codes(reads["tier"], tiers)
            strangers = sorted(set(tiers) - set(tier_roles))
            if strangers:
                raise InputError(f"requests on {', '.join(map(str, strangers))}, not one of the run's tiers "
                                      f"({', '.join(tier_roles)}): the trace has a device the run did not place "
                                      "data on")
            device = _codes(reads["device"], devices).astype(np.uint64)
            parts["ts_us"].append(reads["ts_s"].to_numpy() * 1e6)
            parts["latency_us"].append(reads["latency_us"].to_numpy(dtype=np.float32))
            parts["writes"].append((reads["op"] == "W").to_numpy(dtype=np.uint8))
            parts["offset_bytes"].append(reads["sector"].to_numpy(dtype=np.uint64) * np.uint64(SECTOR_BYTES)
                                         + device * np.uint64(DEVICE_SPAN_BYTES))
            parts["length_bytes"].append(reads["request_size_sectors"].to_numpy(dtype=np.uint64)
                                         * np.uint64(SECTOR_BYTES))
            parts["sequential"].append(reads["sequential"].to_numpy(dtype=bool))
            parts["table"].append(_codes(reads["object"], objects).astype(np.int16))
            parts["traced"].append(np.array([ROLES.index(tier_roles[t]) for t in tiers] + [0], dtype=np.uint8)[tier])
        tables = sorted(set(objects) - {OTHER})
        # the model's clock first, in place: memory holds the parts, and one field twice as it is joined
        at_ns = _joined(parts.pop("ts_us"), np.float64)
        # each chunk is in dispatch order; chunks that are not one after the other are put in order as heads() does
        order = None if (at_ns[1:] >= at_ns[:-1]).all() else np.argsort(at_ns, kind="stable")
        latency_us = _joined(parts.pop("latency_us"), np.float32)
        if order is not None:
            at_ns, latency_us = at_ns[order], latency_us[order]
        share = _shares(at_ns, latency_us)
        del latency_us
        if len(at_ns):
            at_ns -= at_ns.min()
            at_ns /= dilation
            at_ns *= 1000.0
            np.round(at_ns, out=at_ns)
        at_ns = at_ns.astype(np.uint64)
        fields = {name: _joined(parts.pop(name), dtype) for name, dtype in _PART_FIELDS.items()}
        if order is not None:
            fields = {name: values[order] for name, values in fields.items()}
        table_of_object = np.array([tables.index(o) if o != OTHER else -1 for o in objects] + [-1], dtype=np.int16)
        fields["table"] = table_of_object[fields["table"]]
        return cls(at_ns=at_ns, tables=tables, share=share, **fields)

    def io_us(self, roles: np.ndarray, profiles: dict[str, Path]) -> float:
        """The model's I/O time when each role's requests (roles: an index into ROLES per request) are
        replayed together on that role's profile: each request's latency times its traced share, summed."""
        paths = (ctypes.c_char_p * len(ROLES))(*(str(profiles[role]).encode() for role in ROLES))
        sums = np.zeros(len(ROLES), dtype=np.float64)
        err = ctypes.create_string_buffer(1024)
        if _library().model_replay(paths, len(ROLES), len(roles), self.at_ns, self.writes, self.offset_bytes,
                                   self.length_bytes, np.ascontiguousarray(roles, dtype=np.uint8), self.share, sums, err,
                                   len(err)) != 0:
            raise DeviceProfileError(f"the device model's replay: {err.value.decode()}")
        return float(sums.sum()) / 1000.0

    def roles(self, fast_tables: np.ndarray, hits: np.ndarray = NO_HITS) -> np.ndarray:
        """The role each request is served by when the fast tier holds the tables fast_tables marks (a flag
        per table) and serves the requests hits marks (a flag per request: a cache's hits; none by default);
        `other`'s stays where it was traced."""
        return _roles(self.table, self.traced, fast_tables, hits, ROLES.index("fast"), ROLES.index("capacity"))


@numba.njit(cache=True, nogil=True)
def _shares(start, latency):
    """Each request's share of the time it was in flight (start: dispatch times, sorted; latency: in the same
    unit): the mean over its time in flight of 1/k, k the requests in flight then, itself included; for a
    request of no duration, 1/k at its dispatch. The shares of requests overlapping in time add up to the time
    any of them was in flight, so a request waited for alone counts whole and each of k requests in flight
    together a k-th. A request whose completion was not seen (NaN latency: a time jump) gets 0 and is not in
    flight, as the query's I/O time leaves it out (metrics.InFlight). Dispatches and completions are swept in
    time order, integrating 1/k; the requests in flight wait in a binary heap by completion, with the
    integral at their dispatch, so that memory follows the depth, not the window."""
    share = np.ones(len(start), dtype=np.float32)
    ends = np.empty(64)
    opened = np.empty(64)
    request = np.empty(64, dtype=np.int64)
    flying = 0
    integral = 0.0
    last = start[0] if len(start) else 0.0
    for r in range(len(start) + 1):
        now = start[r] if r < len(start) else np.inf
        # the completions up to this dispatch, earliest first (one at the instant of the dispatch first: the
        # order of events at one instant adds nothing)
        while flying > 0 and ends[0] <= now:
            integral += (ends[0] - last) / flying
            last = ends[0]
            done = request[0]
            duration = ends[0] - start[done]
            # a latency too small to move a dispatch time's float counts as no duration
            share[done] = (integral - opened[0]) / duration if duration > 0 else 1.0 / flying
            flying -= 1
            _sift_down(ends, opened, request, flying)
        if r == len(start):
            break
        if flying > 0:
            integral += (now - last) / flying
        last = now
        if np.isnan(latency[r]) or latency[r] <= 0:
            share[r] = 0.0 if np.isnan(latency[r]) else 1.0 / (flying + 1)
            continue
        if flying == len(ends):
            ends, opened, request = (np.concatenate((ends, ends)), np.concatenate((opened, opened)),
                                     np.concatenate((request, request)))
        ends[flying] = now + latency[r]
        opened[flying] = integral
        request[flying] = r
        _sift_up(ends, opened, request, flying)
        flying += 1
    return share


@numba.njit(cache=True, nogil=True)
def _swap(ends, opened, request, a, b):
    ends[a], ends[b] = ends[b], ends[a]
    opened[a], opened[b] = opened[b], opened[a]
    request[a], request[b] = request[b], request[a]


@numba.njit(cache=True, nogil=True)
def _sift_up(ends, opened, request, at):
    """Restores the heap's order (the earliest completion at 0) after an entry was put at `at`."""
    while at > 0 and ends[(at - 1) // 2] > ends[at]:
        _swap(ends, opened, request, at, (at - 1) // 2)
        at = (at - 1) // 2


@numba.njit(cache=True, nogil=True)
def _sift_down(ends, opened, request, size):
    """Removes the heap's first entry: its last one (at size, once the heap holds size entries) takes its
    place and sinks to where it belongs."""
    _swap(ends, opened, request, 0, size)
    at = 0
    while True:
        child = 2 * at + 1
        if child >= size:
            return
        if child + 1 < size and ends[child + 1] < ends[child]:
            child += 1
        if ends[at] <= ends[child]:
            return
        _swap(ends, opened, request, at, child)
        at = child


@numba.njit(cache=True, nogil=True)
def _roles(table, traced, fast_tables, hits, fast_role, capacity_role):
    """Window.roles in one pass, without a temporary as large as the window (each replay makes one)."""
    roles = np.empty(len(table), dtype=np.uint8)
    for r in range(len(table)):
        if table[r] < 0:
            roles[r] = traced[r]
        else:
            roles[r] = fast_role if fast_tables[table[r]] or (len(hits) > 0 and hits[r]) else capacity_role
    return roles


def layout_costs(window: Window, profiles: dict[str, Path]) -> dict[frozenset, float]:
    """The model's I/O time of one query window under every split of the tables it reads between the
    tiers: {tables on the fast tier: I/O time, us}. Tables it does not read do not change its cost."""
    if len(window.tables) > MAX_TABLES_READ:
        raise InputError(f"the query reads {len(window.tables)} tables, {2 ** len(window.tables)} splits to replay; "
                         f"recommend takes queries reading at most {MAX_TABLES_READ}")
    splits = [np.array(fast, dtype=bool) for fast in product([False, True], repeat=len(window.tables))]
    with ThreadPoolExecutor(WORKERS) as pool:
        sums = pool.map(lambda fast: window.io_us(window.roles(fast), profiles), splits)
        return {frozenset(t for t, on in zip(window.tables, fast, strict=True) if on): cost
                for fast, cost in zip(splits, sums, strict=True)}


# block cache policies: (the access of a page that admits it, whether sequential requests bypass the cache)
CACHE_POLICIES = {
    # an ideal LRU: every page read is admitted (the most hits an LRU of that size can get; not the optimum)
    "lru": (1, False),
    # as dm-cache and bcache admit: a page is promoted on its second access, and requests of a sequential
    # stream bypass the cache (bcache's sequential cutoff, here at the block-level proxy's first continuation)
    "admitting": (2, True),
}


@numba.njit(cache=True, nogil=True)
def _cache_hits(first, count, pages, bypass, capacity_pages, admit_on):
    """Per request: whether an LRU cache of capacity_pages, empty at first, served every page it accessed
    (request r accesses pages first[r] .. first[r] + count[r] - 1, numbered 0 .. pages - 1). A page is
    admitted on its admit_on-th access, unless its request bypasses the cache; the least recently used page
    is evicted for it. The recency order is a doubly linked list: newer[p], older[p] (-1 at the ends)."""
    seen = np.zeros(pages, dtype=np.uint8)
    cached = np.zeros(pages, dtype=np.bool_)
    # 32-bit links: half the memory to walk, and a window's distinct pages are fewer than 2^31
    newer = np.full(pages, -1, dtype=np.int32)
    older = np.full(pages, -1, dtype=np.int32)
    newest = oldest = -1
    used = 0
    hit = np.ones(len(first), dtype=np.bool_)
    for request in range(len(first)):
        for page in range(first[request], first[request] + count[request]):
            if seen[page] < admit_on:
                seen[page] += 1
            if cached[page]:
                if page == newest:
                    continue
                # unlink, then relink as the newest
                newer_p, older_p = newer[page], older[page]
                if older_p >= 0:
                    newer[older_p] = newer_p
                else:
                    oldest = newer_p
                older[newer_p] = older_p
                older[page], newer[page] = newest, -1
                newer[newest] = page
                newest = page
                continue
            hit[request] = False
            if bypass[request] or seen[page] < admit_on or capacity_pages == 0:
                continue
            if used == capacity_pages:
                victim = oldest
                cached[victim] = False
                oldest = newer[victim]
                if oldest >= 0:
                    older[oldest] = -1
                else:
                    newest = -1
                used -= 1
            cached[page] = True
            older[page], newer[page] = newest, -1
            if newest >= 0:
                newer[newest] = page
            else:
                oldest = page
            newest = page
            used += 1
    return hit


@dataclass
class PageAccesses:
    """The pages each request of a window accesses, numbered densely: request r accesses pages first[r] ..
    first[r] + count[r] - 1 of 0 .. pages - 1. Built once per window and page size, in memory of the
    requests' count, not their pages'."""
    first: np.ndarray
    count: np.ndarray
    pages: int

    @classmethod
    def of(cls, window: Window, page_bytes: int) -> "PageAccesses":
        if page_bytes <= 0 or page_bytes & (page_bytes - 1):
            raise InputError(f"a page of {page_bytes} bytes; the cache simulation takes pages of a power of two")
        if len(window.at_ns) == 0:
            return cls(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32), 0)
        # pages and devices by shifts: DEVICE_SPAN_BYTES is a power of two too, and a multiple of any page size,
        # so that the pages of two devices never mix
        page, span = np.uint64(page_bytes.bit_length() - 1), np.uint64(DEVICE_SPAN_BYTES.bit_length() - 1)
        lowest, highest = _device_spans(window.offset_bytes, window.length_bytes, page, span)
        spans = highest - lowest + 1
        if spans.sum() <= len(window.at_ns):
            # pages numbered from each device's lowest to its highest, one device after the other (no sort)
            first, count = _pages_spanned(window.offset_bytes, window.length_bytes, page, span,
                                          np.cumsum(spans) - spans - lowest)
            pages = int(spans.sum())
        else:
            first, count, pages = _pages_touched(window.offset_bytes, window.length_bytes, page)
        if pages >= 2**31:
            raise InputError(f"the window touches {pages:,} pages of {page_bytes} bytes; the cache simulation "
                                  "takes fewer than 2^31")
        return cls(first, count, pages)


@numba.njit(cache=True, nogil=True)
def _device_spans(offset, length, page, span):
    """Each device's lowest and highest page accessed, 0 and -1 for a device none is accessed on (pages of
    2^page bytes, devices 2^span bytes apart)."""
    devices = np.int64(offset.max() >> span) + 1
    lowest = np.full(devices, -1, dtype=np.int64)
    highest = np.full(devices, -1, dtype=np.int64)
    for r in range(len(offset)):
        device = np.int64(offset[r] >> span)
        low, high = np.int64(offset[r] >> page), np.int64((offset[r] + length[r] - np.uint64(1)) >> page)
        if highest[device] < 0 or low < lowest[device]:
            lowest[device] = low
        highest[device] = max(highest[device], high)
    for device in range(devices):
        if highest[device] < 0:
            lowest[device] = 0
    return lowest, highest


@numba.njit(cache=True, nogil=True)
def _pages_spanned(offset, length, page, span, base):
    """Each request's first page (its device's base plus the page's number) and its count of pages (pages of
    2^page bytes, devices 2^span bytes apart)."""
    first = np.empty(len(offset), dtype=np.int64)
    count = np.empty(len(offset), dtype=np.int32)
    for r in range(len(offset)):
        low, high = np.int64(offset[r] >> page), np.int64((offset[r] + length[r] - np.uint64(1)) >> page)
        first[r] = base[np.int64(offset[r] >> span)] + low
        count[r] = high - low + 1
    return first, count


def _pages_touched(offset: np.ndarray, length: np.ndarray, page: np.uint64) -> tuple[np.ndarray, np.ndarray, int]:
    """Pages numbered over the union of the requests' page ranges only: its disjoint segments one after the
    other (a window whose devices' spans hold more pages than it has requests)."""
    low = (offset >> page).astype(np.int64)
    high = ((offset + length - np.uint64(1)) >> page).astype(np.int64)
    order = np.argsort(low)
    low_sorted = low[order]
    reach = np.maximum.accumulate(high[order])
    opens = np.r_[True, low_sorted[1:] > reach[:-1]]
    starts = np.flatnonzero(opens)
    segment = np.cumsum(opens) - 1
    lengths = reach[np.r_[starts[1:] - 1, len(low_sorted) - 1]] - low_sorted[starts] + 1
    base = np.cumsum(lengths) - lengths
    first = np.empty(len(low), dtype=np.int64)
    first[order] = base[segment] + low_sorted - low_sorted[starts][segment]
    return first, (high - low + 1).astype(np.int32), int(lengths.sum())


def cache_hits(window: Window, page_bytes: int, capacity_bytes: int, policy: str,
               accesses: PageAccesses | None = None) -> np.ndarray:
    """Per request: served whole by a cache of the policy on the fast tier. The cache is read-only: writes go
    to the capacity tier and admit nothing (a cached page they write is kept current); sequential reads
    bypass it when the policy says so. accesses: the window's PageAccesses at page_bytes, when built."""
    admit_on, sequential_bypass = CACHE_POLICIES[policy]
    accesses = accesses or PageAccesses.of(window, page_bytes)
    writes = window.writes.astype(bool)
    bypass = writes | (window.sequential & sequential_bypass)
    return _cache_hits(accesses.first, accesses.count, accesses.pages, bypass, capacity_bytes // page_bytes,
                       admit_on) & ~writes


def cache_costs(window: Window, profiles: dict[str, Path], page_bytes: int,
                capacities_bytes: list[int]) -> pd.DataFrame:
    """Per capacity and cache policy: the table requests a cold read-only cache of that size on the fast tier
    serves whole (hits), and the model's I/O time (us) with the hits replayed on the fast profile and the rest
    on the capacity profile (`other` where it was traced)."""
    accesses = PageAccesses.of(window, page_bytes)
    placeable = window.table >= 0
    none_placed = np.zeros(len(window.tables), dtype=bool)

    def cost(capacity: int, policy: str) -> dict:
        hit = placeable & cache_hits(window, page_bytes, capacity, policy, accesses)
        return {"capacity_bytes": capacity, "policy": policy, "hits": int(hit.sum()), "requests": int(placeable.sum()),
                "io_us": window.io_us(window.roles(none_placed, hit), profiles)}

    with ThreadPoolExecutor(WORKERS) as pool:
        rows = list(pool.map(lambda config: cost(*config), product(capacities_bytes, CACHE_POLICIES)))
    return pd.DataFrame(rows, columns=["capacity_bytes", "policy", "hits", "requests", "io_us"])


def device_cache_hit_pct(requests: pd.DataFrame, page_bytes: int, capacity_bytes: int, policy: str) -> float:
    """The share of a device's traced read requests that a cache of the policy in front of the whole device
    serves: what a run with fast_cache should count on its capacity tier's emulated cache (which sees every
    request of the device, whatever object it reads). NaN without reads."""
    # every request as `other` of one role: only pages, writes and sequential reads matter to the cache
    window = Window.of([requests.assign(object=OTHER)], dict.fromkeys(requests["tier"].unique(), "capacity"), 1.0)
    reads = window.writes == 0
    hits = cache_hits(window, page_bytes, capacity_bytes, policy)
    return 100.0 * float(hits[reads].sum()) / float(reads.sum()) if reads.any() else float("nan")
