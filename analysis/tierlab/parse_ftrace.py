"""Parse ftrace text (block_rq_issue/block_rq_complete tracepoints, or the `blk`
tracer's D/C lines) into dispatched requests matched with their completions.

No statistics here: the frame has one row per dispatched data request.
Completions run in IRQ context (pid 0), so a completion is matched to the
oldest open dispatch with the same device and sector.
"""

import re
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .errors import TraceFormatError

REQUEST_COLUMNS = ["ts_s", "device", "op", "rwbs", "sector", "size_sectors", "latency_us", "pid", "process"]
# the text columns are categoricals (few distinct values): their categories are the values that occur, sorted
REQUEST_DTYPES = {"ts_s": "float64", "device": "category", "op": "category", "rwbs": "category", "sector": "int64",
                  "size_sectors": "int64", "latency_us": "float64", "pid": "int64", "process": "category"}
CATEGORICAL_COLUMNS = [name for name, dtype in REQUEST_DTYPES.items() if dtype == "category"]

_LINE = re.compile(
    r"^\s*(?P<task>.+?)-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?"
    r"(?P<ts>\d+\.\d+):\s+(?P<rest>.*)$"
)
_ISSUE = re.compile(
    r"^block_rq_issue:\s+(?P<maj>\d+),(?P<min>\d+)\s+(?P<rwbs>\S+)\s+\d+\s+\(.*?\)\s+"
    r"(?P<sector>\d+)\s+\+\s+(?P<size>\d+)(?:\s+\S+)?\s+\[(?P<comm>.*)\]$"
)
_COMPLETE = re.compile(
    r"^block_rq_complete:\s+(?P<maj>\d+),(?P<min>\d+)\s+(?P<rwbs>\S+)\s+\(.*?\)\s+"
    r"(?P<sector>\d+)\s+\+\s+(?P<size>\d+)(?:\s+\S+)?\s+\[(?P<error>-?\d+)\]$"
)
# the global `blk` tracer: "7,0 D RS 305152 + 32 [mariadbd]" (also with an "(...)" payload)
_BLK = re.compile(
    r"^(?P<maj>\d+),(?P<min>\d+)\s+(?P<action>[A-Z])\s+(?P<rwbs>\S+)\s+(?:\(.*?\)\s+)?"
    r"(?P<sector>\d+)\s+\+\s+(?P<size>\d+)(?:\s+\[(?P<comm>.*?)\])?"
)
_MARKER = re.compile(r"^tracing_mark_write:\s+(?P<text>.*)$")


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


@dataclass
class BlockTrace:
    requests: pd.DataFrame
    markers: list[tuple[float, str]]
    counts: dict = field(default_factory=dict)


class RequestPairer:
    """Pairs dispatches with completions, for the text parsers.

    A completion closes the oldest open dispatch with the same device and sector. Flush,
    discard, other and zero-length dispatches take part in matching but are only counted.
    Times are given in ticks (ftrace: seconds; blkparse: nanoseconds, kept whole for exact latencies)."""

    def __init__(self, ticks_per_second: float = 1.0):
        self.ticks_per_second = ticks_per_second
        self.rows: list[list] = []
        self.open: dict[tuple[str, int], deque] = defaultdict(deque)
        self.counts = {"flush": 0, "discard": 0, "other_op": 0, "zero_length": 0,
                       "dispatch_without_completion": 0, "completion_without_dispatch": 0}

    def dispatch(self, ts: float, device: str, op: str, rwbs: str, sector: int, size: int, pid: int, process) -> None:
        row = [ts, device, op, rwbs, sector, size, float("nan"), pid, process]
        self.open[(device, sector)].append(row)
        if op == "F":
            self.counts["flush"] += 1
        elif op == "D":
            self.counts["discard"] += 1
        elif op == "N":
            self.counts["other_op"] += 1
        elif size == 0:
            self.counts["zero_length"] += 1
        else:
            self.rows.append(row)

    def complete(self, ts: float, device: str, sector: int) -> None:
        waiting = self.open.get((device, sector))
        if waiting:
            row = waiting.popleft()
            row[6] = (ts - row[0]) / (self.ticks_per_second / 1e6)
        else:
            self.counts["completion_without_dispatch"] += 1

    def result(self, markers: list[tuple[float, str]], extra_counts: dict) -> BlockTrace:
        self.counts["dispatch_without_completion"] = sum(len(q) for q in self.open.values())
        for row in self.rows:
            row[0] = row[0] / self.ticks_per_second
        frame = pd.DataFrame(self.rows, columns=REQUEST_COLUMNS).astype(REQUEST_DTYPES)
        return BlockTrace(frame.sort_values("ts_s", kind="stable").reset_index(drop=True), markers,
                          {**self.counts, **extra_counts})


def concat_requests(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """pd.concat of request frames (further columns allowed), ignoring their indexes; categorical
    columns stay categorical, over the union of the frames' categories (pd.concat alone falls back
    to object where the categories differ)."""
    frames = list(frames)
    for column in CATEGORICAL_COLUMNS:
        if all(isinstance(frame[column].dtype, pd.CategoricalDtype) for frame in frames):
            categories = sorted(set().union(*(frame[column].cat.categories for frame in frames)))
            frames = [frame.assign(**{column: frame[column].cat.set_categories(categories)}) for frame in frames]
    return pd.concat(frames, ignore_index=True)


def parse_ftrace(path: str | Path, tolerate_errors: bool = False) -> BlockTrace:
    """Parse one ftrace text file. Unparseable event lines raise TraceFormatError
    naming the file and line, unless tolerate_errors, which skips and counts them."""
    path = Path(path)
    pairer = RequestPairer()
    markers: list[tuple[float, str]] = []
    bad_lines = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if line.startswith("#") or not line.strip():
                continue
            match = _LINE.match(line.rstrip("\n"))
            event = None
            if match:
                rest = match["rest"]
                ts = float(match["ts"])
                if (m := _MARKER.match(rest)) is not None:
                    markers.append((ts, m["text"].strip()))
                    continue
                if (m := _ISSUE.match(rest)) is not None:
                    event = ("D", m, m["comm"])
                elif (m := _COMPLETE.match(rest)) is not None:
                    event = ("C", m, None)
                elif (m := _BLK.match(rest)) is not None:
                    if m["action"] not in ("D", "C"):
                        continue
                    event = (m["action"], m, m["comm"])
                elif rest.startswith("block_") and not rest.startswith(("block_rq_issue:", "block_rq_complete:")):
                    continue
            if event is None:
                if match is None or "block_rq" in line:
                    bad_lines += 1
                    if not tolerate_errors:
                        raise TraceFormatError(
                            f"{path}:{number}: not an ftrace block event line: {line.strip()[:120]!r}; "
                            "pass --tolerate-errors to skip such lines (they are counted)"
                        )
                continue
            action, m, comm = event
            device = f"{m['maj']}:{m['min']}"
            if action == "D":
                pairer.dispatch(ts, device, classify(m["rwbs"]), m["rwbs"], int(m["sector"]), int(m["size"]),
                                int(match["pid"]), comm or match["task"])
            else:
                pairer.complete(ts, device, int(m["sector"]))
    return pairer.result(markers, {"bad_lines": bad_lines})
