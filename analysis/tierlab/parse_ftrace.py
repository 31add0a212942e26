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
class FtraceTrace:
    requests: pd.DataFrame
    markers: list[tuple[float, str]]
    counts: dict = field(default_factory=dict)


def parse_ftrace(path: str | Path, tolerate_errors: bool = False) -> FtraceTrace:
    """Parse one ftrace text file. Unparseable event lines raise TraceFormatError
    naming the file and line, unless tolerate_errors, which skips and counts them."""
    path = Path(path)
    rows: list[list] = []
    open_dispatch: dict[tuple[str, int], deque] = defaultdict(deque)
    markers: list[tuple[float, str]] = []
    counts = {"flush": 0, "discard": 0, "other_op": 0, "zero_length": 0,
              "dispatch_without_completion": 0, "completion_without_dispatch": 0, "bad_lines": 0}
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
                    counts["bad_lines"] += 1
                    if not tolerate_errors:
                        raise TraceFormatError(
                            f"{path}:{number}: not an ftrace block event line: {line.strip()[:120]!r}; "
                            "pass --tolerate-errors to skip such lines (they are counted)"
                        )
                continue
            action, m, comm = event
            device = f"{m['maj']}:{m['min']}"
            sector = int(m["sector"])
            if action == "D":
                op = classify(m["rwbs"])
                size = int(m["size"])
                row = [ts, device, op, m["rwbs"], sector, size, float("nan"), int(match["pid"]), comm or match["task"]]
                open_dispatch[(device, sector)].append(row)
                if op == "F":
                    counts["flush"] += 1
                elif op == "D":
                    counts["discard"] += 1
                elif op == "N":
                    counts["other_op"] += 1
                elif size == 0:
                    counts["zero_length"] += 1
                else:
                    rows.append(row)
            else:
                queue = open_dispatch.get((device, sector))
                if queue:
                    row = queue.popleft()
                    row[6] = (ts - row[0]) * 1e6
                else:
                    counts["completion_without_dispatch"] += 1
    counts["dispatch_without_completion"] = sum(len(q) for q in open_dispatch.values())
    frame = pd.DataFrame(rows, columns=REQUEST_COLUMNS)
    frame = frame.astype({"ts_s": "float64", "device": "string", "op": "string", "rwbs": "string",
                          "sector": "int64", "size_sectors": "int64", "latency_us": "float64",
                          "pid": "int64", "process": "string"})
    return FtraceTrace(frame.sort_values("ts_s", kind="stable").reset_index(drop=True), markers, counts)
