"""A study's setup line on the findings page: what its runs had and when they ran (studies/findings.py)."""

from itertools import groupby

import pandas as pd

from ..catalog.variables import BY_NAME

# the study variables that set how much runs at once: above the host's CPUs they share them
CONCURRENCY_VARIABLES = ("subqueries", "parallel_workers", "threads")


def _point_ranges(numbers: list[int]) -> str:
    """Point numbers as ranges: points 1-28, 31; point 6."""
    ranges = [[number for _, number in run] for _, run in groupby(enumerate(sorted(numbers)), lambda p: p[1] - p[0])]
    return ("point " if len(numbers) == 1 else "points ") + ", ".join(
        f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in ranges)


def _megabytes(values: pd.Series) -> str:
    sizes = sorted({f"{value / 2**20:.0f}" for value in values.dropna()}, key=float)
    return f"{sizes[0]} MiB" if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]} MiB" if sizes else "unknown"


def _values(study: dict, name: str, default) -> list:
    """A variable's values in a study: its matrix's, or the one its file (or else default) gives every point."""
    return study["matrix"].get(name, [study["variables"].get(name, default)])


def _data_scale(runs: pd.DataFrame, study: dict) -> str:
    """How much data the workload made: TPC-H's and SSB's scale factor, sysbench's tables and their rows."""
    scale_factors = sorted(set(runs["scale_factor"].dropna().astype(str)))
    if scale_factors:
        return f"at scale factor {' / '.join(scale_factors)}"
    tables, rows = (" / ".join(map(str, _values(study, name, BY_NAME[name].default))) for name in ("tables", "table_size"))
    return f"with {tables} tables of {rows} rows"


def setup_line(tables: dict) -> str:
    """What the study's runs had: workload and scale factor, engines with their versions, buffer pool, tiers'
    dilation and fidelity, host (and what ran more at once than its CPUs), repetitions, points ok, when."""
    summary, study = tables["study"], tables["study"]["study"]
    runs = tables["runs"][tables["runs"]["run_id"].notna() & tables["runs"]["engine"].notna()] \
        if "engine" in tables["runs"] else tables["runs"].iloc[0:0]
    if runs.empty:
        return f"{study['workload']}; no run opened; {summary['ok']} of {summary['points']} points ok"
    # a run that failed before its engine started recorded no version
    engines = ", ".join(f"{name} {' / '.join(sorted(set(rows['engine_version'].dropna().astype(str))))}"
                        for name, rows in runs.groupby("engine", sort=False))
    buffer_pools = list(dict.fromkeys(runs.sort_values("buffer_pool_bytes")["buffer_pool"].astype(str)))
    fidelity = ", ".join(f"{verdict} in {count}" for verdict, count in runs["fidelity"].value_counts().items())
    dilations = sorted(set(runs["dilation"].dropna()))
    host = runs.iloc[0]
    carried = summary.get("carried", [])
    own = sorted(set(runs["point"]) - {point for part in carried for point in part["points"]})
    crowded = [f"{name} {', '.join(map(str, above))}" for name in CONCURRENCY_VARIABLES
               if (above := [value for value in _values(study, name, 0) if int(value) > host["cpus"]])]
    return (f"{study['workload']} {_data_scale(runs, study)}; "
            f"{engines}; buffer pool {' / '.join(buffer_pools)} ({_megabytes(runs['buffer_pool_bytes'])}), data "
            f"{_megabytes(runs['data_bytes'])}; tiers dilated "
            f"{' / '.join(f'{d:g}' for d in dilations) or 'not at all'}x, fidelity {fidelity or 'not checked'}; "
            f"host {host['host']}: {host['cpus']:.0f} CPUs, {host['memory_bytes'] / 2**30:.0f} GiB, {_kernels(runs)}"
            + (f"; {' and '.join(crowded)}: more at once than the host's {host['cpus']:.0f} CPUs, so those points "
               "measure CPU contention as well as the devices" if crowded else "")
            + f"; {study['repetitions']} repetition(s); {summary['ok']} of {summary['points']} points ok; "
            + (f"{_point_ranges(own)} in " if carried else "") + f"study {summary['study_id']} "
            + _span(summary, [f"point(s) {', '.join(map(str, summary['again']))} run again, their earlier runs "
                              "superseded"] if summary.get("again") else [])
            + "".join(f"; {_point_ranges(part['points'])} published from study {part['study_id']} "
                      + _span(part, []) for part in carried))


def _kernels(runs: pd.DataFrame) -> str:
    """The kernel the runs ran on; where points ran on hosts of different builds (a study spread over sessions),
    each build with its points."""
    builds = runs.groupby("kernel", sort=False)["point"]
    if builds.ngroups == 1:
        return f"kernel {runs.iloc[0]['kernel']}"
    return "kernels " + ", ".join(f"{kernel} ({_point_ranges(list(points))})" for kernel, points in builds)


def _span(part: dict, notes: list[str]) -> str:
    """When a study ran: (start to end; its runs took N min; notes); one that ran only some of its points
    (tierlab study --points) has not ended."""
    when = f"{part['started_at']} to {part['ended_at']}" if part["ended_at"] else f"from {part['started_at']}, not ended"
    # a summary committed before summaries carried run_s has none
    took = [f"its runs took {part['run_s'] / 60:.0f} min"] if part.get("run_s") else []
    return "(" + "; ".join([when, *took, *notes]) + ")"
