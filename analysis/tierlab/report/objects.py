"""Where a run's I/O time goes: each object's I/O time summed over the run's steps, its share, its access pattern
and size; and the objects of the capacity tier that hold the most of it per GiB."""

import pandas as pd

OTHER = "other"
# a step's figures that add up over its objects and its steps
SUMMED = ["io_time_s", "read_requests", "read_pages", "sequential_read_pages"]
# an object below this share of the I/O time is not worth a move: it could gain no more than this
CANDIDATE_MIN_SHARE_PCT = 1.0


def per_step(table_metrics: pd.DataFrame) -> pd.DataFrame:
    """Each step's figures per object and tier: the median over the step's tries, as the comparisons and studies
    take a step's time, a try that read nothing of the object counting 0."""
    rows = table_metrics.assign(
        sequential_read_pages=(table_metrics["sequential_pct"] * table_metrics["read_pages"] / 100).fillna(0))
    keys = ["query", "object", "tier"]
    grid = rows[keys].drop_duplicates().merge(rows[["query", "try"]].drop_duplicates(), on="query")
    full = grid.merge(rows[[*keys, "try", *SUMMED]], on=[*keys, "try"], how="left").fillna({c: 0 for c in SUMMED})
    return full.groupby(keys, sort=False)[SUMMED].median().reset_index()


def _patterns(table_metrics: pd.DataFrame) -> pd.DataFrame:
    """Each object's dominant access pattern on a tier: the category of the steps that hold most of its I/O time,
    and that share of its I/O time."""
    by_category = table_metrics.groupby(["object", "tier", "category"])["io_time_s"].sum()
    total = by_category.groupby(["object", "tier"]).transform("sum")
    top = (100 * by_category / total).rename("pattern_pct").reset_index()
    top = top.sort_values("pattern_pct", ascending=False).drop_duplicates(["object", "tier"])
    # the category's rank ("1 random repeated") is the table's order, not the pattern's name
    top["pattern"] = top["category"].str.replace(r"^\d+ ", "", regex=True)
    return top[["object", "tier", "pattern", "pattern_pct"]]


def object_sizes(layout: dict) -> dict[str, int]:
    """The bytes of each object's files (a table's own, each index, TOAST, each segment), from the manifest's
    layout; a table without its files listed counts as one object of its size; none where a size is unknown."""
    sizes: dict[str, int | None] = {}
    for table, entry in layout.get("tables", {}).items():
        files = entry.get("files") or [{"object": table, "size_bytes": entry.get("size_bytes")}]
        for item in files:
            known = sizes.get(item["object"], 0)
            sizes[item["object"]] = None if known is None or item.get("size_bytes") is None else known + item["size_bytes"]
    return {name: size for name, size in sizes.items() if size is not None}


def object_tables(layout: dict) -> dict[str, str]:
    """The table each object belongs to: the unit a layout places (an index moves with its table's file on
    MariaDB and MySQL)."""
    return {item["object"]: table for table, entry in layout.get("tables", {}).items()
            for item in entry.get("files") or [{"object": table}]}


def object_io(table_metrics: pd.DataFrame, layout: dict) -> pd.DataFrame:
    """A row per object and tier, most I/O time first (`other`, the requests of no object, last): its I/O time
    summed over the steps (per_step), its share of every object's, `other` included, the steps that read or wrote
    it, its requests and pages read, its sequential share of the pages read, its dominant pattern and its size."""
    steps = per_step(table_metrics)
    objects = steps.groupby(["object", "tier"])[SUMMED].sum()
    objects["steps"] = steps.groupby(["object", "tier"]).size()
    objects = objects.reset_index()
    objects["share_pct"] = 100 * objects["io_time_s"] / objects["io_time_s"].sum()
    objects["sequential_pct"] = 100 * objects["sequential_read_pages"] / objects["read_pages"].where(objects["read_pages"] > 0)
    objects = objects.merge(_patterns(table_metrics), on=["object", "tier"])
    objects["size_bytes"] = objects["object"].map(object_sizes(layout)).astype(float)
    objects = objects.sort_values(["io_time_s", "object"], ascending=[False, True])
    order = objects["object"].eq(OTHER).argsort(kind="stable")
    columns = ["object", "tier", "io_time_s", "share_pct", "steps", "read_requests", "read_pages", "sequential_pct",
               "pattern", "pattern_pct", "size_bytes"]
    return objects.iloc[order][columns].reset_index(drop=True)


def capacity_candidates(objects: pd.DataFrame, capacity_tiers: set[str], layout: dict) -> pd.DataFrame:
    """The objects on a capacity tier that hold at least CANDIDATE_MIN_SHARE_PCT of the I/O time, the most I/O
    time per GiB of their size first (in that order they put the most I/O time into a fast tier of a given size),
    those of unknown size after them by their I/O time; with the table each belongs to."""
    held = objects[objects["tier"].isin(capacity_tiers) & objects["object"].ne(OTHER)
                   & (objects["share_pct"] >= CANDIDATE_MIN_SHARE_PCT)]
    held = held.assign(table=held["object"].map(object_tables(layout)),
                       io_s_per_gib=held["io_time_s"] / (held["size_bytes"] / 2**30))
    held = held.sort_values(["io_s_per_gib", "io_time_s"], ascending=False, na_position="last")
    return held[["object", "table", "tier", "io_time_s", "share_pct", "size_bytes", "io_s_per_gib", "pattern"]
                ].reset_index(drop=True)
