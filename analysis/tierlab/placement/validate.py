"""`tierlab validate`: a study's layouts, or caches, as measured beside what recommend predicts for them from
each of its traced runs."""

import statistics
import tempfile
from pathlib import Path

import pandas as pd

from ..catalog.layout import CAPACITY, parse_layout
from ..catalog.workloads import workload_of
from ..devices import cost_model
from ..errors import InputError
from ..runs.results import read_manifest, read_table
from .predict import layout_errors, repeat_spearman, validation
from .traced import device_profiles, give_back_freed_memory, traced_query

# the matrix variables each side of validate compares; the study's other variables make its groups
LAYOUT_VARIABLES = ("layout",)
CACHE_VARIABLES = ("fast_cache", "fast_cache_policy")


def _groups(study_dir: Path, record: dict, compared: tuple[str, ...]) -> tuple[list[str], dict]:
    """The matrix's variables outside compared, and the study's ok runs (each with its manifest) by their values."""
    others = [name for name in record["study"]["matrix"] if name not in compared]
    groups: dict[tuple, list[tuple[Path, dict]]] = {}
    for point in record["points"]:
        if point["status"] == "ok":
            run_dir = study_dir / point["run_id"]
            groups.setdefault(tuple(point["variables"][k] for k in others), []).append((run_dir, read_manifest(run_dir)))
    return others, groups


def validate_layouts(study_dir: Path, record: dict, profiles_text: str | None, scratch: Path):
    """From each run, every layout the study ran predicted against its measured time (the median over its runs);
    and each layout's predictions beside its runs (predict.layout_errors)."""
    others, groups = _groups(study_dir, record, LAYOUT_VARIABLES)
    rows, layout_rows = [], []
    for group, runs in groups.items():
        done = {run_dir: read_table(run_dir, "queries").query("status == 'ok'").to_dict("records") for run_dir, _ in runs}
        measured: dict[str, dict[str, list[float]]] = {}
        for run_dir, m in runs:
            for row in done[run_dir]:
                measured.setdefault(row["query"], {}).setdefault(m["layout"]["name"], []).append(row["elapsed_s"])
        medians = {name: {layout: statistics.median(seconds) for layout, seconds in by_layout.items()}
                   for name, by_layout in measured.items()}
        reproducibility = {name: repeat_spearman(by_layout) for name, by_layout in measured.items()}
        profile_files = device_profiles(profiles_text, runs[0][1]["tiers"], scratch)
        predictions: dict[str, list[dict[str, float]]] = {}
        for run_dir, m in runs:
            for row in done[run_dir]:
                _, query = traced_query(run_dir, m, row, profile_files)
                times = medians[row["query"]]
                predicted = {layout: query.predict_s(query.io_us(parse_layout(layout, workload_of(m["settings"]))))
                             for layout in times}
                predictions.setdefault(row["query"], []).append(predicted)
                rows.append({**dict(zip(others, group, strict=True)), "query": row["query"],
                             "traced_layout": m["layout"]["name"], "run_id": m["run_id"],
                             **validation(predicted, times), "repeat_spearman": reproducibility[row["query"]]})
        for name, by_layout in measured.items():
            errors = layout_errors(by_layout, predictions[name])
            layout_rows.append(errors.assign(**dict(zip(others, group, strict=True)), query=name)
                               [[*others, "query", *errors.columns]])
    return pd.DataFrame(rows), pd.concat(layout_rows, ignore_index=True)


def _measured_caches(runs: list[tuple[Path, dict]]) -> dict[tuple, dict[str, list[float]]]:
    """Per query and cache (size as given, bytes, policy), what the runs with that cache measured: the query's
    time, the emulated cache's hit share, and the cost model's cache on the run's own trace."""
    measured: dict[tuple, dict[str, list[float]]] = {}
    for run_dir, m in runs:
        settings = m["settings"]
        if not settings["fast_cache_bytes"]:
            continue
        capacity_tier = next(t["name"] for t in m["tiers"] if t["role"] == CAPACITY)
        tiers = read_table(run_dir, "tier_metrics")
        tiers = tiers[tiers["tier"] == capacity_tier].set_index(["query", "try"])
        simulated = read_table(run_dir, "query_metrics").set_index(["query", "try"])["cache_hit_pct_simulated"]
        for row in read_table(run_dir, "queries").query("status == 'ok'").to_dict("records"):
            key = (row["query"], settings["fast_cache"], settings["fast_cache_bytes"], settings["fast_cache_policy"])
            figures = measured.setdefault(key, {"elapsed_s": [], "hit_pct": [], "simulated_hit_pct": []})
            figures["elapsed_s"].append(row["elapsed_s"])
            figures["hit_pct"].append(tiers.loc[(row["query"], row["try"]), "model_cache_hit_pct"])
            figures["simulated_hit_pct"].append(simulated.loc[(row["query"], row["try"])])
    return measured


def validate_caches(study_dir: Path, record: dict, profiles_text: str | None, scratch: Path):
    """From each run without a cache, every cache the study ran (size and policy) predicted against what it
    measured: the query's time and the emulated cache's hit share (medians over the cache's runs), and the
    cost model's cache on the cache run's own trace."""
    others, groups = _groups(study_dir, record, CACHE_VARIABLES)
    rows = []
    for group, runs in groups.items():
        where = " ".join(f"{k}={v}" for k, v in zip(others, group, strict=True)) or "in the study"
        bases = [(run_dir, m) for run_dir, m in runs if not m["settings"]["fast_cache_bytes"]]
        if not bases:
            raise InputError(f"{study_dir}: no ok run without a cache {where}; validate predicts each cache from "
                             "a traced run without one: give fast_cache the value none in the matrix")
        measured = _measured_caches(runs)
        sizes = sorted({size for _, _, size, _ in measured})
        profile_files = device_profiles(profiles_text, bases[0][1]["tiers"], scratch)
        for run_dir, m in bases:
            page_bytes = int(read_table(run_dir, "parameters")["page_size_bytes"][0])
            for row in read_table(run_dir, "queries").query("status == 'ok'").to_dict("records"):
                window, query = traced_query(run_dir, m, row, profile_files)
                costs = cost_model.cache_costs(window, profile_files, page_bytes, sizes).set_index(["capacity_bytes", "policy"])
                for (name, given, size, policy), figures in measured.items():
                    if name != row["query"]:
                        continue
                    cost = costs.loc[(size, policy)]
                    predicted_s, measured_s = query.predict_s(cost["io_us"]), statistics.median(figures["elapsed_s"])
                    hit_pct = 100.0 * cost["hits"] / cost["requests"] if cost["requests"] else float("nan")
                    rows.append({**dict(zip(others, group, strict=True)), "query": name, "traced_layout": m["layout"]["name"],
                                 "run_id": m["run_id"], "fast_cache": given, "policy": policy,
                                 "runs": len(figures["elapsed_s"]), "predicted_s": predicted_s, "measured_s": measured_s,
                                 "error_pct": 100.0 * (predicted_s / measured_s - 1.0),
                                 "predicted_hit_pct": hit_pct,
                                 "measured_hit_pct": statistics.median(figures["hit_pct"]),
                                 "simulated_hit_pct": statistics.median(figures["simulated_hit_pct"])})
    return pd.DataFrame(rows)


def validate(study_dir: Path, record: dict, profiles_text: str | None = None) -> dict[str, pd.DataFrame]:
    """The tables validate writes for a study (its record: study.json): validation and validation_layouts where
    its matrix varies the layout, cache_validation where it varies fast_cache."""
    matrix = record["study"]["matrix"]
    if "layout" not in matrix and "fast_cache" not in matrix:
        raise InputError(f"{study_dir}: its matrix varies neither layout nor fast_cache; validate compares the "
                         "layouts, or the caches, a study ran with what recommend predicts for them")
    give_back_freed_memory()
    tables = {}
    with tempfile.TemporaryDirectory() as scratch:
        if "layout" in matrix:
            tables["validation"], tables["validation_layouts"] = validate_layouts(study_dir, record, profiles_text,
                                                                                  Path(scratch))
        if "fast_cache" in matrix:
            tables["cache_validation"] = validate_caches(study_dir, record, profiles_text, Path(scratch))
    return tables
