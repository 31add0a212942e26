"""Predictions from the costs of traced queries (devices.cost_model): each layout's time, the capacity curve, the
fast tier as a block cache instead, and how well predictions rank measured layouts.

Pure functions; placement.traced reads the runs they start from.
"""

from dataclasses import dataclass
from itertools import product

import numpy as np
import pandas as pd

from ..catalog.layout import CAPACITY, FAST, layout_name
from ..catalog.workloads import Workload
from ..errors import InputError

# more tables than this make 2^n layouts too many to enumerate
MAX_TABLES = 16


@dataclass
class TracedQuery:
    """One traced query try and the model's I/O time of its requests under every split of the tables it
    reads between the tiers (cost_model.layout_costs). emulated_dilation: the dilation of the emulated tiers it
    was traced on when the costs are on their own models (traced.emulated_dilation), else None."""
    run_id: str
    query: str
    weight: float
    elapsed_s: float
    io_s: float
    traced: dict[str, str]
    costs_us: dict[frozenset, float]
    emulated_dilation: float | None

    def io_us(self, placement: dict[str, str]) -> float:
        read = max(self.costs_us, key=len)
        return self.costs_us[frozenset(t for t in read if placement[t] == FAST)]

    @property
    def host_s(self) -> float:
        """The I/O time beyond what the emulated tiers' own models made of it: the emulating host's own, as
        replies that left late on a busy host, the same wherever the tables lie (with the other core busy,
        TPC-H SF 0.01 q03's was 0.44-0.79 s of its 1.2-4.1 s of I/O under each of None, C+O and ALL). 0 where the
        costs are not the traced devices' own (real devices, or other profiles): there the model's error is the
        device's, and scales with it."""
        if self.emulated_dilation is None:
            return 0.0
        return max(0.0, self.io_s - self.emulated_dilation * self.io_us(self.traced) / 1e6)

    def predict_s(self, io_us: float) -> float:
        """The non-I/O time and the host's own I/O time as traced, plus the rest of the I/O time scaled by the
        model's: io_us over the traced layout's."""
        base = self.io_us(self.traced)
        modelled_s = self.io_s - self.host_s
        return self.elapsed_s if base == 0 else self.elapsed_s - modelled_s + modelled_s * io_us / base


def all_layouts(table_bytes: dict[str, int]) -> pd.DataFrame:
    """Every placement of the tables: one row per layout, a boolean column per table (True: fast) and its
    fast-tier bytes."""
    tables = sorted(table_bytes)
    if len(tables) > MAX_TABLES:
        raise InputError(f"{len(tables)} tables make {2 ** len(tables)} layouts; at most {MAX_TABLES} tables")
    fast = pd.DataFrame(list(product([False, True], repeat=len(tables))), columns=tables)
    fast["fast_bytes"] = fast[tables].to_numpy() @ np.array([table_bytes[t] for t in tables], dtype=np.int64)
    return fast


def predict_layouts(queries: list[TracedQuery], layouts: pd.DataFrame, workload: Workload) -> pd.DataFrame:
    """Each layout's predicted, weighted workload time."""
    tables = [c for c in layouts.columns if c != "fast_bytes"]
    placements = [{t: FAST if row[t] else CAPACITY for t in tables} for row in layouts[tables].to_dict("records")]
    return pd.DataFrame({
        "layout": [layout_name(p, workload) for p in placements],
        "fast_bytes": layouts["fast_bytes"],
        "predicted_s": [sum(q.weight * q.predict_s(q.io_us(p)) for q in queries) for p in placements]})


def _spearman(x: list[float], y: list[float]) -> float:
    """Spearman's rank correlation: the correlation of the two lists' ranks, ties averaged."""
    ranks = pd.DataFrame({"x": x, "y": y}).rank()
    return float(ranks["x"].corr(ranks["y"]))


def validation(predicted: dict[str, float], measured: dict[str, float]) -> dict:
    """How layouts' predicted times rank against their measured ones: Spearman's rank correlation over the
    measured layouts (the correlation of their ranks, ties averaged), the layout predicted fastest and the one
    measured fastest, and the regret: how much longer the predicted fastest ran than the measured fastest, %."""
    layouts = sorted(measured)
    chosen, best = min(layouts, key=predicted.__getitem__), min(layouts, key=measured.__getitem__)
    return {"layouts": len(layouts),
            "spearman": _spearman([predicted[layout] for layout in layouts], [measured[layout] for layout in layouts])
            if len(layouts) > 1 else float("nan"),
            "predicted_fastest": chosen, "measured_fastest": best,
            "regret_pct": 100.0 * (measured[chosen] / measured[best] - 1.0)}


def repeat_spearman(runs: dict[str, list[float]]) -> float:
    """How reproducible the measured ranking of the layouts is, a guide to the noise a prediction's Spearman
    is measured against: each repetition's times (the k-th run of every layout) ranked against the median of
    the other runs of each layout, the median of those Spearmans (a repetition whose times are all equal has
    none). NaN unless at least two layouts ran at least twice each."""
    repetitions = min(len(times) for times in runs.values())
    if repetitions < 2 or len(runs) < 2:
        return float("nan")
    layouts = sorted(runs)
    correlations = [_spearman([runs[layout][k] for layout in layouts],
                              [float(np.median(runs[layout][:k] + runs[layout][k + 1:])) for layout in layouts])
                    for k in range(repetitions)]
    correlations = [c for c in correlations if not np.isnan(c)]
    return float(np.median(correlations)) if correlations else float("nan")


def layout_errors(runs: dict[str, list[float]], predictions: list[dict[str, float]]) -> pd.DataFrame:
    """Each layout's measured times (their median and range over its runs) beside its predicted ones (their
    median and range over the traced runs predicted from), and the error of the predicted median against the
    measured one, %; fastest measured first. Where the model ranks layouts wrongly, this shows whether it
    misjudged them or their runs' spread exceeds what tells them apart."""
    rows = []
    for layout, times in runs.items():
        predicted = [prediction[layout] for prediction in predictions]
        measured_s, predicted_s = float(np.median(times)), float(np.median(predicted))
        rows.append({"layout": layout, "runs": len(times), "measured_s": measured_s, "measured_min_s": min(times),
                     "measured_max_s": max(times), "predicted_s": predicted_s, "predicted_min_s": min(predicted),
                     "predicted_max_s": max(predicted), "error_pct": 100.0 * (predicted_s / measured_s - 1.0)})
    return pd.DataFrame(rows).sort_values("measured_s", kind="stable", ignore_index=True)


def capacity_curve(predicted: pd.DataFrame) -> pd.DataFrame:
    """The best layout as the fast tier grows: a row at every capacity where the best layout changes (the
    layout with the least predicted time among those that fit; the smaller one on a tie)."""
    ordered = predicted.sort_values(["fast_bytes", "predicted_s"], kind="stable")
    rows, best = [], float("inf")
    for row in ordered.itertuples(index=False):
        if row.predicted_s < best - 1e-9:
            best = row.predicted_s
            rows.append({"capacity_bytes": int(row.fast_bytes), "layout": row.layout, "predicted_s": row.predicted_s})
    return pd.DataFrame(rows, columns=["capacity_bytes", "layout", "predicted_s"])


def best_at(curve: pd.DataFrame, capacity_bytes: int) -> dict:
    """The curve's best layout that fits in the capacity."""
    fits = curve[curve["capacity_bytes"] <= capacity_bytes]
    return fits.iloc[-1].to_dict()


def cache_curve(queries: list[TracedQuery], caches: list[pd.DataFrame], curve: pd.DataFrame) -> pd.DataFrame:
    """At each capacity the cache was simulated for (cost_model.cache_costs of each query, in the same order):
    the workload's predicted time and hit share with the fast tier as a cache of each policy, the best
    placement's time there, and the verdict: `cache` where the admitting cache (what dm-cache and bcache do)
    is faster than the best placement, else `placement`; the ideal LRU (every page admitted) beside it."""
    costs = pd.concat([cache.assign(position=i) for i, cache in enumerate(caches)])
    rows = []
    for capacity, at in costs.groupby("capacity_bytes", sort=True):
        if at["position"].nunique() < len(queries):
            continue
        placed = best_at(curve, capacity)
        row = {"capacity_bytes": capacity, "placement_layout": placed["layout"],
               "placement_predicted_s": placed["predicted_s"]}
        for policy, mine in at.groupby("policy", sort=False):
            row[f"{policy}_predicted_s"] = sum(queries[r.position].weight * queries[r.position].predict_s(r.io_us)
                                               for r in mine.itertuples(index=False))
            requests = mine["requests"].sum()
            row[f"{policy}_hit_pct"] = 100.0 * mine["hits"].sum() / requests if requests else float("nan")
        row["verdict"] = "cache" if row["admitting_predicted_s"] < placed["predicted_s"] else "placement"
        rows.append(row)
    return pd.DataFrame(rows)

