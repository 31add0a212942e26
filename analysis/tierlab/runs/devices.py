"""A device suite's results directory (playbooks/devices.yml, results/devices_<time>_<host>/): its measurements
(raw/devices.json) fitted into a profile per tier (profiles/<tier>.toml) and its tables."""

import json
from pathlib import Path

import pandas as pd

from ..devices import fit
from ..devices.contract import rule_costs
from ..errors import RunDirError
from .results import write_tables


def read_suite(run_dir: Path) -> tuple[dict, dict[str, dict], dict[str, pd.DataFrame]]:
    """The suite's measurements, each tier's fitted parameters, and its tables: every job, the sustained writes
    over time, and what breaking each rule of the contract costs on each tier."""
    source = run_dir / "raw" / "devices.json"
    try:
        result = json.loads(source.read_text())
    except FileNotFoundError:
        raise RunDirError(f"{source} is missing: playbooks/devices.yml writes it (DEVICES_DIR is the directory it "
                          "made under results/)") from None
    except json.JSONDecodeError as exc:
        raise RunDirError(f"{source}: not JSON ({exc}); run playbooks/devices.yml again") from None
    try:
        fitted = {tier["name"]: fit.fit(tier) for tier in result["tiers"]}
        tables = {"device_jobs": fit.job_rows(result), "device_sustained": fit.sustained_rows(result),
                  "device_contract": rule_costs(result)}
    except (KeyError, ValueError, TypeError, ZeroDivisionError, StopIteration) as exc:
        # a file cut short or edited: every job of the suite is needed, and nothing is written without them
        raise RunDirError(f"{source} does not hold the device suite's measurements ({type(exc).__name__}: {exc}); "
                          "run playbooks/devices.yml again") from None
    return result, fitted, tables


def fit_suite(run_dir: Path) -> tuple[dict, dict[str, dict], list[Path]]:
    """The suite's measurements, each tier's fitted parameters, and the files written (profiles, then tables)."""
    result, fitted, tables = read_suite(run_dir)
    (run_dir / "profiles").mkdir(exist_ok=True)
    written = []
    for tier in result["tiers"]:
        path = run_dir / "profiles" / f"{tier['name']}.toml"
        path.write_text(fit.profile_text(tier, fitted[tier["name"]], str(run_dir / "raw" / "devices.json")))
        written.append(path)
    return result, fitted, written + write_tables(run_dir, tables)
