"""A study's published tables, docs/findings/<study>/ (studies/findings.py writes them): reading them, and carrying
the points a study's directory did not run from them into what is published next. A study spread over sessions or
hosts (tierlab study --points) leaves its points in directories that are not all at hand when it is published."""

import json
from pathlib import Path

import pandas as pd

from ..errors import InputError


def read_published(study_dir: Path) -> dict:
    """One study's tables as write_gathered left them in study_dir."""
    tables = {"study": json.loads((study_dir / "study.json").read_text())}
    # the matrix's values as the study file gave them: text (a scale factor 1 is not 1.0, nor layout None NaN)
    text = {name: str for name in [*tables["study"]["study"]["matrix"], "verdict", "also_differs", "migration_tables"]}
    for path in sorted(study_dir.glob("*.csv")):
        tables[path.stem] = pd.read_csv(path, dtype=text, keep_default_na=False, na_values=[""])
    return tables


def _key(row: pd.Series | dict, columns: list[str]) -> tuple:
    return tuple(str(row[column]) for column in columns)


def _carried_rows(name: str, published: pd.DataFrame, new: pd.DataFrame | None, matrix: list[str],
                  published_runs: pd.DataFrame, carried: set[str], where: Path) -> pd.DataFrame:
    """The rows of a published table that rest on carried runs only. A row rests on the runs it names (advice: runs),
    else on every published point of its values of the matrix's variables, else on its run (run_id); a table with
    none of these is the study's as a whole, carried only where the directory did not make it. A row that rests on
    carried runs and others, or whose context the directory measured too, is refused: its figures would mix two
    directories' runs."""
    def refuse(what: str) -> InputError:
        return InputError(f"{where}: {name}.csv's {what} rests on runs of this directory and of the published points; "
                          "run every point of that context in one directory (tierlab study --points), or the study "
                          "whole")
    if "runs" in published:
        keys = ["setting", "context", "step"]
        new_keys = set() if new is None else {_key(row, keys) for _, row in new.iterrows()}
        keep = []
        for key, group in published.groupby(keys, sort=False):
            rests_on = set(" ".join(group["runs"].astype(str)).split())
            if rests_on <= carried:
                if _key(dict(zip(keys, key, strict=True)), keys) in new_keys:
                    raise refuse(f"advice on {key[0]} at {key[1]} ({key[2]})")
                keep.append(group)
            elif rests_on & carried:
                raise refuse(f"advice on {key[0]} at {key[1]} ({key[2]})")
        return pd.concat(keep) if keep else published.iloc[0:0]
    columns = [column for column in matrix if column in published]
    if columns:
        by_key: dict[tuple, set[bool]] = {}
        for _, run in published_runs[published_runs["status"] == "ok"].iterrows():
            by_key.setdefault(_key(run, columns), set()).add(run["run_id"] in carried)
        new_keys = set() if new is None else {_key(row, columns) for _, row in new.iterrows()}
        keep = []
        for _, row in published.iterrows():
            key = _key(row, columns)
            rests_on = by_key.get(key, set())
            if rests_on == {True}:
                if key in new_keys:
                    raise refuse(" ".join(f"{c}={v}" for c, v in zip(columns, key, strict=True)))
                keep.append(row)
            elif rests_on == {True, False}:
                raise refuse(" ".join(f"{c}={v}" for c, v in zip(columns, key, strict=True)))
        return pd.DataFrame(keep, columns=published.columns)
    if "run_id" in published:
        return published[published["run_id"].isin(carried)]
    return published.iloc[0:0] if new is not None else published


def carry_published(tables: dict, findings_dir: Path) -> dict:
    """A study gathered from a directory that ran some of its points only (tierlab study --points), with what is
    published of the points it has no ok run of: the tables of the same study (study file, matrix, repetitions) that
    an earlier directory, no longer at hand, left in findings_dir/<its name>/. The points' rows of runs.csv are kept,
    and the rows of the other tables that rest on their runs only (_carried_rows); study.json lists them under
    `carried`, with the study they ran in. Tables of another study of that name are replaced, as write_gathered
    replaces them."""
    summary = tables["study"]
    published_dir = findings_dir / summary["study"]["name"]
    if not (published_dir / "study.json").exists():
        return tables
    published = read_published(published_dir)
    if published["study"]["study"] != summary["study"]:
        return tables
    matrix = list(summary["study"]["matrix"])
    runs, published_runs = tables["runs"], published["runs"]
    ok_here = set(runs.loc[runs["status"] == "ok", "point"])
    from_published = published_runs[(published_runs["status"] == "ok") & ~published_runs["point"].isin(ok_here)]
    if from_published.empty:
        return tables
    carried = set(from_published["run_id"])
    merged = {name: frame for name, frame in tables.items() if name not in ("study", "runs")}
    for name, frame in published.items():
        if name in ("study", "runs"):
            continue
        kept = _carried_rows(name, frame, tables.get(name), matrix, published_runs, carried, published_dir)
        if not kept.empty:
            merged[name] = pd.concat([frame for frame in (tables.get(name), kept) if frame is not None],
                                     ignore_index=True)
    own = runs[~runs["point"].isin(from_published["point"])]
    merged["runs"] = pd.concat([own, from_published], ignore_index=True).sort_values(["point", "repetition"],
                                                                                     ignore_index=True)
    # the parts the published study itself carried stay with the points still carried from them
    earlier = [{**part, "points": [p for p in part["points"] if p in set(from_published["point"])]}
               for part in published["study"].get("carried", [])]
    theirs = sorted(set(from_published["point"]) - {p for part in earlier for p in part["points"]})
    parts = [part for part in earlier if part["points"]]
    if theirs:
        parts.append({"study_id": published["study"]["study_id"], "started_at": published["study"]["started_at"],
                      "ended_at": published["study"]["ended_at"], "run_s": published["study"].get("run_s"),
                      "points": [int(p) for p in theirs]})
    ok = int((merged["runs"]["status"] == "ok").sum())
    return {"study": {**summary, "ok": ok, "carried": parts}, **merged}
