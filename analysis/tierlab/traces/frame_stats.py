"""trace-stats through the request frames, for every trace format: the requests go to the metrics a chunk at a time
as they are matched, so that memory follows what the metrics keep (the distinct page runs, the latencies), not the
trace. The reference the compiled pass over binary files (traces/native.py) is held to."""

import numpy as np
import pandas as pd

from ..metrics.patterns import AccessTotals, Pieces, Streams, device_codes, sequential_of
from .blkparse_text import parse_blkparse_text
from .blktrace import parse_blktrace_binary
from .frame import concat_requests
from .ftrace import parse_ftrace
from .ftrace_raw import parse_ftrace_raw
from .matcher import SINK_ROWS
from .prefetch import sink_on_thread

PARSERS = {"blkparse": parse_blkparse_text, "ftrace": parse_ftrace, "ftrace-raw": parse_ftrace_raw}


class StatsSink:
    """The metrics of requests given a chunk at a time, in dispatch order (a Matcher's sink). A chunk is made
    request pieces (`pieces`, which carries the sequential test's streams from chunk to chunk, so chunks
    come in order) and added to the totals (`add`): two steps, so that they can run on two threads."""

    def __init__(self, page_bytes: int):
        self.page_bytes = page_bytes
        self.totals, self.streams = AccessTotals(), Streams(0)
        self.devices: set[str] = set()

    def __call__(self, requests: pd.DataFrame) -> None:
        self.add(self.pieces(requests))

    def pieces(self, requests: pd.DataFrame) -> Pieces:
        reads = (requests["op"] == "R").to_numpy()
        sequential = np.zeros(len(requests), dtype=bool)
        sequential[reads] = sequential_of(requests["ts_s"].to_numpy()[reads], device_codes(requests["device"])[reads],
                                          requests["sector"].to_numpy(dtype=np.int64)[reads],
                                          requests["size_sectors"].to_numpy(dtype=np.int64)[reads],
                                          self.page_bytes, streams=self.streams)
        self.devices.update(requests["device"].unique().tolist())
        return Pieces.of_requests(requests, sequential, self.page_bytes)

    def add(self, pieces: Pieces) -> None:
        self.totals.add(pieces)


def _parse(kind: str, paths: list[str], tolerate_errors: bool, sink=None):
    if kind == "binary":
        return parse_blktrace_binary(paths, tolerate_errors, sink=sink)
    return PARSERS[kind](paths[0], tolerate_errors, sink=sink)


def frame_stats(sources: list[tuple[str, list[str]]], tolerate_errors: bool, page_bytes: int,
                progress=None) -> tuple[dict, dict, list[str]]:
    """The figures (AccessTotals' summary), the parsers' counts and the devices' names of the sources (see
    formats.trace_sources), together; `progress(done, total, label)` is called before each source is read. One
    source streams into the metrics; several (say a binary trace and an ftrace file) are read whole, merged by
    dispatch time, then measured in the same chunks."""
    sink = StatsSink(page_bytes)
    counts: dict[str, int] = {}
    parsed = []
    # the matcher's thread makes each chunk's pieces, the sink's adds them up: the adding (the page unions'
    # merges) is the larger share
    with sink_on_thread(sink.add) as add:
        def measure(requests: pd.DataFrame) -> None:
            add(sink.pieces(requests))

        for number, (kind, source) in enumerate(sources, 1):
            if progress:
                progress(number, len(sources), f"{' '.join(source)} ({kind})")
            trace = _parse(kind, source, tolerate_errors, measure if len(sources) == 1 else None)
            for key, value in trace.counts.items():
                counts[key] = counts.get(key, 0) + value
            parsed.append(trace.requests)
        if len(sources) > 1:
            requests = concat_requests(parsed).sort_values("ts_s", kind="stable").reset_index(drop=True)
            del parsed
            for begin in range(0, len(requests), SINK_ROWS):
                measure(requests.iloc[begin:begin + SINK_ROWS])
    return sink.totals.summary(), counts, sorted(sink.devices)
