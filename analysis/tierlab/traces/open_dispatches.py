"""The dispatches still waiting for their completions, as a compiled hash table, and the pass that
matches a batch of block events against it.

A completion closes the oldest open dispatch of its (device, sector); with none open it is counted
(completion_without_dispatch). The table maps each (device, sector) with open dispatches to a first-in
first-out list of them, kept in a pool of entries (dispatch time, row, next); the table is open
addressing with linear probing and backward-shift deletion, so it needs no tombstones. One pass over a
batch classifies each event, writes the rows of data dispatches and closes requests: every array is
written once, whatever the batch holds.

The pass stops at a dispatch that finds no free entry or a half-full table; the table and pool are grown
(doubled) and the pass goes on from there. So their size follows the most dispatches ever open at once,
and in the usual case (tens open) they stay small enough for the processor's caches."""

import numba
import numpy as np

from .blk import MATCH_COUNTS
from .frame import MAX_END_SECTOR, MAX_LATENCY_US, MAX_REQUEST_SECTORS

EMPTY = -1          # a slot without a key (s_dev) / the end of a list (e_next)
FREE = -2           # e_row of an entry in the free list
NO_ROW = -1         # e_row of a dispatch that is not a data row (a flush, a discard, beyond the device...)
_MIX = np.uint64(0x9E3779B97F4A7C15)
_BEYOND, _JUMPS, _UNMATCHED = (MATCH_COUNTS.index(name) for name in ("beyond_bounds", "time_jumps",
                                                                "completion_without_dispatch"))


class OpenDispatches:
    """The table and the pool, as arrays the compiled pass works on; `match` runs the pass over a batch,
    growing them where it stops."""

    def __init__(self):
        self.s_sector = np.zeros(1 << 10, np.uint64)
        self.s_dev = np.full(1 << 10, EMPTY, np.int64)
        self.s_head = np.zeros(1 << 10, np.int64)
        self.s_tail = np.zeros(1 << 10, np.int64)
        self.e_time = np.zeros(0, np.int64)
        self.e_row = np.zeros(0, np.int64)
        self.e_next = np.zeros(0, np.int64)
        self.state = np.array([0, EMPTY, 0], np.int64)   # keys in the table, first free entry, entries in use

    @property
    def live(self) -> int:
        """The dispatches open."""
        return int(self.state[2])

    def match(self, events: tuple, first_row: int, base: int, columns: list, counts: np.ndarray) -> int:
        """A batch matched (see match_batch: events are its arguments up to counted_as, columns from ts_s to
        latency); returns the rows written."""
        done = written = 0
        while True:
            done, more = match_batch(*events, self.s_sector, self.s_dev, self.s_head, self.s_tail, self.e_time,
                                     self.e_row, self.e_next, self.state, done, first_row + written, base, *columns,
                                     counts)
            written += more
            if done == len(events[0]):
                return written
            self._grow()

    def _grow(self) -> None:
        """Twice the entries if none is free, twice the slots if the table is half full (what stopped a pass)."""
        keys, free = int(self.state[0]), int(self.state[1])
        if free == EMPTY:
            old = len(self.e_time)
            size = max(2 * old, 1024)
            self.e_time = np.resize(self.e_time, size)
            self.e_row = np.resize(self.e_row, size)
            self.e_next = np.resize(self.e_next, size)
            self.e_row[old:] = FREE
            self.e_next[old:size - 1] = np.arange(old + 1, size)
            self.e_next[size - 1] = EMPTY
            self.state[1] = old
        if 2 * (keys + 1) > len(self.s_dev):
            size = 2 * len(self.s_dev)
            tables = (np.zeros(size, np.uint64), np.full(size, EMPTY, np.int64), np.zeros(size, np.int64),
                      np.zeros(size, np.int64))
            _rehash(self.s_sector, self.s_dev, self.s_head, self.s_tail, *tables)
            self.s_sector, self.s_dev, self.s_head, self.s_tail = tables

    def oldest_waiting_row(self, base: int, since_ns: int) -> int:
        """The first data row at or after base still open and dispatched at or after since_ns; -1 if none."""
        return int(_oldest_waiting_row(self.e_time, self.e_row, base, since_ns))


@numba.njit(cache=True, nogil=True, inline="always")
def _home(sector, dev, mask):
    """The key's first slot to probe: the sector, its top bits xored with the device, times a 64-bit odd constant."""
    mixed = (sector ^ (np.uint64(dev) << np.uint64(48))) * _MIX
    return np.int64(mixed >> np.uint64(32)) & mask


@numba.njit(cache=True, nogil=True)
def _find(s_sector, s_dev, sector, dev):
    """The slot of the key, or the empty slot where it would go."""
    mask = len(s_dev) - 1
    slot = _home(sector, dev, mask)
    while s_dev[slot] != EMPTY and (s_dev[slot] != dev or s_sector[slot] != sector):
        slot = (slot + 1) & mask
    return slot


@numba.njit(cache=True, nogil=True)
def _rehash(s_sector, s_dev, s_head, s_tail, n_sector, n_dev, n_head, n_tail):
    for slot in range(len(s_dev)):
        if s_dev[slot] != EMPTY:
            new = _find(n_sector, n_dev, s_sector[slot], s_dev[slot])
            n_sector[new], n_dev[new], n_head[new], n_tail[new] = (
                s_sector[slot], s_dev[slot], s_head[slot], s_tail[slot])


@numba.njit(cache=True, nogil=True)
def _delete(s_sector, s_dev, s_head, s_tail, slot):
    """Empty a slot, moving later keys of its probe run back so that every key stays reachable."""
    mask = len(s_dev) - 1
    hole = slot
    probe = slot
    while True:
        probe = (probe + 1) & mask
        if s_dev[probe] == EMPTY:
            break
        home = _home(s_sector[probe], s_dev[probe], mask)
        # the key at probe may fill the hole unless its home lies cyclically in (hole, probe]
        if (probe > hole and (home <= hole or home > probe)) or (probe < hole and home <= hole and home > probe):
            s_sector[hole], s_dev[hole], s_head[hole], s_tail[hole] = (
                s_sector[probe], s_dev[probe], s_head[probe], s_tail[probe])
            hole = probe
    s_dev[hole] = EMPTY


@numba.njit(cache=True, nogil=True)
def _oldest_waiting_row(e_time, e_row, base, since_ns):
    oldest = -1
    for entry in range(len(e_row)):
        row = e_row[entry]
        if row >= base and e_time[entry] >= since_ns and (oldest < 0 or row < oldest):
            oldest = row
    return oldest


@numba.njit(cache=True, nogil=True)
def match_batch(time, nbytes, action, sector, pid, dev, dispatch_code, code_mask, category_shift,
                rwbs_with_bytes, rwbs_no_bytes, is_data, counted_as,
                s_sector, s_dev, s_head, s_tail, e_time, e_row, e_next, state,
                start, first_row, base, ts_s, out_sector, size, out_pid, out_dev, out_rwbs, latency, counts):
    """Match events start, start + 1, ... of a batch (in time order) into the open dispatches and the row
    columns, up to the batch's end or a dispatch without room (see OpenDispatches._grow).

    The events' RWBS codes are looked up by their category bits (rwbs_with_bytes, rwbs_no_bytes); per
    code, is_data says whether a dispatch of it is a data request, and counted_as the position in MATCH_COUNTS
    of what one that is no data row counts as. The columns hold the rows from `base` on; the data
    dispatches become rows first_row,
    first_row + 1, ... (written at row - base, latency NaN until closed). state: [keys, free, live],
    updated. Returns (the event to go on from, the rows written)."""
    keys, free, live = state[0], state[1], state[2]
    row = first_row
    i = start
    while i < len(time):
        slot = _find(s_sector, s_dev, sector[i], np.int64(dev[i]))
        if (action[i] & code_mask) == dispatch_code:
            if free == EMPTY or 2 * (keys + 1) > len(s_dev):
                break
            category = action[i] >> category_shift
            rwbs = rwbs_with_bytes[category] if nbytes[i] else rwbs_no_bytes[category]
            this_row = NO_ROW
            if is_data[rwbs] and nbytes[i] >= 512:
                sectors = np.uint64(nbytes[i] >> 9)
                if sector[i] > np.uint64(MAX_END_SECTOR) - sectors or sectors > np.uint64(MAX_REQUEST_SECTORS):
                    counts[_BEYOND] += 1
                else:
                    this_row = row
                    at = row - base
                    ts_s[at] = time[i] / 1e9
                    out_sector[at] = np.int64(sector[i])
                    size[at] = np.int64(sectors)
                    out_pid[at] = pid[i]
                    out_dev[at] = dev[i]
                    out_rwbs[at] = rwbs
                    latency[at] = np.nan
                    row += 1
            else:
                counts[counted_as[rwbs]] += 1
            entry = free
            free = e_next[entry]
            e_time[entry], e_row[entry], e_next[entry] = time[i], this_row, EMPTY
            live += 1
            if s_dev[slot] == EMPTY:
                s_sector[slot], s_dev[slot], s_head[slot] = sector[i], dev[i], entry
                keys += 1
            else:
                e_next[s_tail[slot]] = entry
            s_tail[slot] = entry
        elif s_dev[slot] == EMPTY:
            counts[_UNMATCHED] += 1
        else:
            entry = s_head[slot]
            closed = e_row[entry]
            if e_next[entry] == EMPTY:
                _delete(s_sector, s_dev, s_head, s_tail, slot)
                keys -= 1
            else:
                s_head[slot] = e_next[entry]
            waited_us = (time[i] - e_time[entry]) / 1e3
            e_row[entry], e_next[entry] = FREE, free
            free = entry
            live -= 1
            if closed != NO_ROW:
                # a row already handed on was open for MAX_LATENCY_US: its completion is out of step too
                if waited_us < 0 or waited_us > MAX_LATENCY_US or closed < base:
                    counts[_JUMPS] += 1
                else:
                    latency[closed - base] = waited_us
        i += 1
    state[0], state[1], state[2] = keys, free, live
    return i, row - first_row
