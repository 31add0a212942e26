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


# the table whose rows name the runs they rest on (its column runs); validation_layouts' runs is a count
ADVICE = "advice"
# the table whose layout is recommend's answer, not the layout a run had: its row rests on its traced run alone
RECOMMEND = "recommend"


def _keys(name: str, table: pd.DataFrame, matrix: list[str]) -> list[str]:
    """The columns that name what a table's row is about: an advice, a context of the matrix's variables, a run
    (run_id); none for a table of the study as a whole."""
    if name == ADVICE:
        return ["setting", "context", "step"]
    if name == RECOMMEND:
        return ["run_id"]
    return [column for column in matrix if column in table] or (["run_id"] if "run_id" in table else [])


def _rests_on(name: str, table: pd.DataFrame, keys: list[str], runs: pd.DataFrame) -> dict[tuple, set[str]]:
    """The runs each key of a table rests on: those its rows name (advice: runs), else every ok run of its values of
    the matrix's variables, else its run."""
    if name == ADVICE:
        return {key: set(" ".join(group["runs"].astype(str)).split())
                for key, group in table.groupby(keys, sort=False)}
    by_key: dict[tuple, set[str]] = {}
    for _, run in runs[runs["status"] == "ok"].iterrows():
        by_key.setdefault(_key(run, keys), set()).add(run["run_id"])
    return {_key(row, keys): by_key.get(_key(row, keys), set()) for _, row in table.iterrows()}


def _carried_rows(name: str, published: pd.DataFrame, new: pd.DataFrame | None, matrix: list[str],
                  published_runs: pd.DataFrame, carried: set[str], where: Path) -> pd.DataFrame:
    """The rows of a published table that rest on carried runs only; a table with no keys is the study's as a whole,
    carried only where the directory did not make it. A row that rests on carried runs and others, or whose context
    the directory measured too, is refused: its figures would mix two directories' runs."""
    keys = _keys(name, published, matrix)
    if not keys:
        return published.iloc[0:0] if new is not None else published
    new_keys = set() if new is None else {_key(row, keys) for _, row in new.iterrows()}
    kept = set()
    for key, runs in _rests_on(name, published, keys, published_runs).items():
        what = (f"advice on {key[0]} at {key[1]} ({key[2]})" if name == ADVICE
                else " ".join(f"{c}={v}" for c, v in zip(keys, key, strict=True)))
        if (runs and runs <= carried and key in new_keys) or (runs & carried and not runs <= carried):
            raise InputError(f"{where}: {name}.csv's {what} rests on runs of this directory and of the published "
                             "points; run every point of that context in one directory (tierlab study --points), or "
                             "the study whole")
        if runs and runs <= carried:
            kept.add(key)
    return published[[_key(row, keys) in kept for _, row in published.iterrows()]]


def _in_point_order(name: str, table: pd.DataFrame, matrix: list[str], runs: pd.DataFrame) -> pd.DataFrame:
    """A merged table's rows in the order of the first point each rests on, as a directory that ran every point
    writes them."""
    keys = _keys(name, table, matrix)
    point = dict(zip(runs["run_id"], runs["point"], strict=True))
    first = {key: min((point[run] for run in rests if run in point), default=len(point) + 1)
             for key, rests in _rests_on(name, table, keys, runs).items()}
    order = sorted(range(len(table)), key=lambda i: first[_key(table.iloc[i], keys)])
    return table.iloc[order].reset_index(drop=True)


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
            merged[name] = pd.concat([part for part in (tables.get(name), kept) if part is not None], ignore_index=True)
    own = runs[~runs["point"].isin(from_published["point"])]
    merged["runs"] = pd.concat([own, from_published], ignore_index=True).sort_values(["point", "repetition"],
                                                                                     ignore_index=True)
    for name, frame in merged.items():
        if name != "runs" and _keys(name, frame, matrix):
            merged[name] = _in_point_order(name, frame, matrix, merged["runs"])
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
