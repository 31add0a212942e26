"""`tierlab advise`: what a study of many runs says about the settings a DBA chooses, each statement with
its evidence (the runs it rests on, and the spread of its figure over repetitions).

For each setting the study's matrix varies (page_size, buffer_pool, compression, threads), within each
combination of the matrix's other variables (the layout among them: which tier the tables sit on), and
for each step (a sysbench test, or a query workload as a whole):

- each value's figure: a sysbench test's transactions per second (higher is better), or a query
  workload's time, the sum of its queries' elapsed seconds (lower is better); the median over the
  point's repetitions, with their spread ((max - min) / median);
- page_size, compression, threads: the best value, and each value against it;
- buffer_pool: the knee, the smallest buffer pool whose figure is within KNEE_SHARE of the best one's;
- compression: each mode's cost (or gain) against none, and the bytes of the data it stored;
- threads: where scaling stops, the first count that no larger count measured beats by SCALING_SHARE (a plateau
  that more threads climb out of is not where scaling stops);
- and any run variable outside the matrix whose value differs between the setting's values (a compression
  that sets the flush method, say), so that a statement never credits the setting with what that did.

advise and statements are pure: the runs' figures come in as a frame (runs.results.run_figures), which
advise_study reads from a study's ok runs.
"""

from pathlib import Path

import numpy as np
import pandas as pd

from ..catalog.engines import COMPRESSIONS, PAGE_SIZES
from ..catalog.variables import RUN_VARIABLES
from ..errors import InputError
from ..runs.results import run_figures

SETTINGS = ("page_size", "buffer_pool", "compression", "threads")
# a buffer pool whose figure is within this share of the best is big enough
KNEE_SHARE = 0.10
# more threads that add less than this share of throughput, however many more, no longer scale
SCALING_SHARE = 0.10
ADVICE_COLUMNS = ["setting", "context", "step", "value", "figure", "unit", "spread_pct", "repetitions",
                  "against_best_pct", "data_bytes", "buffer_pool_bytes", "verdict", "runs", "also_differs"]


def _order(setting: str, per_value: pd.DataFrame) -> pd.Series:
    """How a setting's values sort: page and buffer pool by bytes, threads by count, compression none first."""
    if setting == "page_size":
        return per_value["value"].map(PAGE_SIZES)
    if setting == "buffer_pool":
        return per_value["buffer_pool_bytes"]
    if setting == "threads":
        return per_value["value"].astype(int)
    return per_value["value"].map(COMPRESSIONS.index)


def _better(figure: pd.Series, higher: bool) -> int:
    """The position of the best figure."""
    return int(np.nanargmax(figure) if higher else np.nanargmin(figure))


def _against(figure: float, best: float, higher: bool) -> float:
    """How much worse than the best a figure is, in percent of the best (0 for the best)."""
    return 100.0 * ((best - figure) if higher else (figure - best)) / best


def _verdicts(setting: str, figure: np.ndarray, best: int, higher: bool) -> list[str]:
    """Each value's verdict, in the values' order: best, knee (buffer pool), stops scaling (threads)."""
    verdicts = [""] * len(figure)
    verdicts[best] = "best"
    if setting == "buffer_pool":
        within = [i for i in range(len(figure)) if _against(figure[i], figure[best], higher) <= 100 * KNEE_SHARE]
        verdicts[within[0]] = "knee" if within[0] != best else "best, knee"
    if setting == "threads":
        for i in range(len(figure) - 1):
            if np.nanmax(figure[i + 1:]) < figure[i] * (1 + SCALING_SHARE):
                verdicts[i] = ", ".join(v for v in (verdicts[i], "stops scaling") if v)
                break
    return verdicts


def _also_differs(group: pd.DataFrame, setting: str, matrix: list[str]) -> str:
    """The run variables outside the matrix whose values differ between the setting's values, each with
    its value per setting value: 'flush_method (none: O_DIRECT, zstd: fsync)'."""
    per_value = group.groupby(setting, sort=False)["run_settings"].first()
    names = [name for name in RUN_VARIABLES if name not in matrix
             and len({str(settings.get(name)) for settings in per_value}) > 1]
    return "; ".join(f"{name} ({', '.join(f'{value}: {settings.get(name)}' for value, settings in per_value.items())})"
                     for name in names)


def advise(study: dict, figures: pd.DataFrame) -> pd.DataFrame:
    """One row per setting the study varies, combination of its other matrix variables (context), step and
    value of the setting. figures: a row per ok run and step with the run's matrix variables, `run`,
    `step`, `figure`, `unit`, `higher_is_better`, `data_bytes`, `buffer_pool_bytes` and `run_settings`
    (the run's validated variables)."""
    matrix = list(study["matrix"])
    rows = []
    for setting in (s for s in SETTINGS if s in matrix):
        others = [v for v in matrix if v != setting]
        for key, group in figures.groupby([*others, "step"] if others else ["step"], sort=False):
            key = key if isinstance(key, tuple) else (key,)
            context = " ".join(f"{k}={v}" for k, v in zip(others, key[:-1], strict=True)) or "all runs"
            higher = bool(group["higher_is_better"].iloc[0])
            per_value = group.groupby(setting, sort=False).agg(
                figure=("figure", "median"), low=("figure", "min"), high=("figure", "max"),
                repetitions=("figure", "size"), data_bytes=("data_bytes", "median"),
                buffer_pool_bytes=("buffer_pool_bytes", "first"), runs=("run", lambda r: " ".join(sorted(r))))
            per_value = per_value.reset_index().rename(columns={setting: "value"})
            per_value = per_value.iloc[np.argsort(_order(setting, per_value).to_numpy(), kind="stable")]
            figure = per_value["figure"].to_numpy(dtype=float)
            if np.isnan(figure).all():
                continue
            best_at = _better(figure, higher)
            best = figure[best_at]
            verdicts = _verdicts(setting, figure, best_at, higher)
            also = _also_differs(group, setting, matrix)
            for row, verdict in zip(per_value.itertuples(index=False), verdicts, strict=True):
                rows.append({"setting": setting, "context": context, "step": key[-1], "value": row.value,
                             "figure": row.figure, "unit": group["unit"].iloc[0],
                             "spread_pct": 100.0 * (row.high - row.low) / row.figure if row.figure else np.nan,
                             "repetitions": row.repetitions, "against_best_pct": _against(row.figure, best, higher),
                             "data_bytes": row.data_bytes, "buffer_pool_bytes": row.buffer_pool_bytes,
                             "verdict": verdict, "runs": row.runs, "also_differs": also})
    return pd.DataFrame(rows, columns=ADVICE_COLUMNS)


def _figure(value: float, unit: str) -> str:
    return f"{value:.1f} s" if unit == "s" else f"{value:.0f} {unit}"


def _value(row) -> str:
    """A value as a statement names it: a buffer pool with the bytes it came to (a percentage of the data, or
    raised to the engine's least)."""
    if row.setting == "buffer_pool":
        return f"{row.value} ({row.buffer_pool_bytes / 2**20:.0f} MiB)"
    return str(row.value)


def statements(advice: pd.DataFrame) -> list[str]:
    """The advice in sentences, each naming its figures and its evidence runs."""
    lines = []
    for (setting, context, step), group in advice.groupby(["setting", "context", "step"], sort=False):
        best = next(r for r in group.itertuples() if "best" in r.verdict)
        where = f"{setting} for {step} ({context})"
        spread = (f", spread {best.spread_pct:.0f}% over {best.repetitions} repetitions"
                  if best.repetitions > 1 else ", one repetition")
        text = f"{where}: {_value(best)} is best, {_figure(best.figure, best.unit)}{spread}"
        others = [f"{_value(r)} {f'{r.against_best_pct:.0f}% worse' if r.against_best_pct >= 0.5 else 'as good'}"
                  for r in group.itertuples() if r.value != best.value]
        if others:
            text += f"; {', '.join(others)}"
        knee = [r for r in group.itertuples() if "knee" in r.verdict]
        if knee:
            text += f". The knee: {_value(knee[0])}, the smallest buffer pool within {KNEE_SHARE:.0%} of the best"
        stops = [r for r in group.itertuples() if "stops scaling" in r.verdict]
        if setting == "threads" and len(group) == 1:
            text += ". One count measured: nothing to say of scaling yet"
        elif setting == "threads":
            text += (f". Throughput stops scaling at {stops[0].value} thread{'s' if stops[0].value != '1' else ''} "
                     f"(no larger count measured adds {SCALING_SHARE:.0%})" if stops
                     else ". Throughput still scales at the largest count measured")
        if setting == "compression":
            sizes = ", ".join(f"{r.value} {r.data_bytes / 2**20:.1f} MiB" for r in group.itertuples()
                              if pd.notna(r.data_bytes))
            text += f". Data stored: {sizes}" if sizes else ""
        if best.also_differs:
            text += (f". The runs differ also in {best.also_differs}, so the difference is not the {setting}'s "
                     "alone")
        text += f". Evidence: {'; '.join(f'{r.value}: {r.runs}' for r in group.itertuples())}."
        lines.append(text)
    return lines


def advise_study(study_dir: Path, record: dict) -> tuple[pd.DataFrame, list[str]]:
    """advise's table for a study (its record: study.json), and its statements, the points without an ok run
    named last."""
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
    lines = statements(advice)
    missing = len(record["points"]) - len(ok)
    if missing:
        lines.append(f"{missing} of {len(record['points'])} points have no ok run and are left out "
                     f"(study.json says why); resume the study to measure them")
    return advice, lines
