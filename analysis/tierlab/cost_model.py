"""The trace-driven cost model: a traced query's requests re-costed on each tier's device model.

The device model is the emulator's own (`tierlab-emu --simulate`), not a second one: each request is
submitted at the time it was dispatched in the traced run (in the model's time: the run's time divided by
its dilation), and the model gives its latency on the profile's device.

How a query's time follows (docs/recommend.md states the same for users):
- its non-I/O time (elapsed minus the time with a request in flight) does not depend on placement;
- its I/O time scales with the model's latency sum over its requests: the in-flight depth at each moment
  stays as traced, so the model's absolute error and the run's dilation cancel in the ratio to the layout
  that was traced;
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

import io
import json
import subprocess
from dataclasses import dataclass
from itertools import product
from pathlib import Path

import numba
import numpy as np
import pandas as pd

from .attribute import OTHER
from .errors import DeviceProfileError, StudyInputError
from .metrics import SECTOR_BYTES

EMULATOR = Path(__file__).resolve().parents[2] / "emulator" / "tierlab-emu"
# requests from different traced devices never share offsets on the device they are replayed on
DEVICE_SPAN_BYTES = 1 << 48
# a query reading more tables than this has too many splits between the tiers to replay each
MAX_TABLES_READ = 10


def _model(profile_file: Path, args: list[str], stdin: bytes = b"") -> bytes:
    """What the device model (tierlab-emu on a profile) writes for args."""
    if not EMULATOR.exists():
        raise DeviceProfileError(f"{EMULATOR} is missing: build the emulator with `make -C {EMULATOR.parent}` "
                                 "(it needs gcc, make, pkg-config and libfuse3-dev)")
    done = subprocess.run([str(EMULATOR), "--profile", str(profile_file), *args], input=stdin, capture_output=True)
    if done.returncode != 0:
        raise DeviceProfileError(f"tierlab-emu {' '.join(args)} with {profile_file}: {done.stderr.decode().strip()}")
    return done.stdout


def replay(profile_file: Path, at_us: np.ndarray, writes: np.ndarray, offset_bytes: np.ndarray,
           length_bytes: np.ndarray) -> np.ndarray:
    """The model's latency (us) of each request, submitted in the order given at the times given."""
    if len(at_us) == 0:
        return np.zeros(0)
    lines = pd.DataFrame({"at_us": np.round(at_us, 3), "op": np.where(writes, "w", "r"),
                          "offset": offset_bytes, "length": length_bytes})
    out = _model(profile_file, ["--simulate"], lines.to_csv(sep=" ", header=False, index=False).encode())
    return pd.read_csv(io.BytesIO(out), sep=" ", usecols=["latency_us"])["latency_us"].to_numpy()


def closed_loop(profile_file: Path, rw: str, block_bytes: int, iodepth: int) -> dict:
    """The model under fio's closed loop (a job of reads or writes kept at iodepth): IOPS, latency percentiles."""
    return json.loads(_model(profile_file, ["--job", rw, str(block_bytes), str(iodepth)]))


def heads(requests: pd.DataFrame) -> pd.DataFrame:
    """One row per request (its first piece), with the object of its first piece and its whole size."""
    return requests[requests["piece"] == 0].sort_values("ts_s", kind="stable")


@dataclass
class Stream:
    """A window's requests (heads, in dispatch order) as the device model takes them, built once and replayed
    under every split and cache: dispatch times in the model's clock, from the window's first request, and
    offsets apart per traced device."""
    at_us: np.ndarray
    writes: np.ndarray
    offset_bytes: np.ndarray
    length_bytes: np.ndarray

    @classmethod
    def of(cls, reads: pd.DataFrame, dilation: float) -> "Stream":
        ts_us = reads["ts_s"].to_numpy() * 1e6
        device = pd.factorize(reads["device"])[0].astype(np.int64)
        return cls(at_us=(ts_us - ts_us.min()) / dilation if len(ts_us) else ts_us,
                   writes=(reads["op"] == "W").to_numpy(),
                   offset_bytes=reads["sector"].to_numpy() * SECTOR_BYTES + device * DEVICE_SPAN_BYTES,
                   length_bytes=reads["request_size_sectors"].to_numpy() * SECTOR_BYTES)

    def latency_sum_us(self, roles: np.ndarray, profiles: dict[str, Path]) -> float:
        """The model's latency sum when each role's requests are replayed together on that role's profile."""
        return float(sum(replay(profiles[role], self.at_us[roles == role], self.writes[roles == role],
                                self.offset_bytes[roles == role], self.length_bytes[roles == role]).sum()
                         for role in profiles))


def _roles(requests: pd.DataFrame, fast_tables: frozenset, tier_roles: dict[str, str]) -> np.ndarray:
    """The role (fast, capacity) each request is served by under a layout: a table's by where the layout puts
    it, `other`'s where it was traced."""
    traced = requests["tier"].map(tier_roles).to_numpy()
    placed = np.where(requests["object"].isin(fast_tables).to_numpy(), "fast", "capacity")
    return np.where((requests["object"] == OTHER).to_numpy(), traced, placed)


def layout_costs(requests: pd.DataFrame, tier_roles: dict[str, str], profiles: dict[str, Path],
                 dilation: float) -> dict[frozenset, float]:
    """The model's latency sum of one query window under every split of the tables it reads between the
    tiers: {tables on the fast tier: latency sum}. Tables it does not read do not change its cost."""
    reads = heads(requests)
    tables = sorted(set(reads["object"]) - {OTHER})
    if len(tables) > MAX_TABLES_READ:
        raise StudyInputError(f"the query reads {len(tables)} tables, {2 ** len(tables)} splits to replay; "
                              f"recommend takes queries reading at most {MAX_TABLES_READ}")
    splits = [frozenset(t for t, on in zip(tables, bits, strict=True) if on)
              for bits in product([False, True], repeat=len(tables))]
    stream = Stream.of(reads, dilation)
    return {fast: stream.latency_sum_us(_roles(reads, fast, tier_roles), profiles) for fast in splits}


# block cache policies: (the access of a page that admits it, whether sequential requests bypass the cache)
CACHE_POLICIES = {
    # an ideal LRU: every page read is admitted, the most hits a cache of that size can get
    "lru": (1, False),
    # as dm-cache and bcache admit: a page is promoted on its second access, and requests of a sequential
    # stream bypass the cache (bcache's sequential cutoff, here at the block-level proxy's first continuation)
    "admitting": (2, True),
}


@numba.njit(cache=True)
def _heap_push(times, pages, size, t, page):
    i = size
    times[i], pages[i] = t, page
    while i > 0 and times[(i - 1) // 2] > times[i]:
        parent = (i - 1) // 2
        times[i], times[parent] = times[parent], times[i]
        pages[i], pages[parent] = pages[parent], pages[i]
        i = parent
    return size + 1


@numba.njit(cache=True)
def _heap_pop(times, pages, size):
    t, page = times[0], pages[0]
    size -= 1
    times[0], pages[0] = times[size], pages[size]
    i = 0
    while True:
        low, left, right = i, 2 * i + 1, 2 * i + 2
        if left < size and times[left] < times[low]:
            low = left
        if right < size and times[right] < times[low]:
            low = right
        if low == i:
            return t, page, size
        times[i], times[low] = times[low], times[i]
        pages[i], pages[low] = pages[low], pages[i]
        i = low


@numba.njit(cache=True)
def _cache_hits(pages, owner, requests, bypass, capacity_pages, admit_on):
    """Per request: whether an LRU cache of capacity_pages, empty at first, served every page it accessed. A
    page is admitted on its admit_on-th access, unless its request bypasses the cache; the least recently
    used page is evicted for it. Stale heap entries (pages used again since) are skipped when evicting."""
    seen = np.zeros(pages.max() + 1 if len(pages) else 0, dtype=np.int64)
    cached = np.zeros(len(seen), dtype=np.bool_)
    last_use = np.zeros(len(seen), dtype=np.int64)
    heap_times = np.empty(len(pages), dtype=np.int64)
    heap_pages = np.empty(len(pages), dtype=np.int64)
    size = used = 0
    hit = np.ones(requests, dtype=np.bool_)
    for t in range(len(pages)):
        page, request = pages[t], owner[t]
        seen[page] += 1
        if cached[page]:
            last_use[page] = t
            size = _heap_push(heap_times, heap_pages, size, t, page)
            continue
        hit[request] = False
        if bypass[request] or seen[page] < admit_on or capacity_pages == 0:
            continue
        if used == capacity_pages:
            while True:
                stamp, victim, size = _heap_pop(heap_times, heap_pages, size)
                if cached[victim] and last_use[victim] == stamp:
                    cached[victim] = False
                    used -= 1
                    break
        cached[page] = True
        last_use[page] = t
        used += 1
        size = _heap_push(heap_times, heap_pages, size, t, page)
    return hit


def request_pages(requests: pd.DataFrame, page_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Each page access of the requests in order, as (a number per device and page, the request's index)."""
    device_code = pd.factorize(requests["device"])[0].astype(np.int64)
    first = requests["sector"].to_numpy() * SECTOR_BYTES // page_bytes
    last = ((requests["sector"].to_numpy() + requests["request_size_sectors"].to_numpy()) * SECTOR_BYTES - 1) // page_bytes
    counts = (last - first + 1).astype(np.int64)
    owner = np.repeat(np.arange(len(requests)), counts)
    page = first[owner] + np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    keys = page * (device_code.max() + 1 if len(device_code) else 1) + device_code[owner]
    return np.unique(keys, return_inverse=True)[1].astype(np.int64), owner


def cache_hits(requests: pd.DataFrame, page_bytes: int, capacity_bytes: int, policy: str) -> np.ndarray:
    """Per request (heads, in dispatch order): served whole by a cache of the policy on the fast tier. The
    cache is read-only: writes go to the capacity tier and admit nothing (a cached page they write is kept
    current)."""
    admit_on, sequential_bypass = CACHE_POLICIES[policy]
    pages, owner = request_pages(requests, page_bytes)
    writes = (requests["op"] == "W").to_numpy()
    bypass = writes | (requests["sequential"].to_numpy(dtype=bool) & sequential_bypass)
    return _cache_hits(pages, owner, len(requests), bypass, capacity_bytes // page_bytes, admit_on) & ~writes


def cache_costs(requests: pd.DataFrame, tier_roles: dict[str, str], profiles: dict[str, Path], dilation: float,
                page_bytes: int, capacities_bytes: list[int]) -> pd.DataFrame:
    """Per capacity and cache policy: the table requests a cold read-only cache of that size on the fast tier
    serves whole (hits), and the model's latency sum with the hits replayed on the fast profile and the rest
    on the capacity profile (`other` where it was traced)."""
    reads = heads(requests)
    stream = Stream.of(reads, dilation)
    placeable = (reads["object"] != OTHER).to_numpy()
    traced = reads["tier"].map(tier_roles).to_numpy()
    rows = []
    for capacity, policy in product(capacities_bytes, CACHE_POLICIES):
        hit = placeable & cache_hits(reads, page_bytes, capacity, policy)
        roles = np.where(placeable, np.where(hit, "fast", "capacity"), traced)
        rows.append({"capacity_bytes": capacity, "policy": policy, "hits": int(hit.sum()),
                     "requests": int(placeable.sum()), "latency_sum_us": stream.latency_sum_us(roles, profiles)})
    return pd.DataFrame(rows, columns=["capacity_bytes", "policy", "hits", "requests", "latency_sum_us"])
