"""The matcher every trace format shares: completions matched to their dispatches, batch after batch,
into the request frame (traces.frame), with what it counts beside it.

What the result holds: rows are the dispatches (D) of data requests (R or W in the RWBS, at least one sector),
in time order; a completion (C) closes the oldest open dispatch with the same device and sector; flush,
discard, other (including SCSI passthrough, BLK_TC_PC) and zero-length dispatches take part in matching but
are only counted; ts_s is the trace clock in seconds; process is the name of the last process note for the
pid at or before the dispatch, else the pid's first note (blkparse uses the first note for a pid throughout,
which differs only where a pid was reused), missing where the pid has no note (blkparse prints "(null)").
"""

from collections import defaultdict

import numpy as np
import pandas as pd

from .blk import (
    BLK_TA_ISSUE,
    BLK_TC_SHIFT,
    CODE_MASK,
    COUNT_KEYS,
    COUNTED_AS,
    IS_DATA,
    MATCH_COUNTS,
    OPS,
    RWBS,
    RWBS_NO_BYTES,
    RWBS_WITH_BYTES,
    Notes,
    device_name,
)
from .frame import MAX_LATENCY_US, REQUEST_COLUMNS, REQUEST_DTYPES
from .open_dispatches import OpenDispatches

# with a sink, the final rows handed over at a time
SINK_ROWS = 1 << 18


class _Column:
    """An array filled from the front and grown in place (realloc moves large blocks without
    copying them); pages never written are never touched."""

    def __init__(self, dtype, capacity: int):
        self.array = np.empty(max(capacity, 1024), dtype)
        self.length = 0

    def room(self, n: int) -> np.ndarray:
        """The whole array, with room for n more values after the first `length` (drop it before the next call)."""
        end = self.length + n
        if end > len(self.array):
            self.array.resize(max(end, len(self.array) * 3 // 2), refcheck=False)
        return self.array

    def done(self) -> np.ndarray:
        array, self.array = self.array, None
        array.resize(self.length, refcheck=False)
        return array

    def take_front(self, n: int) -> np.ndarray:
        """The first n values, removed (the rest move to the front)."""
        taken = self.array[:n].copy()
        self.array[:self.length - n] = self.array[n:self.length]
        self.length -= n
        return taken


class Matcher:
    """Matches completions to dispatches batch after batch, and collects the request rows.

    Events are taken in time order (ties as given); a completion closes the oldest open dispatch of its
    device and sector (see open_dispatches), and one without any is counted. Every dispatch takes part
    in the matching; only data dispatches (not flushes, discards or zero-length ones, nor requests
    beyond 2^63 bytes, which are counted) become rows.

    A request whose completion comes before its dispatch, or over MAX_LATENCY_US after it, has a time
    field out of step: it stays a row, without a latency, and is counted (time_jumps).

    With a sink, the rows are not kept to the end: whenever SINK_ROWS of them are final, they are handed to
    sink(frame) in dispatch order and dropped, so that memory follows the requests in flight, not the trace.
    The frame has REQUEST_COLUMNS but process (a pid's last name is known only at the end); its device's
    categories are every device seen so far, in the order they came, so that a device keeps its code from
    frame to frame. A row is final once it is closed, or open for MAX_LATENCY_US of the trace's clock (its
    completion, if one comes, is then a time jump)."""

    def __init__(self, capacity: int, sink=None):
        self.counts = dict.fromkeys(COUNT_KEYS, 0)
        self.devices: dict[int, int] = {}
        self.sink = sink
        if sink is not None:
            capacity = min(capacity, 2 * SINK_ROWS)
        self.columns = {name: _Column(dtype, capacity) for name, dtype in (
            ("ts_s", np.float64), ("sector", np.int64), ("size", np.int64), ("latency", np.float64), ("pid", np.int64),
            ("dev", np.uint16), ("rwbs", np.uint8))}
        self.rows = 0
        self.base = 0          # the row in the columns' first place (the rows before went to the sink)
        self.latest = 0        # with a sink, the trace's clock so far, ns: the latest median time of a batch
        self.open = OpenDispatches()
        self._counts = np.zeros(len(MATCH_COUNTS), np.int64)   # the compiled pass's, into counts at finish

    def _device_codes(self, device: np.ndarray) -> np.ndarray:
        first = device[0]
        distinct = [first] if (device == first).all() else pd.unique(device)
        for value in distinct:
            self.devices.setdefault(int(value), len(self.devices))
        if len(distinct) == 1:
            return np.full(len(device), self.devices[int(first)], dtype=np.uint16)
        known = np.array(sorted(self.devices), dtype=np.uint32)
        codes = np.array([self.devices[int(v)] for v in known], dtype=np.uint16)
        return codes[np.searchsorted(known, device)]

    def feed(self, events: dict):
        times = np.asarray(events["time"], np.int64)
        n = len(times)
        if not n:
            return
        if self.sink is not None:
            # a median (of a sample), not the maximum: one corrupt time must not make every open dispatch stale
            self.latest = max(self.latest, int(np.median(times[::max(1, n // 63)])))
        cols = self.columns
        arrays = [cols[name].room(n) for name in ("ts_s", "sector", "size", "pid", "dev", "rwbs", "latency")]
        fields = (times, np.asarray(events["bytes"], np.uint32), np.asarray(events["action"], np.uint32),
                  np.asarray(events["sector"], np.uint64), np.asarray(events["pid"], np.uint32),
                  self._device_codes(events["device"]), BLK_TA_ISSUE, CODE_MASK, BLK_TC_SHIFT,
                  RWBS_WITH_BYTES, RWBS_NO_BYTES, IS_DATA, COUNTED_AS)
        self.rows += self.open.match(fields, self.rows, self.base, arrays, self._counts)
        del arrays
        for column in cols.values():
            column.length = self.rows - self.base
        if self.sink is not None:
            self._hand_over(SINK_ROWS)

    def finish(self):
        self.counts.update(zip(MATCH_COUNTS, self._counts.tolist(), strict=True))
        self.counts["dispatch_without_completion"] = self.open.live
        if self.sink is not None:
            self._hand_over(1, final=True)

    def device_names(self) -> list[str]:
        """The devices' names by their codes in the dev column."""
        return [device_name(device) for device in sorted(self.devices, key=self.devices.get)]

    def _hand_over(self, least: int, final: bool = False) -> None:
        """The final rows to the sink, if there are at least `least` of them."""
        waiting = -1 if final else self.open.oldest_waiting_row(self.base, self.latest - int(MAX_LATENCY_US * 1000))
        final_rows = (self.rows if waiting < 0 else waiting) - self.base
        if final_rows < least:
            return
        taken = {name: column.take_front(final_rows) for name, column in self.columns.items()}
        self.base += final_rows
        self.sink(_frame(taken, self.device_names(), every_device=True))


def _categorical(values: list, codes: np.ndarray) -> pd.Categorical:
    """values[codes] as a categorical over the distinct values that occur (sorted); None is missing."""
    used = np.bincount(codes, minlength=len(values)) > 0
    categories = sorted({value for value, seen in zip(values, used, strict=True) if seen and value is not None})
    position = {value: i for i, value in enumerate(categories)}
    lookup = np.array([position.get(value, -1) for value in values], dtype=np.min_scalar_type(-len(categories) - 1))
    return pd.Categorical.from_codes(lookup[codes], categories)


def _process(pid: np.ndarray, ts_s: np.ndarray, notes: list[tuple[int, int, str]]) -> pd.Categorical:
    """Per row, the pid's last process note at or before the row's time, else its first note;
    missing for pids without notes."""
    history: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for time, note_pid, name in sorted(notes, key=lambda note: note[0]):
        history[note_pid].append((time, name))
    codes, distinct = pd.factorize(pid)
    names = [history[p][0][1] if p in history else None for p in distinct.tolist()]
    for p in distinct.tolist():
        if len({name for _, name in history.get(p, [])}) > 1:     # a reused pid
            times = np.array([time for time, _ in history[p]], dtype=np.int64) / 1e9
            rows = np.flatnonzero(pid == p)
            codes[rows] = len(names) + np.maximum(np.searchsorted(times, ts_s[rows], "right") - 1, 0)
            names.extend(name for _, name in history[p])
    return _categorical(names, codes)


def process_notes(events: dict, process: np.ndarray, last: dict[int, str], notes: Notes) -> None:
    """A process note wherever a pid's dispatches change name (and at its first), as blktrace writes them,
    for text traces whose dispatches carry their process's name (process: the name, None for the others);
    last: each pid's name so far, carried from batch to batch."""
    dispatches = np.flatnonzero(pd.notna(process))
    if not len(dispatches):
        return
    codes, names = pd.factorize(process[dispatches])
    pids = events["pid"][dispatches]
    order = np.argsort(pids, kind="stable")
    pid, code = pids[order], codes[order]
    first = np.r_[True, pid[1:] != pid[:-1]]
    for j in np.flatnonzero(first | np.r_[True, code[1:] != code[:-1]]):
        who, name = int(pid[j]), names[code[j]]
        if not first[j] or last.get(who) != name:
            notes.process.append((int(events["time"][dispatches[order[j]]]), who, name))
    is_last = np.r_[pid[1:] != pid[:-1], True]
    last.update(zip(pid[is_last].tolist(), names[code[is_last]], strict=True))


def _frame(columns: dict, device_names: list[str], every_device: bool = False) -> pd.DataFrame:
    """The request frame of the matcher's columns, without process. The device's categories are the devices
    that occur, sorted; or, every_device, all of device_names in their order (the codes of the dev column)."""
    rwbs, dev = columns["rwbs"], columns["dev"]
    device = pd.Categorical.from_codes(dev, device_names) if every_device else _categorical(device_names, dev)
    return pd.DataFrame({"ts_s": columns["ts_s"], "device": device,
                         "op": _categorical(OPS[:256], rwbs), "rwbs": _categorical(RWBS[:256], rwbs),
                         "sector": columns["sector"], "size_sectors": columns["size"], "latency_us": columns["latency"],
                         "pid": columns["pid"]}, copy=False)


def request_frame(matcher: Matcher, notes: Notes) -> pd.DataFrame:
    """The rows the matcher kept (none where it had a sink), with their processes."""
    if matcher.columns["ts_s"].length == 0:
        return pd.DataFrame(columns=REQUEST_COLUMNS).astype(REQUEST_DTYPES)
    frame = _frame({name: column.done() for name, column in matcher.columns.items()}, matcher.device_names())
    frame["process"] = _process(frame["pid"].to_numpy(), frame["ts_s"].to_numpy(), notes.process)
    return frame
