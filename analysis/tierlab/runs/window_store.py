"""Query windows analysed while the run went on (`tierlab analyze --follow`), kept in tables/windows/ until `tierlab
analyze` takes them: each window's summary (<label>.json) and its requests (<label>.parquet). A kept window is
taken only when it was made from the same trace files, extent map and tiers with the same parameters as the
analysis that takes it; any other is analysed again from its trace."""

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..files import replace_text
from .results import REQUEST_SCHEMA, Run
from .window_summary import WindowParameters, WindowSummary

DIRECTORY = Path("tables") / "windows"
# a trace file is told from another of its size by a digest of its two ends: a window's file is written once, by
# the query loop, and a copy cut short or of another window differs there; the whole file would cost a read of
# every trace by the analysis that takes them
END_BYTES = 1 << 16


def _ends_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as trace:
        digest.update(trace.read(END_BYTES))
        trace.seek(max(0, path.stat().st_size - END_BYTES))
        digest.update(trace.read(END_BYTES))
    return digest.hexdigest()


def run_key(run: Run, parameters: WindowParameters) -> dict:
    """What every window of a run is made from besides its own trace files: the run's extent map and tiers, the
    parameters (read once for all of a run's windows: the extent map of a database of many files is large)."""
    return {"extents": hashlib.sha256((run.path / "raw" / "extents.json").read_bytes()).hexdigest(),
            "tiers": {t["device"]: t["name"] for t in run.tiers},
            "parameters": asdict(parameters)}


def key(run: Run, traced: dict, shared: dict) -> dict:
    """What a window's summary was made from: its trace files, and what run_key() gave for the run."""
    traces = run.path / "raw" / "traces"
    return {"trace_files": [[name, (traces / name).stat().st_size, _ends_digest(traces / name)]
                            for name in traced["trace_files"]], **shared}


def _plain(value):
    """numpy's scalars as JSON takes them."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not kept in a window's summary")


def keep(run_dir: Path, label: str, window_key: dict, summary: WindowSummary, requests: pa.Table) -> Path:
    """Keep a window's summary and requests; the summary is written last, so that a window is kept whole or not
    at all."""
    directory = run_dir / DIRECTORY
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(requests, directory / f"{label}.parquet")
    path = directory / f"{label}.json"
    replace_text(path, json.dumps({"key": window_key, "summary": summary.as_record()}, default=_plain))
    return path


def is_kept(run_dir: Path, label: str, window_key: dict) -> bool:
    """Whether a window is kept, made from what window_key names."""
    path = run_dir / DIRECTORY / f"{label}.json"
    return path.is_file() and json.loads(path.read_text())["key"] == json.loads(json.dumps(window_key))


def take(run_dir: Path, label: str) -> tuple[WindowSummary, pa.Table]:
    """A kept window's summary and requests."""
    directory = run_dir / DIRECTORY
    summary = WindowSummary.from_record(json.loads((directory / f"{label}.json").read_text())["summary"])
    return summary, pq.read_table(directory / f"{label}.parquet", schema=REQUEST_SCHEMA)
