"""The tierlab command: analyze, compare, recommend, trace-stats, manifest, tiers check."""

import argparse
import ctypes
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

# pandas, the compiled metrics and matplotlib are imported by the commands that use them (about a second and a
# half in all): `tierlab manifest`, which every run calls twice, and `tierlab tiers check` need none of them
from . import device_profile, manifest
from .defaults import FORMATS, RANDOM_PCT_THRESHOLD, REPEAT_THRESHOLD, SCAN_REQUEST_BYTES, STREAM_WINDOW
from .errors import InputError, RunDirError, TierlabError
from .layout import CAPACITY, FAST, parse_layout
from .manifest import tiers_dilation
from .run_settings import parse_bytes
from .tiers_check import format_check, run_check


def _progress():
    """A progress callback for reading traces: each input as it starts, with the time left from the pace so far."""
    started = time.monotonic()

    def show(done: int, total: int, label: str) -> None:
        spent = time.monotonic() - started
        left = f"; about {spent / (done - 1) * (total - done + 1):.0f} s left" if done > 1 else ""
        print(f"[{done}/{total}] reading {label}{left}", file=sys.stderr, flush=True)
    return show


def _analyze(args) -> None:
    import pandas as pd

    from .report import write_run_report
    from .run_io import analyze, cut_traces, load_run, write_tables
    from .trace_stats import suspect

    run_dir = Path(args.run_dir)
    run = load_run(run_dir)
    requests_path = run_dir / "tables" / "requests.parquet"
    requests_path.parent.mkdir(exist_ok=True)
    tables = analyze(run, args.stream_window, args.random_threshold, args.repeat_threshold, args.tolerate_errors,
                     _progress(), requests_path)
    queries = tables["queries"]
    for query, attempt in cut_traces(queries):
        print(f"warning: the trace of {query} try {attempt} has no end marker: it was cut short, and the "
              "query's requests after the cut are missing (trace_complete=False in tables/queries.csv)",
              file=sys.stderr)
    for row in tables["trace_counts"].to_dict("records"):
        for problem in suspect({key: value for key, value in row.items() if pd.notna(value)}):
            print(f"warning: the trace of {row['query']} try {row['try']} has {problem} (tables/trace_counts.csv)",
                  file=sys.stderr)
    context = manifest.build(run_dir, "auto", with_artifacts=False)
    for path in [requests_path, *write_tables(run_dir, tables), *write_run_report(run_dir / "report", context, tables)]:
        print(path)
    print(queries.to_string(index=False, columns=["query", "try", "status", "elapsed_s", "io_time_s", "rows"]))


def _manifest(args) -> None:
    phases = json.loads(args.phases) if args.phases else None
    written = manifest.write(Path(args.run_dir), args.status, args.error, phases)
    print(f"{args.run_dir}/manifest.json: status {written['status']}")


def _compare(args) -> None:
    from .report import compare_runs

    for path in compare_runs([Path(run_dir) for run_dir in args.run_dirs], Path(args.out) if args.out else None):
        print(path)


def _study(args) -> None:
    import pandas as pd

    from .report import compare_runs
    from .study import fastest, new_study_dir, points, read_study, read_study_record, run_study

    if args.resume:
        study_dir = Path(args.resume)
        record = read_study_record(study_dir)
        study = read_study(args.file) if args.file else record["study"]
    elif args.file:
        study = read_study(args.file)
        study_dir = new_study_dir(Path(args.results_dir), study)
    else:
        raise InputError("give a study file (tierlab study FILE), or a study to resume (--resume results/<study_id>)")
    try:
        extra = json.loads(args.extra_vars)
    except ValueError as error:
        raise InputError(f"--extra-vars {args.extra_vars!r} is not JSON ({error})") from None
    if not isinstance(extra, dict):
        raise InputError(f"--extra-vars {args.extra_vars!r}: give a JSON object, "
                              """e.g. '{"tierlab_root": "/srv/tierlab"}'""")
    print(f"study {study_dir}", flush=True)
    record = run_study(study, study_dir, extra, inventory=Path(args.inventory) if args.inventory else None)
    ok = [study_dir / point["run_id"] for point in record["points"] if point["status"] == "ok"]
    if len(ok) > 1:
        for path in compare_runs(ok, study_dir / "compare"):
            print(path)
        best = fastest(study, record, pd.read_csv(study_dir / "compare" / "compare.csv"))
        best.to_csv(study_dir / "fastest.csv", index=False, float_format="%.6g")
        print(f"{study_dir / 'fastest.csv'}:\n{best.to_string(index=False, float_format=lambda v: f'{v:.3g}')}")
    total = len(points(study))
    left = total - len(ok)
    if left:
        sys.exit(f"tierlab study: {left} of {total} points have no ok run (study.json says why, where one ran); "
                 f"run them with: tierlab study --resume {study_dir}")


def _advise(args) -> None:
    import pandas as pd

    from .advise import SETTINGS, advise, statements
    from .report import write_advice_report
    from .run_io import run_figures
    from .study import read_study_record

    study_dir = Path(args.study_dir)
    record = read_study_record(study_dir)
    study = record["study"]
    if not set(SETTINGS) & set(study["matrix"]):
        raise InputError(f"{study_dir}: its matrix varies {', '.join(study['matrix']) or 'nothing'}; advise speaks "
                              f"of {', '.join(SETTINGS)}: run a study whose matrix varies one of them")
    ok = [point for point in record["points"] if point["status"] == "ok"]
    if not ok:
        raise InputError(f"{study_dir}: no point has an ok run yet; resume the study (tierlab study --resume "
                              f"{study_dir})")
    figures = pd.concat([run_figures(study_dir / point["run_id"]).assign(
        run=point["run_id"], **{name: point["variables"][name] for name in study["matrix"]}) for point in ok],
        ignore_index=True)
    advice = advise(study, figures)
    out = Path(args.out) if args.out else study_dir / "advice"
    out.mkdir(parents=True, exist_ok=True)
    advice.to_csv(out / "advice.csv", index=False, float_format="%.6g")
    lines = statements(advice)
    missing = len(record["points"]) - len(ok)
    if missing:
        lines.append(f"{missing} of {len(record['points'])} points have no ok run and are left out "
                     f"(study.json says why); resume the study to measure them")
    for path in (out / "advice.csv", *write_advice_report(out, study, advice, lines)):
        print(path)
    print("\n".join(lines))


def _weights(text: str | None, queries: list[str]) -> dict[str, float]:
    """--weights q03=2,q10=1: the queries to optimise for and their weights (default: every query, 1 each)."""
    if not text:
        return dict.fromkeys(queries, 1.0)
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


def _profiles(text: str | None, tiers: list[dict], scratch: Path) -> dict[str, Path]:
    """Each role's device profile file: --profiles fast=NAME|FILE,capacity=NAME|FILE, else the traced tiers'."""
    if text:
        given = dict(item.partition("=")[::2] for item in text.split(","))
        if set(given) != {FAST, CAPACITY}:
            raise InputError(f"--profiles {text!r}: give fast=PROFILE,capacity=PROFILE "
                                  f"(a profile: {', '.join(device_profile.profile_names())}, or a .toml file)")
        return {role: device_profile.profile_path(profile) for role, profile in given.items()}
    profiles = {}
    for tier in tiers:
        if not (tier.get("profile") or {}).get("text"):
            raise InputError(f"tier {tier['name']} has no device model (a real device): give --profiles "
                                  "fast=PROFILE,capacity=PROFILE, e.g. from playbooks/devices.yml's measurements")
        path = scratch / f"{tier['role']}.toml"
        path.write_text(tier["profile"]["text"])
        profiles[tier["role"]] = path
    return profiles


def _recommend_runs(run_dirs: list[str]) -> list[tuple[Path, dict]]:
    """The runs to recommend from, each with its manifest: traced, of one engine and workload, on the same tiers."""
    from .run_io import read_manifest

    runs = [(Path(d), read_manifest(Path(d))) for d in run_dirs]
    first_dir, first = runs[0]
    for run_dir, m in runs:
        if not m["settings"].get("trace"):
            raise RunDirError(f"{run_dir} ran its queries untraced (trace=false); recommend needs traced runs")
        for key in ("engine", "workload"):
            if (m[key].get("name"), m[key].get("scale_factor")) != (first[key].get("name"), first[key].get("scale_factor")):
                raise RunDirError(f"{run_dir} ran another {key} than {first_dir}; recommend one engine's one workload")
        if [t.get("profile") for t in m["tiers"]] != [t.get("profile") for t in first["tiers"]]:
            raise RunDirError(f"{run_dir} ran on other tiers than {first_dir}; recommend from runs on the same tiers")
    return runs


def _window(run_dir: Path, m: dict, row: dict):
    """A traced query's requests as the cost model takes them (a cost_model.Window), each object named by its
    table (`other` for none), with the tiers' roles and the run's dilation."""
    import pandas as pd

    from . import cost_model
    from .run_io import request_chunks

    object_table = {f["object"]: t for t, v in m["layout"]["tables"].items() for f in v["files"]}

    def by_table(requests: pd.DataFrame) -> pd.DataFrame:
        # each object (and a request of none) named by its table, as categories: a chunk has a million requests
        objects = requests["object"].cat
        tables = pd.Index([object_table.get(o, cost_model.OTHER) for o in objects.categories] + [cost_model.OTHER])
        names = tables.unique()
        requests["object"] = pd.Categorical.from_codes(names.get_indexer(tables)[objects.codes], categories=names)
        return requests

    chunks = map(by_table, request_chunks(run_dir, row["query"], int(row["try"])))
    return cost_model.Window.of(chunks, {t["name"]: t["role"] for t in m["tiers"]}, tiers_dilation(m["tiers"]) or 1.0)


# glibc's mallopt parameter: the size from which a block gets a mapping of its own, given back when freed
M_MMAP_THRESHOLD = -3


def _give_back_freed_memory() -> None:
    """Arrays let go are given back to the system at once, so that peak memory follows what is alive. The cost
    model reads a window of millions of requests in parts of a few MB: glibc's malloc would keep the parts'
    memory in its heap (its threshold for a mapping of a block's own rises to 32 MB as such blocks are
    freed), and arrow's allocator its own: recommend on 10^7 requests peaked at about 1 GB, with this 0.75 GB."""
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is not None:
        mallopt(M_MMAP_THRESHOLD, 1 << 20)


def _recommend(args) -> None:
    from . import cost_model, recommend
    from .run_io import read_table

    _give_back_freed_memory()
    capacity = parse_bytes("--fast-capacity", args.fast_capacity)
    runs = _recommend_runs(args.run_dirs)
    first = runs[0][1]
    workload = first["workload"]["name"]
    from_layout = args.from_layout or first["layout"]["name"]
    start = parse_layout(from_layout, workload)
    # what a table takes on a tier is what it stores there (manifests written before stored bytes have sizes)
    table_bytes = {t: int(v.get("stored_bytes", v["size_bytes"])) for t, v in first["layout"]["tables"].items()}
    traced = [(run_dir, m, row) for run_dir, m in runs
              for row in read_table(run_dir, "queries").query("status == 'ok'").to_dict("records")]
    names = [row["query"] for _, _, row in traced]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise RunDirError(f"query {repeated[0]} was traced in more than one of these runs (or tries); give each query once")
    weights = _weights(args.weights, names)
    traced = [t for t in traced if weights.get(t[2]["query"], 0) > 0]
    with tempfile.TemporaryDirectory() as scratch:
        profiles = _profiles(args.profiles, first["tiers"], Path(scratch))
        show, queries = _progress(), []
        for number, (run_dir, m, row) in enumerate(traced, 1):
            show(number, len(traced), f"{row['query']} to cost its layouts")
            placement = {t: v["tier"] for t, v in m["layout"]["tables"].items()}
            window = _window(run_dir, m, row)
            queries.append(recommend.TracedQuery(m["run_id"], row["query"], weights[row["query"]], row["elapsed_s"],
                                                 row["io_time_s"], placement, cost_model.layout_costs(window, profiles)))
        predicted = recommend.predict_layouts(queries, recommend.all_layouts(table_bytes), workload)
        curve = recommend.capacity_curve(predicted)
        capacities = sorted({int(c) for c in curve["capacity_bytes"] if c > 0} | {capacity})
        page_bytes = {run_dir: int(read_table(run_dir, "parameters")["page_size_bytes"][0]) for run_dir, _ in runs}
        show, caches = _progress(), []
        # a second pass, so that memory holds one query's requests at a time; backwards, so that it starts with
        # the window the first pass ended with (a single query's is read once)
        for number, (run_dir, m, row) in enumerate(reversed(traced), 1):
            show(number, len(traced), f"{row['query']} to cost the caches")
            window = window if number == 1 else _window(run_dir, m, row)
            caches.insert(0, cost_model.cache_costs(window, profiles, page_bytes[run_dir], capacities))
        cache = recommend.cache_curve(queries, caches, curve)
        # in the traced run's time, as the predicted query times are
        run_dilation = tiers_dilation(first["tiers"]) or 1.0
        rates = {(src, dst): device_profile.copy_bytes_per_s(device_profile.load(profiles[src]),
                                                             device_profile.load(profiles[dst])) / run_dilation
                 for src in (FAST, CAPACITY) for dst in (FAST, CAPACITY) if src != dst}
    best = recommend.best_at(curve, capacity)
    moved = recommend.migration(table_bytes, start, parse_layout(best["layout"], workload), rates)
    result = recommend.summary(queries, predicted, curve, cache, best, moved, capacity, first["layout"]["name"],
                               from_layout)
    text = recommend.format_summary(result)
    if args.out:
        from .report import write_recommend_report

        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "recommend.json").write_text(json.dumps(result, indent=1))
        predicted.to_csv(out / "layouts.csv", index=False, float_format="%.6g")
        curve.to_csv(out / "capacity_curve.csv", index=False, float_format="%.6g")
        cache.to_csv(out / "cache_curve.csv", index=False, float_format="%.6g")
        write_recommend_report(out, result, text)
    print(json.dumps(result, indent=1) if args.json else text)


def _devices(args) -> None:
    from . import device_fit
    from .run_io import write_tables

    run_dir = Path(args.run_dir)
    source = run_dir / "raw" / "devices.json"
    try:
        result = json.loads(source.read_text())
    except FileNotFoundError:
        raise RunDirError(f"{source} is missing: playbooks/devices.yml writes it (DEVICES_DIR is the directory it "
                          "made under results/)") from None
    except json.JSONDecodeError as exc:
        raise RunDirError(f"{source}: not JSON ({exc}); run playbooks/devices.yml again") from None
    try:
        fitted = {tier["name"]: device_fit.fit(tier) for tier in result["tiers"]}
        tables = {"device_jobs": device_fit.job_rows(result), "device_sustained": device_fit.sustained_rows(result)}
    except (KeyError, ValueError, TypeError, ZeroDivisionError, StopIteration) as exc:
        # a file cut short or edited: every job of the suite is needed, and nothing is written without them
        raise RunDirError(f"{source} does not hold the device suite's measurements ({type(exc).__name__}: {exc}); "
                          "run playbooks/devices.yml again") from None
    (run_dir / "profiles").mkdir(exist_ok=True)
    for tier in result["tiers"]:
        path = run_dir / "profiles" / f"{tier['name']}.toml"
        path.write_text(device_fit.profile_text(tier, fitted[tier["name"]], str(source)))
        print(f"{path}: " + ", ".join(f"{k} {v}" for k, v in fitted[tier["name"]].items()))
    write_tables(run_dir, tables)
    from .report import write_devices_report

    print(write_devices_report(run_dir, result, fitted))


# the matrix variables each side of validate compares; the study's other variables make its groups
LAYOUT_VARIABLES = ("layout",)
CACHE_VARIABLES = ("fast_cache", "fast_cache_policy")


def _study_groups(study_dir: Path, record: dict, compared: tuple[str, ...]) -> tuple[list[str], dict]:
    """The matrix's variables outside compared, and the study's ok runs (each with its manifest) by their values."""
    from .run_io import read_manifest

    others = [name for name in record["study"]["matrix"] if name not in compared]
    groups: dict[tuple, list[tuple[Path, dict]]] = {}
    for point in record["points"]:
        if point["status"] == "ok":
            run_dir = study_dir / point["run_id"]
            groups.setdefault(tuple(point["variables"][k] for k in others), []).append((run_dir, read_manifest(run_dir)))
    return others, groups


def _traced_query(run_dir: Path, m: dict, row: dict, profiles: dict[str, Path]):
    """A traced query of a run as recommend costs it: its window and its recommend.TracedQuery."""
    from . import cost_model, recommend

    window = _window(run_dir, m, row)
    traced = {t: v["tier"] for t, v in m["layout"]["tables"].items()}
    return window, recommend.TracedQuery(m["run_id"], row["query"], 1.0, row["elapsed_s"], row["io_time_s"], traced,
                                         cost_model.layout_costs(window, profiles))


def _validate_layouts(study_dir: Path, record: dict, profiles_text: str | None, scratch: Path):
    """From each run, every layout the study ran predicted against its measured time (the median over its runs);
    and each layout's predictions beside its runs (recommend.layout_errors)."""
    import pandas as pd

    from . import recommend
    from .run_io import read_table

    others, groups = _study_groups(study_dir, record, LAYOUT_VARIABLES)
    rows, layout_rows = [], []
    for group, runs in groups.items():
        done = {run_dir: read_table(run_dir, "queries").query("status == 'ok'").to_dict("records") for run_dir, _ in runs}
        measured: dict[str, dict[str, list[float]]] = {}
        for run_dir, m in runs:
            for row in done[run_dir]:
                measured.setdefault(row["query"], {}).setdefault(m["layout"]["name"], []).append(row["elapsed_s"])
        medians = {name: {layout: statistics.median(seconds) for layout, seconds in by_layout.items()}
                   for name, by_layout in measured.items()}
        reproducibility = {name: recommend.repeat_spearman(by_layout) for name, by_layout in measured.items()}
        profiles = _profiles(profiles_text, runs[0][1]["tiers"], scratch)
        predictions: dict[str, list[dict[str, float]]] = {}
        for run_dir, m in runs:
            for row in done[run_dir]:
                _, query = _traced_query(run_dir, m, row, profiles)
                times = medians[row["query"]]
                predicted = {layout: query.predict_s(query.io_us(parse_layout(layout, m["workload"]["name"])))
                             for layout in times}
                predictions.setdefault(row["query"], []).append(predicted)
                rows.append({**dict(zip(others, group, strict=True)), "query": row["query"],
                             "traced_layout": m["layout"]["name"], "run_id": m["run_id"],
                             **recommend.validation(predicted, times), "repeat_spearman": reproducibility[row["query"]]})
        for name, by_layout in measured.items():
            errors = recommend.layout_errors(by_layout, predictions[name])
            layout_rows.append(errors.assign(**dict(zip(others, group, strict=True)), query=name)
                               [[*others, "query", *errors.columns]])
    return pd.DataFrame(rows), pd.concat(layout_rows, ignore_index=True)


def _validate_caches(study_dir: Path, record: dict, profiles_text: str | None, scratch: Path):
    """From each run without a cache, every cache the study ran (size and policy) predicted against what it
    measured: the query's time and the emulated cache's hit share (medians over the cache's runs), and the
    cost model's cache on the cache run's own trace."""
    import pandas as pd

    from . import cost_model
    from .run_io import read_table

    others, groups = _study_groups(study_dir, record, CACHE_VARIABLES)
    rows = []
    for group, runs in groups.items():
        where = " ".join(f"{k}={v}" for k, v in zip(others, group, strict=True)) or "in the study"
        bases = [(run_dir, m) for run_dir, m in runs if not m["settings"]["fast_cache_bytes"]]
        if not bases:
            raise InputError(f"{study_dir}: no ok run without a cache {where}; validate predicts each cache from "
                                  "a traced run without one: give fast_cache the value none in the matrix")
        measured: dict[tuple, dict[str, list[float]]] = {}
        for run_dir, m in runs:
            if not m["settings"]["fast_cache_bytes"]:
                continue
            capacity_tier = next(t["name"] for t in m["tiers"] if t["role"] == CAPACITY)
            tiers = read_table(run_dir, "tier_metrics")
            tiers = tiers[tiers["tier"] == capacity_tier].set_index(["query", "try"])
            simulated = read_table(run_dir, "query_metrics").set_index(["query", "try"])["cache_hit_pct_simulated"]
            for row in read_table(run_dir, "queries").query("status == 'ok'").to_dict("records"):
                settings = m["settings"]
                key = (row["query"], settings["fast_cache"], settings["fast_cache_bytes"], settings["fast_cache_policy"])
                figures = measured.setdefault(key, {"elapsed_s": [], "hit_pct": [], "simulated_hit_pct": []})
                figures["elapsed_s"].append(row["elapsed_s"])
                figures["hit_pct"].append(tiers.loc[(row["query"], row["try"]), "model_cache_hit_pct"])
                figures["simulated_hit_pct"].append(simulated.loc[(row["query"], row["try"])])
        sizes = sorted({size for _, _, size, _ in measured})
        profiles = _profiles(profiles_text, bases[0][1]["tiers"], scratch)
        for run_dir, m in bases:
            page_bytes = int(read_table(run_dir, "parameters")["page_size_bytes"][0])
            for row in read_table(run_dir, "queries").query("status == 'ok'").to_dict("records"):
                window, query = _traced_query(run_dir, m, row, profiles)
                costs = cost_model.cache_costs(window, profiles, page_bytes, sizes).set_index(["capacity_bytes", "policy"])
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


def _validate(args) -> None:
    from .study import read_study_record

    _give_back_freed_memory()
    study_dir = Path(args.study_dir)
    record = read_study_record(study_dir)
    matrix = record["study"]["matrix"]
    if "layout" not in matrix and "fast_cache" not in matrix:
        raise InputError(f"{study_dir}: its matrix varies neither layout nor fast_cache; validate compares the "
                              "layouts, or the caches, a study ran with what recommend predicts for them")
    layouts = layout_errors = caches = None
    with tempfile.TemporaryDirectory() as scratch:
        if "layout" in matrix:
            layouts, layout_errors = _validate_layouts(study_dir, record, args.profiles, Path(scratch))
            _write_validation(study_dir / "validation.csv", layouts)
            _write_validation(study_dir / "validation_layouts.csv", layout_errors)
        if "fast_cache" in matrix:
            caches = _validate_caches(study_dir, record, args.profiles, Path(scratch))
            _write_validation(study_dir / "cache_validation.csv", caches)
    from .report import write_validation_report

    print(write_validation_report(study_dir, record["study"], layouts, layout_errors, caches))


def _write_validation(path: Path, table) -> None:
    table.to_csv(path, index=False, float_format="%.6g")
    shown = table.drop(columns="run_id", errors="ignore").to_string(index=False, float_format=lambda v: f"{v:.3g}")
    print(f"{path}:\n{shown}")


def _trace_stats(args) -> None:
    from .trace_stats import suspect, trace_stats

    stats = trace_stats(args.paths, args.format, args.tolerate_errors, args.page_size, _progress())
    for problem in suspect(stats["counts"]):
        print(f"warning: the trace has {problem}", file=sys.stderr)
    if args.json:
        print(json.dumps(stats, indent=1, default=float))
        return
    for key, value in stats.items():
        print(f"{key:>26}  {value}")


def _planner_costs(args) -> None:
    from . import planner_costs

    profiles = _profiles(args.profiles, [], Path())
    tiers = planner_costs.planner_costs(profiles, args.page_size, args.scan_request_size)
    print(json.dumps(tiers, indent=1) if args.json else
          planner_costs.format_costs(tiers, args.page_size, args.scan_request_size))


def _tiers_check(args) -> None:
    result = run_check(Path(args.root), args.runtime_s)
    print(json.dumps(result, indent=1) if args.json else format_check(result))


def _checked(convert, allowed: str, accept):
    """An argparse type: the value converted, and refused with what is allowed unless accept(value)."""
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not allowed; allowed: {allowed}") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not allowed; allowed: {allowed}")
        return value
    return parse


PAGE_SIZE = _checked(int, "a power of two from 512 to 65536 bytes", lambda v: 512 <= v <= 65536 and v & (v - 1) == 0)
REQUEST_SIZE_ARG = _checked(int, "a multiple of 512 bytes from 512 to 16777216",
                            lambda v: 512 <= v <= 16 << 20 and v % 512 == 0)
STREAM_WINDOW_ARG = _checked(int, "a whole number from 1 to 1024", lambda v: 1 <= v <= 1024)
RANDOM_THRESHOLD_ARG = _checked(float, "a percentage from 0 to 100", lambda v: 0 <= v <= 100)
REPEAT_THRESHOLD_ARG = _checked(float, "a rate of at least 1 (1.0: no page read twice)", lambda v: 1 <= v < float("inf"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tierlab", description="Analyze tierlab runs.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("analyze", help="write tables/ of a results directory from its raw traces")
    p.add_argument("run_dir")
    p.add_argument("--tolerate-errors", action="store_true",
                   help="skip (and count) unparseable trace lines instead of stopping at the first")
    p.add_argument("--stream-window", type=STREAM_WINDOW_ARG, default=STREAM_WINDOW,
                   help=f"recent requests per device a sequential read may continue (default {STREAM_WINDOW})")
    p.add_argument("--random-threshold", type=RANDOM_THRESHOLD_ARG, default=RANDOM_PCT_THRESHOLD,
                   help=f"a query is random above this %% of random read pages (default {RANDOM_PCT_THRESHOLD:g})")
    p.add_argument("--repeat-threshold", type=REPEAT_THRESHOLD_ARG, default=REPEAT_THRESHOLD,
                   help=f"a query is repeated above this repeat access rate (default {REPEAT_THRESHOLD:g})")
    p.set_defaults(func=_analyze)
    p = sub.add_parser("compare", help="put analyzed runs side by side (e.g. the layouts of the same queries)")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    p.add_argument("--out", help="directory for report.html, summary.md and compare.csv")
    p.set_defaults(func=_compare)
    p = sub.add_parser("study", help="run a study: one workload over a matrix of variables, a run per point, "
                                    "resumable; then compare the runs")
    p.add_argument("file", nargs="?", help="the study file (YAML; README: Studies of many runs)")
    p.add_argument("--resume", metavar="STUDY_DIR", help="run the points of results/<study_id> that have no ok run yet")
    p.add_argument("--results-dir", default="results", help="where the study's directory is made (default: results)")
    p.add_argument("--extra-vars", default="{}", metavar="JSON",
                   help="host variables for every run, as ansible-playbook -e takes them (e.g. tierlab_root)")
    p.add_argument("-i", "--inventory", metavar="INVENTORY",
                   help="the hosts to run on (default: ansible.cfg's, this host); with several, the points are "
                        "spread over them, one at a time on each")
    p.set_defaults(func=_study)

    p = sub.add_parser("advise", help="what a study says of the page size, buffer pool, compression and threads "
                                     "it varies: the best value, the knee, the cost, where scaling stops; with evidence")
    p.add_argument("study_dir", metavar="STUDY_DIR")
    p.add_argument("--out", metavar="DIR", help="where advice.csv, summary.md and report.html go (default: "
                                                "STUDY_DIR/advice)")
    p.set_defaults(func=_advise)

    p = sub.add_parser("validate", help="a study's layouts, or caches, as measured against what recommend predicts "
                                       "for them from each of its runs: Spearman's rank correlation and the regret "
                                       "(beside repeat_spearman, the measured ranking's own reproducibility); the "
                                       "cache's time and hit share")
    p.add_argument("study_dir", metavar="STUDY_DIR")
    p.add_argument("--profiles", help="device profiles of the tiers, fast=P,capacity=P (default: the runs' own)")
    p.set_defaults(func=_validate)

    p = sub.add_parser("recommend", help="the best layout for a fast-tier capacity, the capacity curve, and the fast "
                                         "tier as a block cache instead, predicted from traced runs")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="analyzed runs of one engine and workload")
    p.add_argument("--fast-capacity", required=True, metavar="SIZE", help="the fast tier's capacity, e.g. 2G or 512M")
    p.add_argument("--profiles", metavar="fast=P,capacity=P",
                   help="device profiles (names or .toml files) to predict with; default: the traced tiers' models")
    p.add_argument("--weights", metavar="q03=2,q10=1", help="the queries to optimise for and their weights "
                                                              "(default: every traced query, weight 1)")
    p.add_argument("--from-layout", metavar="LAYOUT", help="the layout to migrate from (default: the traced run's)")
    p.add_argument("--out", metavar="DIR", help="also write recommend.json and the layouts and curves as CSV here")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_recommend)
    p = sub.add_parser("trace-stats", help="access-pattern statistics of any block trace (no run directory needed)")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="a blkparse-style prefix, a per-CPU or merged binary file, blkparse text, or ftrace text")
    p.add_argument("--format", choices=FORMATS, default="auto")
    p.add_argument("--page-size", type=PAGE_SIZE, default=16384, help="page size in bytes; pages are device-aligned")
    p.add_argument("--json", action="store_true")
    p.add_argument("--tolerate-errors", action="store_true",
                   help="keep the good part of truncated or corrupt input, with the problems counted")
    p.set_defaults(func=_trace_stats)
    p = sub.add_parser("planner-costs", help="PostgreSQL's seq_page_cost, random_page_cost and "
                                             "effective_io_concurrency per tablespace, from the tiers' device models")
    p.add_argument("--profiles", metavar="fast=P,capacity=P", default="fast=optane,capacity=nand",
                   help="device profiles (names or .toml files); default: fast=optane,capacity=nand")
    p.add_argument("--page-size", type=PAGE_SIZE, default=8192, help="the block size in bytes (default 8192)")
    p.add_argument("--scan-request-size", type=REQUEST_SIZE_ARG, default=SCAN_REQUEST_BYTES,
                   help="the requests a sequential scan becomes, in bytes: the device's read-ahead (default "
                        f"{SCAN_REQUEST_BYTES}); a run's request sizes show it")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_planner_costs)
    p = sub.add_parser("devices", help="fit a device profile to each tier of playbooks/devices.yml's measurements, "
                                       "with the curves and a report")
    p.add_argument("run_dir", metavar="DEVICES_DIR", help="results/devices_<time>_<host>, with raw/devices.json")
    p.set_defaults(func=_devices)
    p = sub.add_parser("manifest", help="(re)write a run's manifest.json")
    p.add_argument("run_dir")
    p.add_argument("--status", choices=("auto", *manifest.STATUSES), default="auto",
                   help="auto: ok when every query try has a row, else partial")
    p.add_argument("--error", default="")
    p.add_argument("--phases", default="", help="JSON {phase: finish time}, with 'started' first")
    p.set_defaults(func=_manifest)
    p = sub.add_parser("tiers", help="the host's tiers")
    tiers_sub = p.add_subparsers(dest="tiers_command", required=True)
    p = tiers_sub.add_parser("check", help="run fio on each tier of this host (read-only): IOPS and latency percentiles "
                                           "against the device models' targets, and the tiers' fidelity")
    p.add_argument("--root", default="/var/lib/tierlab", help="the tierlab root the tiers were brought up under")
    p.add_argument("--runtime-s", type=float, default=2.0,
                   help="seconds per fio job (13 per tier: 8 on the device, 5 through the file system)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_tiers_check)
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except TierlabError as exc:
        sys.exit(f"tierlab {args.command}: {exc}")


def entry() -> None:
    """The `tierlab` command: main, then out at once. Python's teardown of numba's and pandas' modules takes
    half a second here, as long as a small command's work (a tenth of trace-stats' on 10^7 requests); by
    then every file is closed and every thread and child process has ended."""
    main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
