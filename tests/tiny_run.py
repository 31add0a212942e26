"""A run directory with one query (q03) traced through ftrace, and more if added: for the analysis' unit tests
and the window analysis beside the query loop (integration)."""

import json

HEADER = "# tracer: nop\n#\n"


def line(ts: float, event: str) -> str:
    return f"        mariadbd-12033   [000] .....   {ts:.6f}: {event}\n"


def read(ts: float, sector: int) -> str:
    return (line(ts, f"block_rq_issue: 7,1 R 16384 () {sector} + 32 be,0,4 [mariadbd]")
            + line(ts + 0.0001, f"block_rq_complete: 7,1 R () {sector} + 32 be,0,4 [0]"))


def make_run(tmp_path, body: str, schema_version: int = 3):
    """A run of MariaDB; in schema_version 1 its extent map names only each file's object, and before 3 its
    settings are config/study.json's `study`."""
    run = tmp_path / "20261123T092837Z_mariadb_tpch-sf0.1_C+O"
    for sub in ("config", "raw/traces"):
        (run / sub).mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"schema_version": schema_version, "run_id": run.name}))
    config, key = ("run.json", "settings") if schema_version >= 3 else ("study.json", "study")
    (run / "config" / config).write_text(json.dumps({
        "run_id": run.name, "started_at": "2026-11-23T09:28:37Z", "host": "localhost", "versions": {}, "tiers": [],
        key: {"engine": "mariadb", "workload": "tpch", "scale_factor": 0.1, "queries": ["q03"], "tries": 1,
                  "cold": True, "query_timeout_s": 3600, "layout": "C+O", "page_size_bytes": 16384,
                  "placement": {"lineitem": "capacity"}}}))
    (run / "raw" / "tiers.json").write_text(json.dumps([{"name": "nand", "role": "capacity", "device": "7:1"}]))
    lineitem = {"object": "lineitem", "path": "/t/lineitem.ibd", "device": "7:1", "extents": [[0, 0, 1 << 20]]}
    if schema_version >= 2:
        lineitem.update(kind="table", table="lineitem", offset_bytes=0)
    (run / "raw" / "extents.json").write_text(json.dumps({"files": [lineitem]}))
    add_query(run, "q03", body)
    return run


def add_query(run, query: str, body: str) -> None:
    """A query row, traced through ftrace with `body` (try 1)."""
    with open(run / "raw" / "queries.jsonl", "a") as rows:
        rows.write(json.dumps(
            {"query": query, "try": 1, "status": "ok", "error": "", "elapsed_s": 1.0, "rows": 10, "cache": "cold",
             "started_at": "2026-11-23T09:28:40Z", "trace_files": [f"{query}_try1.ftrace"], "events_lost": 0}) + "\n")
    (run / "raw" / "traces" / f"{query}_try1.ftrace").write_text(HEADER + body)
