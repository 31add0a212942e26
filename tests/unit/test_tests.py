"""The suite itself: every command a test runs is bounded in time, so that a hang fails the test that hung instead
of eating CI's whole time; and every study file a user is given parses and validates as `tierlab study` reads it."""

import ast
import re
from pathlib import Path

import pytest

from tierlab.studies.study import read_study

ROOT = Path(__file__).resolve().parents[2]
# calls that wait on another process, and those of subprocess's that do
WAITING = ("communicate", "wait")
SUBPROCESS = ("run", "check_output", "check_call", "call")


def _unbounded(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        name = node.func.attr
        of_subprocess = isinstance(node.func.value, ast.Name) and node.func.value.id == "subprocess"
        if (of_subprocess and name in SUBPROCESS) or name in WAITING:
            if not any(keyword.arg == "timeout" for keyword in node.keywords):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    return found


def test_every_subprocess_a_test_waits_for_has_a_timeout():
    assert [call for path in sorted((ROOT / "tests").rglob("*.py")) for call in _unbounded(path)] == []


@pytest.mark.parametrize("path", sorted((ROOT / "docs" / "studies").glob("*.yml")), ids=lambda path: path.name)
def test_every_study_file_parses_and_every_point_validates(path):
    study = read_study(path)
    assert study["name"] == path.stem


def _makefile_findings() -> tuple[list[str], dict[str, dict[str, str]]]:
    """make findings' studies (FINDINGS), and findings-quick's smaller variables for sysbench and the rest."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    names = next(line for line in text.splitlines() if line.startswith("FINDINGS ?=")).split("=", 1)[1].split()
    sysbench, other = (dict(pair.split("=", 1) for pair in sets.replace("--set ", "").split())
                       for sets in re.findall(r'smaller="(--set [^"]+)"', text))
    return names, {"sysbench": sysbench, "other": other}


def test_make_findings_names_every_experiment_s_study_file_and_the_quick_variant_of_each_validates():
    names, smaller = _makefile_findings()
    assert sorted(names) == sorted(path.stem for path in (ROOT / "docs" / "studies").glob("*.yml")
                                   if path.stem.startswith(("e1-", "e3-", "e4-", "e5-", "validate-q", "ssb-engines")))
    for name in names:
        path = ROOT / "docs" / "studies" / f"{name}.yml"
        workload = read_study(path)["workload"]
        quick = read_study(path, smaller["sysbench" if workload == "sysbench" else "other"], 1)
        assert quick["repetitions"] == 1
