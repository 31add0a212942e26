"""`tierlab recommend`: the best layout for a fast-tier capacity, the capacity curve, and the fast tier as a block
cache of the same size instead, predicted from traced runs; with the evidence and the assumptions."""

import tempfile
from pathlib import Path

import pandas as pd

from ..catalog.engines import ENGINES
from ..catalog.layout import CAPACITY, FAST, parse_layout
from ..catalog.values import figure
from ..catalog.workloads import workload_of
from ..devices import cost_model, profiles
from ..errors import InputError, RunDirError
from ..runs.manifest import table_bytes, tiers_dilation
from ..runs.observing import OBSERVED
from ..runs.results import read_table
from ..runs.settings import human_bytes
from . import objects
from .migration_script import migration_plan, migration_steps
from .predict import TracedQuery, all_layouts, best_at, cache_curve, capacity_curve, predict_layouts
from .traced import device_profiles, emulated_dilation, give_back_freed_memory, traced_query, traced_runs, window

# the units of an observed instance listed by name
OBJECTS_SHOWN = 10
ASSUMPTIONS = [
    "each request is re-costed by the emulator's device model at the time it was dispatched in the traced run",
    "a query's non-I/O time (elapsed minus the time with a request in flight) does not depend on placement",
    "a query's I/O time scales with the model's: each request's latency times its share of the traced time in flight "
    "(1 alone, 1/k beside k - 1 others), summed; the requests' overlap stays as traced",
    "on emulated tiers costed on their own models, the I/O time beyond the dilated model's is the host's own and stays "
    "as traced",
    "each tier's requests are replayed together, so tables sharing a device interfere as in the model",
    "requests no table owns (logs, temporary files) stay on the tier they were traced on",
    "the cache is read-only and empty when each query starts: an ideal LRU of pages (every page admitted), and one that "
    "admits a page on its second access and lets sequential requests bypass it, as dm-cache and bcache do; hits "
    "cost the fast tier, misses and writes the capacity tier; filling it costs nothing",
    "migration copies each moved table at the slower of the source's read and the target's sustained write rate",
]


def summary(queries: list[TracedQuery], predicted: pd.DataFrame, curve: pd.DataFrame, cache: pd.DataFrame,
            best: dict, moved: dict, capacity_bytes: int, traced_layout: str, from_layout: str,
            evidence_kind: str = "queries") -> dict:
    """recommend's answer: the layout, its evidence (runs, their traced steps: queries, or an observation's
    intervals, as evidence_kind says; predicted and traced times), the curves."""
    traced = predicted[predicted["layout"] == traced_layout]["predicted_s"].iloc[0]
    (at,) = cache[cache["capacity_bytes"] == capacity_bytes].to_dict("records")
    return {
        "fast_capacity_bytes": capacity_bytes,
        "layout": best["layout"], "fast_bytes": int(predicted.loc[predicted["layout"] == best["layout"], "fast_bytes"].iloc[0]),
        "predicted_s": best["predicted_s"],
        "traced_layout": traced_layout, "traced_s": sum(q.weight * q.elapsed_s for q in queries),
        "traced_predicted_s": traced,
        "verdict": at["verdict"], "cache_predicted_s": at["admitting_predicted_s"],
        "cache_hit_pct": at["admitting_hit_pct"], "lru_predicted_s": at["lru_predicted_s"],
        "migration": {"from_layout": from_layout, **moved},
        "evidence_kind": evidence_kind,
        "evidence": [{"run_id": q.run_id, "query": q.query, "weight": q.weight, "elapsed_s": q.elapsed_s,
                      "io_s": q.io_s, "host_s": q.host_s} for q in queries],
        "capacity_curve": curve.to_dict("records"),
        "cache_curve": cache.to_dict("records"),
        "assumptions": ASSUMPTIONS,
    }


def format_summary(result: dict) -> str:
    """recommend's answer as text: the advice, then the two curves."""
    runs = sorted({e["run_id"] for e in result["evidence"]})
    # a workload directory's layouts name its tables, and can be longer than TPC-H's codes
    width = max([16, *(len(r["layout"]) for r in result["capacity_curve"])])
    lines = [
        f"With {human_bytes(result['fast_capacity_bytes'])} of fast tier: layout {result['layout']} "
        f"({human_bytes(result['fast_bytes'])}), predicted {result['predicted_s']:.3f} s "
        f"(traced {result['traced_layout']}: {result['traced_s']:.3f} s).",
        f"The fast tier as a block cache of that size (admitting as dm-cache and bcache do): predicted "
        f"{result['cache_predicted_s']:.3f} s ({result['cache_hit_pct']:.1f}% of requests hit; an ideal LRU "
        f"{result['lru_predicted_s']:.3f} s): {result['verdict']} is faster.",
        f"Migration from {result['migration']['from_layout']}: {', '.join(result['migration']['tables']) or 'nothing'} "
        f"({human_bytes(result['migration']['bytes'])}, about {result['migration']['predicted_s']:.1f} s).",
        *_migration_lines(result["migration"]["plan"]),
        *_object_lines(result.get("objects", [])),
        f"Evidence: {len(result['evidence'])} traced {result['evidence_kind']} of run(s) "
        f"{', '.join(runs)}.",
        "", f"{'capacity':>12}  {'best layout':<{width}} {'predicted_s':>11}",
    ]
    lines += [f"{human_bytes(r['capacity_bytes']):>12}  {r['layout']:<{width}} {r['predicted_s']:>11.3f}"
              for r in result["capacity_curve"]]
    lines += ["", f"{'capacity':>12}  {'placement_s':>11} {'cache_s':>9} {'hit %':>6} {'lru_s':>9} {'hit %':>6}  verdict"]
    lines += [f"{human_bytes(r['capacity_bytes']):>12}  {r['placement_predicted_s']:>11.3f} {r['admitting_predicted_s']:>9.3f} "
              f"{r['admitting_hit_pct']:>6.1f} {r['lru_predicted_s']:>9.3f} {r['lru_hit_pct']:>6.1f}  {r['verdict']}"
              for r in result["cache_curve"]]
    lines += ["", "Assumptions:"] + [f"- {a}" for a in result["assumptions"]]
    return "\n".join(lines)


def _object_lines(units: list[dict]) -> list[str]:
    """The units placed by object that save most on the fast tier, per GiB, and those no statement moves."""
    if not units:
        return []
    shown = [u for u in units if u["movable"] and u["saving_s"] > 0][:OBJECTS_SHOWN]
    lines = [f"Objects that save most on the fast tier (of {sum(u['movable'] for u in units)} that a statement moves):",
             f"  {'object':<40} {'kind':<6} {'size':>9} {'traced I/O s':>12} {'saving s':>9} {'s per GiB':>10}"]
    lines += [f"  {u['unit']:<40} {u['kind']:<6} {human_bytes(u['bytes']):>9} {u['io_time_s']:>12.3f} "
              f"{u['saving_s']:>9.3f} {u['saving_s_per_gib']:>10.3f}" for u in shown]
    fixed = [u for u in units if not u["movable"] and u["io_time_s"] > 0]
    if fixed:
        lines.append("Not placed (no statement moves them): " + ", ".join(
            f"{u['unit']} ({u['io_time_s']:.3f} s of traced I/O)" for u in sorted(fixed, key=lambda u: -u["io_time_s"])))
    return lines


def _migration_lines(plan: dict) -> list[str]:
    """The migration's statements, step by step, or why there are none."""
    if "unavailable" in plan:
        return [f"No migration script: {plan['unavailable']}."]
    if not plan["steps"]:
        return []
    lines = [f"How, on {plan['engine']} ({plan['method']}; with --out, the scripts and their undo):"]
    for step in plan["steps"]:
        lines += [f"  {step['table']}: {human_bytes(step['bytes'])} to the {step['to']} tier, about "
                  f"{figure(step['predicted_s'])} s; lock: {step['lock']}"] + [f"    {line}" for line in step["lines"]]
    return lines


def parse_weights(text: str | None, queries: list[str], declared: dict[str, float]) -> dict[str, float]:
    """--weights q03=2,q10=1: the queries to optimise for and their weights (default: the weights the workload
    declares, where it does: a workload directory's; else every query, 1 each)."""
    if not text:
        return {query: declared.get(query, 1.0) for query in queries}
    weights = {}
    for item in text.split(","):
        query, _, weight = item.partition("=")
        if query not in queries:
            raise InputError(f"--weights: {query!r} is not a traced query of these runs; they have {', '.join(queries)}")
        try:
            weights[query] = float(weight)
        except ValueError:
            raise InputError(f"--weights: {item!r} is not QUERY=NUMBER (e.g. q03=2)") from None
        if not weights[query] >= 0:
            raise InputError(f"--weights: {item!r}: a weight is a number >= 0")
    if not any(weights.values()):
        raise InputError(f"--weights {text!r}: give at least one query a weight above 0")
    return weights


def recommend(run_dirs: list[str], capacity_bytes: int, profiles_text: str | None = None, weights_text: str | None = None,
              from_layout: str | None = None, progress=None, fast_location: str | None = None) -> tuple[dict, dict]:
    """The answer for a fast tier of capacity_bytes from the traced queries of run_dirs (summary's), and its tables:
    layouts (every layout predicted), capacity_curve, cache_curve. progress(done, total, label) before each query.
    Runs of an observed instance or of a workload directory are placed at the grain of their objects
    (placement.objects); fast_location is where an observed instance's migration makes the fast tier's tablespace or
    directory."""
    give_back_freed_memory()
    show = progress or (lambda done, total, label: None)
    runs = traced_runs(run_dirs)
    first = runs[0][1]
    observed = first["settings"]["workload"] == OBSERVED
    workload = None if observed else workload_of(first["settings"])
    traced = [(run_dir, m, row) for run_dir, m in runs
              for row in read_table(run_dir, "queries").query("status == 'ok' and trace_complete.notna()",
                                                              engine="python").to_dict("records")]
    names = [row["query"] for _, _, row in traced]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise RunDirError(f"query {repeated[0]} was traced in more than one of these runs (or tries); give each query once")
    declared = {} if observed else workload.weights
    weights = parse_weights(weights_text, names, declared)
    traced = [t for t in traced if weights.get(t[2]["query"], 0) > 0]
    page_bytes = {run_dir: int(read_table(run_dir, "parameters")["page_size_bytes"][0]) for run_dir, _ in runs}
    with tempfile.TemporaryDirectory() as scratch:
        profile_files = device_profiles(profiles_text, first["tiers"], Path(scratch))
        # in the traced run's time, as the predicted query times are
        run_dilation = tiers_dilation(first["tiers"]) or 1.0
        rates = {(src, dst): profiles.copy_bytes_per_s(profiles.load(profile_files[src]),
                                                       profiles.load(profile_files[dst])) / run_dilation
                 for src in (FAST, CAPACITY) for dst in (FAST, CAPACITY) if src != dst}
        if observed or workload.directory:
            return _recommend_objects(runs, traced, weights, capacity_bytes, profile_files, page_bytes, rates, show,
                                      from_layout, fast_location)
        sizes = table_bytes(first["layout"]["tables"])
        from_layout = from_layout or first["layout"]["name"]
        start = parse_layout(from_layout, workload)
        queries = []
        for number, (run_dir, m, row) in enumerate(traced, 1):
            show(number, len(traced), f"{row['query']} to cost its layouts")
            requests, query = traced_query(run_dir, m, row, profile_files, weights[row["query"]])
            queries.append(query)
        predicted = predict_layouts(queries, all_layouts(sizes), workload)
        curve = capacity_curve(predicted)
        capacities = sorted({int(c) for c in curve["capacity_bytes"] if c > 0} | {capacity_bytes})
        caches = []
        # a second pass, so that memory holds one query's requests at a time; backwards, so that it starts with
        # the window the first pass ended with (a single query's is read once)
        for number, (run_dir, m, row) in enumerate(reversed(traced), 1):
            show(number, len(traced), f"{row['query']} to cost the caches")
            requests = requests if number == 1 else window(run_dir, m, row)
            caches.insert(0, cost_model.cache_costs(requests, profile_files, page_bytes[run_dir], capacities))
        cache = cache_curve(queries, caches, curve)
    best = best_at(curve, capacity_bytes)
    end = parse_layout(best["layout"], workload)
    moved = _moved(migration_steps(first["layout"]["tables"], start, end, rates))
    try:
        moved["plan"] = migration_plan(first, start, end, rates)
    except RunDirError as error:
        moved["plan"] = {"unavailable": str(error)}
    result = summary(queries, predicted, curve, cache, best, moved, capacity_bytes, first["layout"]["name"], from_layout)
    return result, {"layouts": predicted, "capacity_curve": curve, "cache_curve": cache}


def _units(m: dict) -> dict:
    """The units a run is placed by: a PostgreSQL run of tierlab's own split into its tables and indexes; an observed
    instance's, and a table with its indexes on MySQL and MariaDB, as its manifest lists them."""
    tables = m["layout"]["tables"]
    if m["settings"]["workload"] == OBSERVED or ENGINES[m["engine"]["name"]].family != "postgresql":
        return tables
    return objects.postgresql_units(tables, {t["name"]: t["role"] for t in m["tiers"]})


def _recommend_objects(runs, traced, weights, capacity_bytes, profile_files, page_bytes, rates, show, from_layout,
                       fast_location) -> tuple[dict, dict]:
    """recommend at the grain of objects: the units ranked by saving per byte, the fast tier filled in that order
    (placement.objects), every placement replayed whole, the cache beside it; and the units no statement moves, with
    the I/O time they took. The migration starts from the traced placement, or from_layout's units."""
    first = runs[0][1]
    observed = first["settings"]["workload"] == OBSERVED
    tables = _units(first)
    unit_bytes = table_bytes(tables)
    kinds = objects.unit_kinds(tables)
    movable = {unit for unit, kind in kinds.items() if kind in objects.MOVABLE_KINDS}
    nothing_fast = dict.fromkeys(tables, CAPACITY)
    traced_fast = frozenset(u for u, info in tables.items() if info["tier"] == FAST)
    start_fast = objects.parse_placement(from_layout, tables) if from_layout else traced_fast
    queries = []
    for number, (run_dir, m, row) in enumerate(traced, 1):
        show(number, len(traced), f"{row['query']} to cost each object on the fast tier")
        requests = window(run_dir, m, row, tables)
        costs = objects.window_costs(requests, profile_files, [traced_fast, *objects.singles(requests, movable)])
        queries.append(TracedQuery(m["run_id"], row["query"], weights[row["query"]], row["elapsed_s"],
                                   0.0 if pd.isna(row["io_time_s"]) else row["io_time_s"],
                                   {**nothing_fast, **dict.fromkeys(traced_fast, FAST)}, costs,
                                   emulated_dilation(m, profile_files)))
    saving = objects.savings_s(queries, sorted(tables), sorted(movable))
    order = objects.ranking(saving, unit_bytes)
    placements = objects.candidates(order, unit_bytes, [capacity_bytes])
    capacities = sorted({capacity_bytes} | {sum(unit_bytes[u] for u in p) for p in placements} - {0})
    caches = []
    for number, (query, (run_dir, m, row)) in enumerate(zip(queries, traced, strict=True), 1):
        show(number, len(traced), f"{row['query']} to cost the placements and caches")
        requests = window(run_dir, m, row, tables)
        query.costs_us.update(objects.window_costs(requests, profile_files, [start_fast, *placements]))
        caches.append(cost_model.cache_costs(requests, profile_files, page_bytes[run_dir], capacities))
    by_name = {objects.placement_name(p): p for p in [frozenset(), traced_fast, start_fast, *placements]}
    predicted = pd.DataFrame({
        "layout": list(by_name),
        "fast_bytes": [sum(unit_bytes[u] for u in p) for p in by_name.values()],
        "predicted_s": [sum(q.weight * q.predict_s(q.io_us({**nothing_fast, **dict.fromkeys(p, FAST)}))
                            for q in queries) for p in by_name.values()]})
    curve = capacity_curve(predicted)
    cache = cache_curve(queries, caches, curve)
    best = best_at(curve, capacity_bytes)
    start = {**nothing_fast, **dict.fromkeys(start_fast, FAST)}
    end = {**nothing_fast, **dict.fromkeys(by_name[best["layout"]], FAST)}
    moved = _moved(migration_steps(tables, start, end, rates))
    try:
        moved["plan"] = migration_plan(first, start, end, rates, fast_location, tables)
    except RunDirError as error:
        moved["plan"] = {"unavailable": str(error)}
    result = summary(queries, predicted, curve, cache, best, moved, capacity_bytes, objects.placement_name(traced_fast),
                     objects.placement_name(start_fast), "intervals" if observed else "queries")
    io_time = _unit_io_time(runs, tables)
    result["objects"] = [{"unit": unit, "kind": kinds[unit], "bytes": unit_bytes[unit], "io_time_s": io_time.get(unit, 0.0),
                          "saving_s": saving.get(unit, 0.0),
                          "saving_s_per_gib": saving.get(unit, 0.0) / max(unit_bytes[unit], 1) * 2**30,
                          "movable": unit in movable}
                         for unit in sorted(tables, key=lambda u: (-saving.get(u, 0.0), -io_time.get(u, 0.0), u))]
    return result, {"layouts": predicted, "capacity_curve": curve, "cache_curve": cache,
                    "objects": pd.DataFrame(result["objects"])}


def _moved(steps: list[dict]) -> dict:
    """What a migration's steps move in all: the tables, their bytes and the predicted time."""
    return {"tables": sorted(step["table"] for step in steps), "bytes": sum(step["bytes"] for step in steps),
            "predicted_s": sum(step["predicted_s"] for step in steps)}


def _unit_io_time(runs, tables: dict) -> dict[str, float]:
    """The traced I/O time of each unit's objects, over the runs' traced steps."""
    unit_of = {f["object"]: unit for unit, info in tables.items() for f in info["files"]}
    found: dict[str, float] = {}
    for run_dir, _ in runs:
        metrics = read_table(run_dir, "table_metrics")
        for obj, seconds in metrics.groupby("object")["io_time_s"].sum().items():
            unit = unit_of.get(obj, obj)
            found[unit] = found.get(unit, 0.0) + float(seconds)
    return found
