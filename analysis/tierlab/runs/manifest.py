"""manifest.json: what a run is, how it went, and a checksum of every artifact.

Assembled from the files the playbook left in the run directory, so it can
be rewritten at any time (at the start, partial; at the end, final).
"""

import hashlib
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from ..errors import RunDirError
from ..files import replace_text
from .settings import WORKLOAD_VARIABLES

# the results format this tierlab writes (results/README.md)
SCHEMA_VERSION = 3
STATUSES = ("ok", "partial", "failed")
# what the manifest's layout says of each file, and what an observed instance's files say beyond that
FILE_KEYS = ("object", "kind", "path", "tier", "offset_bytes", "size_bytes", "stored_bytes")
OBSERVED_FILE_KEYS = ("tablespace", "qualified")


def table_bytes(tables: dict) -> dict[str, int]:
    """What each table of a manifest's layout.tables (or unit) takes on a tier: what it stores there (manifests
    written before stored bytes have its size)."""
    return {name: int(table.get("stored_bytes", table["size_bytes"])) for name, table in tables.items()}


def tiers_dilation(tiers: list[dict]) -> float | None:
    """How many times a run's modelled tiers stretched modelled time, from their calibration (None: no modelled
    tier); the same on every modelled tier of a host, and 1 for tiers calibrated before dilation existed."""
    found = {t["calibration"].get("dilation", 1.0) for t in tiers if t.get("calibration")}
    return max(found) if found else None


def read_run_config(run_dir: Path) -> dict | None:
    """config/run.json, what the run was started with: run_id, started_at, host, tiers, versions and its validated
    settings; runs of results formats 1 and 2 wrote it as config/study.json, the settings under `study`. None when
    the run has neither."""
    for name, settings_key in (("run.json", "settings"), ("study.json", "study")):
        path = run_dir / "config" / name
        if path.exists():
            try:
                record = json.loads(path.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise RunDirError(f"{path} is not valid JSON ({exc}); it was damaged after the run wrote it") from None
            record["settings"] = record.pop(settings_key)
            return record
    return None


def query_rows(run_dir: Path) -> list[dict]:
    """The rows raw/queries.jsonl holds, one per query try, as the query loop wrote them. A last line without its
    newline that is not a row is an append cut short (the host stopped in the middle of the write) and is left out,
    as the query loop leaves it out (tierlab_host/runner.py): its try runs again on resume."""
    rows_file = run_dir / "raw" / "queries.jsonl"
    text = rows_file.read_text() if rows_file.exists() else ""
    lines = text.splitlines()
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            if number == len(lines) and not text.endswith("\n"):
                continue
            row = error
        if not isinstance(row, dict):
            raise RunDirError(f"{rows_file}:{number}: not a query row ({row}): each line is one JSON object as the "
                              "query loop writes it; it was damaged after the run wrote it (remove the line and "
                              "resume the run to measure that query again)")
        rows.append(row)
    return rows


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _optional_json(path: Path):
    return json.loads(path.read_text()) if path.exists() else None


def artifacts(run_dir: Path) -> list[dict]:
    return [
        {"path": str(p.relative_to(run_dir)), "bytes": p.stat().st_size, "sha256": sha256(p)}
        for p in sorted(run_dir.rglob("*"))
        if p.is_file() and p.name != "manifest.json"
    ]


def _utc(text: str) -> datetime:
    """A timestamp; Ansible's now(utc=true) writes UTC without an offset."""
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def phase_durations(phases: dict[str, str], finished_at: str) -> dict[str, float]:
    """Seconds per phase from the finish times of consecutive phases ('started' first)."""
    marks = sorted(((_utc(t), name) for name, t in phases.items()), key=lambda m: m[0])
    marks.append((_utc(finished_at), "collect"))
    return {name: round((t - prev).total_seconds(), 3) for (prev, _), (t, name) in zip(marks, marks[1:], strict=False)}


def layout_files(settings: dict, extents: dict | None) -> dict:
    """Per table: its tier by the layout, where its own file is (the first segment of its heap),
    the bytes of all its files and the bytes they hold on the devices (their extents': less where
    the engine or the file system compressed them, or punched holes), and each file (indexes, TOAST
    and segments where the engine keeps them apart) with the tier that holds it. An observation's units are the tables
    of its extent map, each on the capacity tier (the storage the instance has)."""
    by_table: dict[str, list[dict]] = {}
    for item in (extents or {}).get("files", []):
        # runs written before objects had several files name only the table
        by_table.setdefault(item.get("table", item["object"]), []).append(item)
    # an observation asked for no layout: its units are where they are, on the instance's own disks
    placement = settings["placement"] if settings["placement"] is not None else {table: "capacity" for table in by_table}
    layout = {}
    for table, tier in placement.items():
        files = [{**f, "stored_bytes": sum(length for _, _, length in f["extents"])} for f in by_table.get(table, [])]
        own = next((f for f in files if f["object"] == table and not f.get("offset_bytes")), {})
        layout[table] = {
            "tier": tier, "tier_name": own.get("tier"), "path": own.get("path"), "device": own.get("device"),
            # runs written before extents had sizes have none to sum
            "size_bytes": sum(f["size_bytes"] for f in files) if files and all("size_bytes" in f for f in files)
            else None,
            "stored_bytes": sum(f["stored_bytes"] for f in files) if files else None,
            # an observed PostgreSQL relation's files name its tablespace (where an undo takes it back), and its own
            # file its qualified name
            "files": [{key: f.get(key) for key in (*FILE_KEYS, *OBSERVED_FILE_KEYS) if key in f or key in FILE_KEYS}
                      for f in files],
        }
    return layout


def tiers_fidelity(tiers: list[dict], tiers_check: dict | None) -> dict:
    """How faithful the run's emulated tiers were: the dilation of modelled time and the self-check's verdicts."""
    verdicts = (tiers_check or {}).get("fidelity") or {}
    return {"dilation": tiers_dilation(tiers), "verdict": verdicts.get("verdict"),
            "tiers": verdicts.get("tiers", {}), "reasons": verdicts.get("reasons", [])}


def build(run_dir: Path, status: str, error: str = "", phases: dict | None = None, with_artifacts: bool = True) -> dict:
    record = read_run_config(run_dir)
    if record is None:
        raise RunDirError(f"{run_dir / 'config' / 'run.json'} is missing; a run directory holds it from the playbook")
    settings = record["settings"]
    previous = _optional_json(run_dir / "manifest.json") or {}
    rows = query_rows(run_dir)
    expected = len(settings["queries"]) * settings["tries"]
    if status == "auto":
        status = "ok" if len(rows) >= expected else "partial"
    finished_at = datetime.now(UTC).isoformat()
    attempts = list(previous.get("attempts", []))
    if phases:
        attempts.append({"finished_at": finished_at, "status": status, "error": error,
                         "phase_s": phase_durations(phases, finished_at)})
    trace_backend = _optional_json(run_dir / "raw" / "trace_backend.json")
    tiers = _optional_json(run_dir / "raw" / "tiers.json") or record["tiers"]
    tiers_check = _optional_json(run_dir / "raw" / "tiers_check.json")
    engine = _optional_json(run_dir / "raw" / "engine.json") or {"name": settings["engine"]}
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": record["run_id"],
        "status": status,
        "error": error,
        "started_at": record["started_at"],
        "finished_at": finished_at if status != "partial" else None,
        "host": record["host"],
        "tiers": tiers,
        "tiers_check": tiers_check,
        "tiers_fidelity": tiers_fidelity(tiers, tiers_check),
        "engine": engine,
        "workload": {
            "name": settings["workload"], "scale": settings.get("scale"),
            **{name: settings.get(name) for name in WORKLOAD_VARIABLES}, "queries": settings["queries"],
            "tries": settings["tries"], "cache_state": "cold" if settings["cold"] else "warm",
            "query_timeout_s": settings["query_timeout_s"],
        },
        "settings": settings,
        "layout": {"name": settings["layout"],
                   "tables": layout_files(settings, _optional_json(run_dir / "raw" / "extents.json"))},
        "load": _optional_json(run_dir / "raw" / "load.json"),
        "queries": {
            "expected_tries": expected, "recorded_tries": len(rows),
            "by_status": dict(Counter(row["status"] for row in rows)),
        },
        "versions": {**record["versions"], "tracer_backend": (trace_backend or {}).get("backend")},
        "attempts": attempts,
        "artifacts": artifacts(run_dir) if with_artifacts else [],
    }


def write(run_dir: Path, status: str, error: str = "", phases: dict | None = None) -> dict:
    manifest = build(run_dir, status, error, phases)
    replace_text(run_dir / "manifest.json", json.dumps(manifest, indent=1, default=str))
    return manifest
