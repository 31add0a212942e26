"""`tierlab findings`: a study reduced to the small tables its findings rest on, which docs/findings/<study>/
holds (committed: a few KB each, so that the findings page can be checked and written again without the runs'
raw traces; report/findings.py writes the page from them alone):

- study.json: the study (its file's name, workload, variables, matrix, repetitions), its id, when it ran, its
  points and how many have an ok run;
- runs.csv: per point, its run and status, the matrix's values and the setup the run had (engine version,
  scale factor, buffer pool and its bytes, the data's stored bytes, the tiers' dilation and fidelity, host);
- queries.csv: per ok run and query (or sysbench test): the median time of its ok tries with their least and
  most, its access pattern (sequential %, repeat access rate, category), I/O time and plan; a test's tps; for a
  query whose every try timed out, the seconds its quickest try was stopped after (timed_out_after_s);
- advice.csv where the matrix varies a setting advise speaks of (advise.py);
- validation.csv, validation_layouts.csv and cache_validation.csv where it varies the layout or the cache
  (placement/validate.py): what recommend predicts for each from every traced run, against the measurements;
- recommend.csv and cache_curve.csv there too: recommend's answer from a run with nothing on the fast tier, for a
  fast tier of a quarter of the data, and its cache curve (the best placement against a cache at each capacity).
- table_sizes.csv where it varies the cache: each table's stored bytes, which size the placements of E2's studies
  that the page sets each cache against (cache_against_placement.py).

A device suite's results directory (playbooks/devices.yml) is E6's study, e6-devices-<host>: its tiers as the
points (runs.csv), each tier's fitted profile (profiles.csv), what breaking each rule of the contract costs on each
tier (contract.csv, devices/contract.py) and the suite's jobs (device_jobs.csv).
"""

import json
import shutil
from itertools import groupby
from pathlib import Path

import pandas as pd

from ..catalog.values import figure
from ..devices import fit
from ..errors import InputError, RunDirError
from ..placement.recommend import recommend
from ..placement.validate import CACHE_VARIABLES, LAYOUT_VARIABLES, validate
from ..runs.devices import read_suite
from ..runs.manifest import table_bytes
from ..runs.results import per_query, read_manifest, read_tables
from ..runs.settings import buffer_pool_bytes, human_bytes
from .advise import SETTINGS, advise_study, statements
from .published import read_published
from .setup import setup_line
from .study import points, read_study_record

FLOAT_FORMAT = "%.6g"
# a rule whose breaking costs a device more than this many times its keeping is worth keeping there
MATTERS_X = 1.5
# a fitted profile's parameter further than this from the emulated model's is named
FIT_TOLERANCE = 0.25


def _by(frame: pd.DataFrame, columns: list[str]):
    """frame's rows grouped by columns, in their order, each with its key as a tuple; no columns: one group."""
    return frame.groupby(columns, sort=False) if columns else [((), frame)]


def _setup(point: dict, study: dict, study_dir: Path) -> dict:
    """A point's row of runs.csv: its run's setup as the manifest recorded it (empty where no run opened)."""
    row = {"point": point["point"], "repetition": point["repetition"], "status": point["status"],
           "run_id": point.get("run_id") or "", **{name: point["variables"][name] for name in study["matrix"]}}
    if not point.get("run_id") or not (study_dir / point["run_id"] / "manifest.json").exists():
        return row
    manifest = read_manifest(study_dir / point["run_id"])
    settings, host = manifest["settings"], manifest.get("host", {})
    fidelity = manifest.get("tiers_fidelity") or {}
    stored = [table.get("stored_bytes") for table in manifest["layout"]["tables"].values()]
    given = settings.get("buffer_pool") or {}
    setup = {"engine": manifest["engine"]["name"], "engine_version": manifest["engine"].get("version"),
             "layout": settings.get("layout"), "fast_cache": settings.get("fast_cache"),
             "fast_cache_bytes": settings.get("fast_cache_bytes"), "fast_cache_policy": settings.get("fast_cache_policy"),
             "scale_factor": settings.get("scale_factor"),
             "buffer_pool": f"{given['percent']:g}%" if "percent" in given else f"{given.get('bytes', 0) >> 20}M",
             "buffer_pool_bytes": buffer_pool_bytes(settings),
             "data_bytes": sum(stored) if stored and None not in stored else None,
             "dilation": fidelity.get("dilation"), "fidelity": fidelity.get("verdict"),
             "host": host.get("name"), "cpus": host.get("cpus"), "memory_bytes": host.get("memory_bytes"),
             "kernel": host.get("kernel"), "tierlab": manifest.get("versions", {}).get("tierlab")}
    # a variable the matrix varies keeps the value the study gave it
    return {**row, **{name: value for name, value in setup.items() if name not in study["matrix"]}}


def _queries(study_dir: Path, run_id: str) -> pd.DataFrame:
    """One run's rows of queries.csv; a query whose every try timed out keeps its row, with no time but the
    seconds after which its quickest try was stopped (timed_out_after_s): a lower bound the page shows."""
    tables = read_tables(study_dir / run_id)
    tries = tables["queries"]
    ok = tries[tries["status"] == "ok"].groupby("query")["elapsed_s"]
    counts = pd.DataFrame({"tries": ok.size(), "elapsed_min_s": ok.min(), "elapsed_max_s": ok.max(),
                           "timed_out_after_s": tries[tries["status"] == "timeout"].groupby("query")["elapsed_s"].min()})
    counts["timed_out_after_s"] = counts["timed_out_after_s"].where(counts["tries"].isna())
    counts["tries"] = counts["tries"].fillna(0).astype(int)
    figures = per_query(tables).reindex(counts.index).join(counts)
    return figures.rename_axis("query").reset_index().assign(run_id=run_id)


# the fast-tier capacity recommend is asked about: a share of the data (a quarter: the fast tier much smaller
# than the database, as the source study's and most hosts' are)
RECOMMEND_SHARE = 0.25


def _recommended(study_dir: Path, study: dict, runs: pd.DataFrame) -> tuple[dict, list[str]]:
    """recommend's answer per combination of the matrix's variables other than layout and cache, from its first ok
    run with nothing on the fast tier (layout None, no cache): the layout for a fast tier of RECOMMEND_SHARE of
    the data, the cache of that size beside it, the migration; and its cache curve (placement against cache at
    every capacity of its capacity curve). With the combinations that have no such run, each named with why."""
    others = [name for name in study["matrix"] if name not in (*LAYOUT_VARIABLES, *CACHE_VARIABLES)]
    ok = runs[runs["status"] == "ok"]
    settings = [read_manifest(study_dir / run_id)["settings"] for run_id in ok["run_id"]]
    bare = ok.assign(bare=[s["layout"] == "None" and not s["fast_cache_bytes"] for s in settings])
    answers, curves, missing = [], [], []
    for key, group in _by(bare, others):
        named = dict(zip(others, key if isinstance(key, tuple) else (key,), strict=True))
        rows = group[group["bare"]]
        if rows.empty:
            missing.append("".join(f"{name}={value}: " for name, value in named.items())
                           + "no ok run with nothing on the fast tier (layout None, no cache) to ask recommend from")
            continue
        row = rows.iloc[0]
        if pd.isna(row["data_bytes"]):
            raise RunDirError(f"run {row['run_id']}: its manifest has no stored bytes of its tables to size the fast "
                              "tier by")
        capacity = int(row["data_bytes"] * RECOMMEND_SHARE) >> 20 << 20
        result, tables = recommend([str(study_dir / row["run_id"])], capacity)
        migration = result["migration"]
        answers.append({**named, "run_id": row["run_id"], **{k: result[k] for k in (
            "fast_capacity_bytes", "layout", "fast_bytes", "predicted_s", "traced_layout", "traced_s",
            "cache_predicted_s", "cache_hit_pct", "lru_predicted_s", "verdict")},
            "migration_tables": "+".join(migration["tables"]), "migration_bytes": migration["bytes"],
            "migration_s": migration["predicted_s"]})
        curves.append(tables["cache_curve"].assign(**named)[[*others, *tables["cache_curve"].columns]])
    found = {"recommend": pd.DataFrame(answers), "cache_curve": pd.concat(curves, ignore_index=True)} if answers else {}
    return found, missing


def _table_sizes(study_dir: Path, study: dict, runs: pd.DataFrame) -> pd.DataFrame:
    """Per combination of the matrix's variables other than layout and cache, each table's stored bytes as its first
    ok run stored them: what sizes the placements a cache is set against (cache_against_placement)."""
    others = [name for name in study["matrix"] if name not in (*LAYOUT_VARIABLES, *CACHE_VARIABLES)]
    sizes = []
    for key, rows in _by(runs[runs["status"] == "ok"], others):
        run_id = rows["run_id"].iloc[0]
        named = dict(zip(others, key if isinstance(key, tuple) else (key,), strict=True))
        stored = table_bytes(read_manifest(study_dir / run_id)["layout"]["tables"])
        sizes += [{**named, "run_id": run_id, "table": table, "stored_bytes": size} for table, size in stored.items()]
    return pd.DataFrame(sizes)


def gather_devices(run_dir: Path) -> dict:
    """E6's tables from a device suite's results directory (playbooks/devices.yml) as a study's: its tiers as the
    points, each tier's fitted profile (beside its model's on an emulated tier), what breaking each rule of the
    contract costs on it, and the jobs themselves."""
    result, fitted, suite = read_suite(run_dir)
    names = [tier["name"] for tier in result["tiers"]]
    # results/devices_<time>_<host>
    study = {"name": f"e6-devices-{run_dir.name.split('_', 2)[-1]}", "workload": "devices",
             "variables": {"runtime_s": str(result["runtime_s"]), "sustained_s": str(result["sustained_s"])},
             "matrix": {"tier": names}, "repetitions": 1}
    runs = pd.DataFrame([{"point": number, "repetition": 1, "tier": tier["name"], "status": "ok",
                          "run_id": run_dir.name, "role": tier["role"], "emulation": tier["emulation"],
                          "dilation": tier["dilation"]} for number, tier in enumerate(result["tiers"], 1)])
    profiles = pd.concat([(fit.comparison(tier, fitted[tier["name"]]) if tier.get("profile") else
                           pd.DataFrame({"parameter": list(fitted[tier["name"]]),
                                         "fitted": list(fitted[tier["name"]].values())})).assign(tier=tier["name"])
                          for tier in result["tiers"]], ignore_index=True)
    return {"study": {"study_id": run_dir.name, "study": study, "started_at": result["measured_at"],
                      "ended_at": result["measured_at"], "points": len(names), "ok": len(names), "unanswered": []},
            "runs": runs, "contract": suite["device_contract"], "profiles": profiles, "device_jobs": suite["device_jobs"]}


def gather(study_dir: Path) -> dict:
    """The findings' tables of one study (its results directory): name -> frame, and "study" -> its record's
    summary, with `unanswered`: what advise, validate or recommend could not say of it, and why. A device
    suite's results directory is E6's study (gather_devices)."""
    if (study_dir / "raw" / "devices.json").exists():
        return gather_devices(study_dir)
    record = read_study_record(study_dir)
    study = record["study"]
    ok = [point for point in record["points"] if point["status"] == "ok"]
    unanswered: list[str] = []
    tables = {"study": {"study_id": record["study_id"], "study": study, "started_at": record.get("started_at"),
                        "ended_at": record.get("ended_at"), "points": len(points(study)), "ok": len(ok),
                        "run_s": round(sum(point.get("seconds") or 0 for point in record["points"]), 1),
                        "again": [point["point"] for point in record["points"] if point.get("superseded")],
                        "unanswered": unanswered},
              "runs": pd.DataFrame([_setup(point, study, study_dir) for point in record["points"]],
                                   columns=None if record["points"] else ["point", "repetition", "status", "run_id",
                                                                           *study["matrix"]])}
    if ok:
        tables["queries"] = pd.concat([_queries(study_dir, point["run_id"]) for point in ok], ignore_index=True)
    varied = {name for name, values in study["matrix"].items() if len(values) > 1}
    if ok and "fast_cache" in varied:
        tables["table_sizes"] = _table_sizes(study_dir, study, tables["runs"])
    # validate and recommend predict query windows; a sysbench test's window is not one query
    placed = study["workload"] != "sysbench" and bool(varied & {*LAYOUT_VARIABLES, *CACHE_VARIABLES[:1]})
    for name, wanted, answer in (
            ("advise", ok and set(SETTINGS) & set(study["matrix"]),
             lambda: ({"advice": advise_study(study_dir, record)[0]}, [])),
            ("validate", len(ok) > 1 and placed, lambda: (validate(study_dir, record), [])),
            ("recommend", ok and placed, lambda: _recommended(study_dir, study, tables["runs"]))):
        if not wanted:
            continue
        try:
            found, missing = answer()
        except (InputError, RunDirError) as error:
            found, missing = {}, [str(error)]
        tables.update(found)
        # the study named by its id: the page is read where the study's directory is not
        unanswered += [f"{name}: {said}".replace(str(study_dir.resolve()), study_dir.name)
                       .replace(str(study_dir), study_dir.name) for said in missing]
    return tables


def write_gathered(tables: dict, findings_dir: Path) -> Path:
    """One study's tables in findings_dir/<its name>/, replacing what an earlier study of that name left there."""
    out = findings_dir / tables["study"]["study"]["name"]
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / "study.json").write_text(json.dumps(tables["study"], indent=1) + "\n")
    for name, frame in tables.items():
        # a table with no row is left out (runs.csv keeps its header: the page lists a study with no point too)
        if name != "study" and (len(frame) or name == "runs"):
            frame.to_csv(out / f"{name}.csv", index=False, float_format=FLOAT_FORMAT)
    return out


# the experiments of docs/experiments.md, in its order: id, title, question, and the study names that answer it
# (by their start: the study files under docs/studies)
EXPERIMENTS = (
    ("E1", "Everything on one tier or the other",
     "How much faster is each query with every table on the fast tier than with every table on the capacity tier, "
     "and what in its access pattern explains the difference?", ("e1-", "ssb-engines")),
    ("E2", "Placing some tables on the fast tier",
     "Does more fast-tier space always help, and does recommend's prediction from one traced run find the layout "
     "the measurements find fastest?", ("validate-q", "first-layouts")),
    ("E3", "The fast tier as a cache",
     "When does caching the capacity tier on the fast tier beat placing tables there, and does the cost model's "
     "cache predict the emulated one?", ("e3-", "validate-cache")),
    ("E4", "Page size, buffer pool, compression and threads",
     "Which engine settings suit each tier?", ("e4-", "fs-compression", "first-buffer-pool")),
    ("E5", "Join plans and parallel I/O on SSB",
     "Which join plan is faster on each tier, what parallel I/O changes, and does the optimizer's choice stay "
     "right?", ("e5-",)),
    ("E6", "Devices and the unwritten contract",
     "How do the devices behave, and does each workload use them as a fast SSD wants to be used?", ("e6-",)),
)


def experiment_of(name: str) -> str:
    """The experiment a study belongs to by its name, or "" for none."""
    return next((key for key, _, _, starts in EXPERIMENTS if name.startswith(starts)), "")


def read_gathered(findings_dir: Path) -> list[dict]:
    """Every study's tables under findings_dir (as write_gathered left them), by study name."""
    return [read_published(study_file.parent) for study_file in sorted(findings_dir.glob("*/study.json"))]


def _where(names: list[str], key: tuple) -> str:
    return " ".join(f"{name}={value}" for name, value in zip(names, key, strict=True)) or "the study"


PATTERN_COLUMNS = ("sequential_pct", "repeat_access_rate", "category", "plan")
# tables published before a query's timeout was kept lack its column
TIMEOUT_COLUMN = "timed_out_after_s"


def _figures(tables: dict) -> tuple[pd.DataFrame, str, list[str], list[str], str]:
    """Per combination of the matrix's values and query, the median figure over the point's runs with the least
    and most of their tries (or runs, for tps), and the access pattern and plan of its first run; the variable
    compared (the matrix's last), its values, the others, and the figure's unit."""
    study = tables["study"]["study"]
    matrix = list(study["matrix"])
    compared, groups = matrix[-1], matrix[:-1]
    runs = tables["runs"][tables["runs"]["status"] == "ok"]
    rows = tables["queries"].merge(runs[["run_id", *matrix]], on="run_id")
    by_tps = "tps" in rows and rows["tps"].notna().any()
    figure, low, high, unit = ("tps", "tps", "tps", "tps") if by_tps else ("elapsed_s", "elapsed_min_s",
                                                                           "elapsed_max_s", "s")
    # a sysbench window has no plan, and a run with no trace no access pattern
    rows = rows.reindex(columns=[*rows.columns, *(c for c in (*PATTERN_COLUMNS, TIMEOUT_COLUMN) if c not in rows)])
    figures = rows.groupby([*groups, compared, "query"], sort=False).agg(
        figure=(figure, "median"), low=(low, "min"), high=(high, "max"), runs=("run_id", "nunique"),
        timed_out_after_s=(TIMEOUT_COLUMN, "min"),
        **{column: (column, "first") for column in PATTERN_COLUMNS}).reset_index()
    return figures, compared, study["matrix"][compared], groups, unit


def _timed_out(row) -> bool:
    """Whether a value's query has no figure because every try of it timed out."""
    return pd.isna(row["figure"]) and pd.notna(row.get(TIMEOUT_COLUMN))


def _spread(row) -> str:
    if _timed_out(row):
        return f"over {figure(row[TIMEOUT_COLUMN])} (timed out)"
    low, high = figure(row["low"]), figure(row["high"])
    return figure(row["figure"]) if low == high else f"{figure(row['figure'])} ({low}-{high})"


def figures_table(figures: pd.DataFrame, compared: str, values: list[str], groups: list[str], unit: str) -> pd.DataFrame:
    """The page's table of figures: per group and query, each value's median with its spread, each value's
    speedup against the first, and the first value's access pattern and plan."""
    rows = []
    for key, group in figures.groupby([*groups, "query"], sort=False):
        at = {row[compared]: row for row in group.to_dict("records")}
        first = at.get(values[0])
        row = dict(zip([*groups, "query"], key, strict=True))
        for value in values:
            row[f"{compared}={value} ({unit})"] = _spread(at[value]) if value in at else ""
        for value in values[1:]:
            row[f"{value} vs {values[0]}"] = _speedup_text(first, at.get(value), unit)
        if first is not None:
            row.update({"category": first["category"], "sequential %": _number(first["sequential_pct"]),
                        "repeat access": _number(first["repeat_access_rate"]),
                        "plan": first["plan"] if isinstance(first["plan"], str) else ""})
        rows.append(row)
    return pd.DataFrame(rows)


def _number(value) -> str:
    return figure(value) if isinstance(value, float | int) and value == value else ""


def _speedup_text(base, other, unit: str) -> str:
    """How many times as fast other ran as base, in the table's words: a bound where one of them timed out (its
    time is over the seconds it was stopped after), nothing where a figure is missing."""
    if base is not None and other is not None and unit == "s":
        if _timed_out(base) and not _timed_out(other) and other["figure"]:
            return f"over {base[TIMEOUT_COLUMN] / other['figure']:.2f}x"
        if _timed_out(other) and not _timed_out(base):
            return f"under {base['figure'] / other[TIMEOUT_COLUMN]:.2f}x"
    ratio = _speedup(base, other, unit)
    return f"{ratio:.2f}x" if ratio == ratio else ""


def _speedup(base, other, unit: str) -> float:
    """How many times as fast other ran as base: by time, or by tps; NaN where either lacks the figure."""
    if base is None or other is None or not base["figure"] or not other["figure"]:
        return float("nan")
    return other["figure"] / base["figure"] if unit == "tps" else base["figure"] / other["figure"]


def answers(figures: pd.DataFrame, compared: str, values: list[str], groups: list[str], unit: str) -> list[str]:
    """The study's answer, a sentence per group: the best value of the compared variable against the first (or,
    where the first is best, against the next best), over the queries every value ran (their times summed) or per
    sysbench test (tps); the range of the per-query speedups; the speedup by the first value's category."""
    lines = []
    for key, group in _by(figures, groups):
        where = _where(groups, key if isinstance(key, tuple) else (key,))
        if unit == "tps":
            for step, rows in group.groupby("query", sort=False):
                ranked = rows.sort_values("figure", ascending=False)
                best, first = ranked.iloc[0], rows[rows[compared] == values[0]]
                if len(rows) < 2:
                    lines.append(f"{where}, {step}: too few runs ok to compare {compared} (only {compared}="
                                 f"{best[compared]}, {best['figure']:.0f} tps)")
                    continue
                text = f"{where}, {step}: {compared}={best[compared]} ran most, {best['figure']:.0f} tps"
                if len(first) and best[compared] != values[0]:
                    text += f", {best['figure'] / first['figure'].iloc[0]:.2f}x {compared}={values[0]}'s"
                lines.append(text)
            continue
        wide = group.pivot(index="query", columns=compared, values="figure").dropna()
        ran = [value for value in values if value in wide]
        if len(ran) < 2 or wide.empty:
            lines.append(f"{where}: too few runs ok to compare {compared}")
            continue
        totals = wide[ran].sum().sort_values()
        best = totals.index[0]
        against = ran[0] if best != ran[0] else totals.index[1]
        ratio = wide[against] / wide[best]
        spread = (f"{ratio.min():.2f}x each" if f"{ratio.min():.2f}" == f"{ratio.max():.2f}" else
                  f"{ratio.min():.2f}x ({ratio.idxmin()}) to {ratio.max():.2f}x ({ratio.idxmax()})")
        text = (f"{where}: {compared}={best} ran its {len(wide)} queries in {figure(totals[best])} s, "
                f"{totals[against] / totals[best]:.2f}x as fast as {compared}={against} ({figure(totals[against])} s); "
                f"per query {spread}")
        if len(ran) > 2:
            text += "; all: " + ", ".join(f"{value} {figure(totals[value])} s" for value in ran)
        category = group[group[compared] == against].set_index("query")["category"].reindex(wide.index)
        if category.notna().any():
            text += (f". By category at {compared}={against}: " + ", ".join(
                f"{name} {ratios.median():.2f}x ({len(ratios)})" for name, ratios in ratio.groupby(category)))
        stopped = [row for row in group.to_dict("records") if _timed_out(row)]
        if stopped:
            text += ". Left out, timed out: " + ", ".join(
                f"{row['query']} at {compared}={row[compared]} (over {figure(row[TIMEOUT_COLUMN])} s)"
                for row in stopped)
        lines.append(text)
    return lines


def engine_contrasts(figures: pd.DataFrame, compared: str, values: list[str], groups: list[str], unit: str,
                     most: int = 5) -> list[str]:
    """Where the engines' speedups (the last value against the first) differ most for a query, each engine's
    speedup beside its plan and category: the plans explain the difference. For a study whose matrix varies the
    engine and the compared variable only."""
    if groups != ["engine"] or figures["engine"].nunique() < 2 or len(values) < 2 or unit == "tps":
        return []
    first, last = (figures[figures[compared] == value].set_index(["query", "engine"]) for value in (values[0], values[-1]))
    speedup = (first["figure"] / last["figure"]).dropna().unstack("engine").dropna()
    if speedup.empty:
        return []
    gaps = (speedup.max(axis=1) / speedup.min(axis=1)).sort_values(ascending=False).head(most)
    return [f"{query}: " + "; ".join(
        f"{engine} {speedup.loc[query, engine]:.2f}x ({first.loc[(query, engine), 'category']}; plan: "
        f"{first.loc[(query, engine), 'plan'] if isinstance(first.loc[(query, engine), 'plan'], str) else 'none read'})"
        for engine in speedup.columns) for query in gaps.index if gaps[query] > 1.25]


def ties(rows: pd.DataFrame, ranges: pd.DataFrame | None, others: list[str]) -> int | None:
    """How many of validate's rows predicted a layout that ran as fast as the measured fastest within their repeats
    (the predicted layout's quickest run no slower than the fastest's slowest), the fastest itself included; None
    where a layout ran once, and no spread tells a tie from a loss."""
    if ranges is None or ranges.empty or (ranges["runs"] < 2).any():
        return None
    span = ranges.set_index([*others, "query", "layout"])
    reached = 0
    for row in rows.to_dict("records"):
        at = (*(row[name] for name in others), row["query"])
        reached += span.loc[(*at, row["predicted_fastest"]), "measured_min_s"] <= \
            span.loc[(*at, row["measured_fastest"]), "measured_max_s"]
    return int(reached)


def validation_lines(tables: dict) -> list[str]:
    """recommend's predictions held against the measurements (validate's tables), a sentence per group: how
    often the predicted fastest layout was the measured fastest, the rank correlation beside the measurements'
    own reproducibility, the regret; a cache's predicted time and hit share against the emulated cache's."""
    study = tables["study"]["study"]
    lines = []
    layouts = tables.get("validation")
    if layouts is not None and not layouts.empty:
        others = [name for name in study["matrix"] if name not in LAYOUT_VARIABLES]
        for key, rows in _by(layouts, others):
            hits = int((rows["predicted_fastest"] == rows["measured_fastest"]).sum())
            tied = ties(rows, tables.get("validation_layouts"), others)
            worst = rows.loc[rows["regret_pct"].idxmax()]
            lines.append(
                f"{_where(others, key if isinstance(key, tuple) else (key,))}: predicted from each traced run, "
                f"recommend named the measured fastest layout in {hits} of {len(rows)} (query, run) pairs"
                + (f", and one whose runs reach the fastest's (a tie within their repeats) in {tied} of {len(rows)}"
                   if tied is not None else "") + "; median "
                f"Spearman {rows['spearman'].median():.2f} (the measurements' own repeat Spearman "
                f"{_number(rows['repeat_spearman'].median()) or 'not measured: one run per layout'}); median regret "
                f"{rows['regret_pct'].median():.1f}%, worst {worst['regret_pct']:.1f}% ({worst['query']} from "
                f"{worst['traced_layout']}: {worst['predicted_fastest']} predicted, {worst['measured_fastest']} "
                "measured fastest)")
    caches = tables.get("cache_validation")
    if caches is not None and not caches.empty:
        others = [name for name in study["matrix"] if name not in CACHE_VARIABLES]
        for key, rows in _by(caches, others):
            error = rows["error_pct"].abs()
            worst = rows.loc[error.idxmax()]
            lines.append(
                f"{_where(others, key if isinstance(key, tuple) else (key,))}: the cost model's cache predicted the "
                f"emulated cache's time within {error.median():.0f}% (median over {len(rows)} predictions; worst "
                f"{worst['error_pct']:+.0f}%: {worst['query']}, cache {worst['fast_cache']} {worst['policy']}), its "
                f"hit share {rows['predicted_hit_pct'].median():.0f}% against {rows['measured_hit_pct'].median():.0f}% "
                "measured (medians)")
    return lines


def recommend_lines(tables: dict) -> list[str]:
    """recommend's answer per group, as a DBA reads it, with the run it rests on; and per group where its cache
    curve says a block cache beats the best placement that fits."""
    study = tables["study"]["study"]
    answers = tables.get("recommend")
    if answers is None or answers.empty:
        return []
    others = [name for name in study["matrix"] if name not in (*LAYOUT_VARIABLES, *CACHE_VARIABLES)]
    curves = tables["cache_curve"]
    lines = []
    for row in answers.to_dict("records"):
        key = tuple(row[name] for name in others)
        moved = row["migration_tables"] if isinstance(row["migration_tables"], str) else "nothing"
        lines.append(
            f"{_where(others, key)}: with {human_bytes(row['fast_capacity_bytes'])} of fast tier (a quarter of the data), "
            f"recommend places {row['layout']} ({human_bytes(row['fast_bytes'])}) there, "
            f"predicted {figure(row['predicted_s'])} s against {figure(row['traced_s'])} s traced with {row['traced_layout']}; "
            f"the fast tier as a block cache of that size, predicted {figure(row['cache_predicted_s'])} s "
            f"({row['cache_hit_pct']:.0f}% of requests hit): {row['verdict']} is faster; the migration moves {moved} "
            f"({human_bytes(row['migration_bytes'])}, about {row['migration_s']:.1f} s). Evidence: run {row['run_id']}")
        curve = curves[(curves[others] == pd.Series(dict(zip(others, key, strict=True)))).all(axis=1)] if others \
            else curves
        spans = _verdict_spans(curve, "cache")
        cached = sum(count for _, _, count in spans)
        lines.append(f"{_where(others, key)}: over the capacity curve ({len(curve)} capacities), a cache beats the "
                     f"best placement that fits at {cached or 'none'} of them" +
                     (": " + ", ".join(human_bytes(low) if count == 1 else f"{human_bytes(low)} to {human_bytes(high)}"
                                       for low, high, count in spans) if spans else ""))
    return lines


def _verdict_spans(curve: pd.DataFrame, verdict: str) -> list[tuple[int, int, int]]:
    """The runs of consecutive capacities (smallest first) where the curve's verdict is this one: (smallest,
    largest, how many), so that a page names a few ranges rather than every capacity of a curve of eighty."""
    ordered = curve.sort_values("capacity_bytes")
    runs = groupby(zip(ordered["capacity_bytes"], ordered["verdict"], strict=True), key=lambda pair: pair[1])
    spans = [[capacity for capacity, _ in run] for this, run in runs if this == verdict]
    return [(sizes[0], sizes[-1], len(sizes)) for sizes in spans]


def _found(tables: dict, **given) -> dict:
    """A study's findings as the page takes them: what is given, and nothing of the rest."""
    study = tables["study"]["study"]
    return {"experiment": experiment_of(study["name"]), "name": study["name"],
            "unanswered": tables["study"].get("unanswered", []), "answers": [], "contrasts": [], "advice": [],
            "validation": [], "recommend": [], "table": pd.DataFrame(), "plots": [], "compared": "", "unit": "",
            "runs": tables["runs"][["point", "repetition", *study["matrix"], "status", "run_id"]], **given}


def device_findings(tables: dict) -> dict:
    """E6's findings from a device suite's tables: per tier, what breaking each rule of the contract costs, the
    costliest first, and the rules that matter there."""
    summary, study = tables["study"], tables["study"]["study"]
    contract = tables["contract"]
    tiers = ", ".join(f"{run.tier} ({run.role} tier, {run.emulation}"
                      + (f", dilated {run.dilation:g}x)" if run.dilation != 1 else ")")
                      for run in tables["runs"].itertuples())
    setup = (f"the device suite (playbooks/devices.yml): fio with O_DIRECT on a scratch file on each tier, "
             f"{study['variables']['runtime_s']} s per job, sustained writes for {study['variables']['sustained_s']} "
             f"s; {tiers}; measured {summary['started_at']}; suite {summary['study_id']}")
    lines = []
    for tier, rows in contract.groupby("tier", sort=False):
        measured = rows.dropna(subset=["cost_x"]).sort_values("cost_x", ascending=False, kind="stable")
        matter = [rule for rule, cost in zip(measured["rule"], measured["cost_x"], strict=True) if cost > MATTERS_X]
        lines.append(f"{tier}: breaking a rule costs " + ", ".join(
            f"{rule} {cost:.2f}x" for rule, cost in zip(measured["rule"], measured["cost_x"], strict=True))
            + (f"; over {MATTERS_X:g}x, so worth keeping here: {', '.join(matter)}" if matter
               else f"; none over {MATTERS_X:g}x")
            + "".join(f"; {rule}: {evidence}" for rule, evidence in
                      zip(rows["rule"], rows["evidence"], strict=True) if evidence.startswith("not measured")))
    if "model" in tables["profiles"]:
        for tier, rows in tables["profiles"].dropna(subset=["model"]).groupby("tier", sort=False):
            off = [f"{row.parameter} {row.fitted:g} against {row.model:g}" for row in rows.itertuples()
                   if abs(row.fitted - row.model) > FIT_TOLERANCE * abs(row.model)]
            lines.append(f"{tier}'s profile fitted to the suite against the model it emulates: every parameter within "
                         f"{FIT_TOLERANCE:.0%}" + (f" but {', '.join(off)}" if off else ""))
    return _found(tables, setup=setup, answers=lines, table=contract.drop(columns=["evidence"]))


def study_findings(tables: dict) -> dict:
    """One study's findings from its tables: experiment, name, setup, answers, contrasts between engines, advice,
    validation, the figures table, the figures per group for plots, and its runs."""
    if tables["study"]["study"]["workload"] == "devices":
        return device_findings(tables)
    found = _found(tables, setup=setup_line(tables), validation=validation_lines(tables),
                   recommend=recommend_lines(tables))
    if "queries" in tables:
        figures, compared, values, groups, unit = _figures(tables)
        found.update(answers=answers(figures, compared, values, groups, unit),
                     contrasts=engine_contrasts(figures, compared, values, groups, unit),
                     table=figures_table(figures, compared, values, groups, unit), compared=compared, unit=unit,
                     plots=[(_where(groups, key if isinstance(key, tuple) else (key,)),
                             rows.pivot(index="query", columns=compared, values="figure")
                             .reindex(columns=[v for v in values if v in set(rows[compared])]))
                            for key, rows in _by(figures, groups)])
    if "advice" in tables:
        found["advice"] = statements(tables["advice"].fillna({"verdict": "", "also_differs": ""}))
    return found
