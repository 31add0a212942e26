"""One catalog: every engine, workload and run variable declared once, and everything that must agree with it
(the playbooks' defaults and argument specs, the query files, the host agent, the variables' reference) checked
against it."""

import re
from pathlib import Path

import pytest
import yaml

from tierlab.catalog.engines import ENGINES, PAGE_SIZES
from tierlab.catalog.reference import markdown
from tierlab.catalog.values import Context, figure
from tierlab.catalog.variables import BY_NAME, VARIABLES, Choice, group
from tierlab.catalog.workloads import WORKLOAD_DIR, WORKLOADS, playbook
from tierlab.errors import InputError
from tierlab.runs.settings import validate
from tierlab_host.engines import ENGINES as HOST_ENGINES

ROOT = Path(__file__).resolve().parents[2]
ROLES = ROOT / "playbooks" / "roles"


# each engine's own default page (Debian's PostgreSQL is built with 8 KiB blocks)
DEFAULT_PAGE_SIZES = {"mariadb": "16k", "mysql": "16k", "postgresql": "8k"}


def _yaml(path: Path):
    return yaml.safe_load(path.read_text())


@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.parametrize("engine", ENGINES)
def test_every_variable_left_unset_makes_settings_for_every_engine_and_workload(engine, workload):
    settings = validate({"engine": engine, "workload": workload})
    assert (settings["engine"], settings["workload"], settings["layout"]) == (engine, workload, "None")
    assert settings["page_size"] == DEFAULT_PAGE_SIZES[engine]


def test_left_unset_a_run_is_a_cold_traced_tpch_at_scale_0_1_on_mariadb_all_on_the_capacity_tier():
    settings = validate({})
    assert {name: settings[name] for name in ("engine", "workload", "scale_factor", "layout", "page_size",
                                               "buffer_pool", "cold", "trace", "trace_backend", "tries",
                                               "query_timeout_s", "compression", "fast_cache", "corun")} == {
        "engine": "mariadb", "workload": "tpch", "scale_factor": 0.1, "layout": "None", "page_size": "16k",
        "buffer_pool": {"percent": 5.0}, "cold": True, "trace": True, "trace_backend": "auto", "tries": 1,
        "query_timeout_s": 1800, "compression": "none", "fast_cache": "none", "corun": "none"}
    assert settings["queries"] == [f"q{n:02d}" for n in range(1, 23)]
    assert set(settings["placement"].values()) == {"capacity"}


def test_each_variable_s_default_is_a_value_it_allows_for_each_engine():
    parsed = {}
    for variable in VARIABLES:
        for engine in ENGINES.values():
            # layouts, query lists and co-runners are read against a workload: validate() checks those above
            if variable.kind.__class__.__name__ not in ("Layout", "Queries", "Corun"):
                context = Context(engine, WORKLOADS["tpch"])
                parsed[variable.name, engine.name] = variable.kind.parse(variable.name, variable.default_for(engine),
                                                                         context)
    assert {engine: parsed["page_size", engine] for engine in ENGINES} == DEFAULT_PAGE_SIZES


def test_the_playbooks_hold_no_default_of_a_run_variable():
    group_vars = _yaml(ROOT / "playbooks" / "group_vars" / "all.yml")
    assert sorted(set(group_vars) & set(BY_NAME)) == ["results_dir"]
    for defaults in ROLES.glob("*/defaults/main.yml"):
        named = set(_yaml(defaults) or {}) & set(BY_NAME)
        assert named <= set(group("tiers")), defaults


def test_the_tiers_role_s_defaults_are_the_catalog_s():
    defaults = _yaml(ROLES / "tiers" / "defaults" / "main.yml")
    assert {name: str(defaults[name]) for name in group("tiers")} == {name: BY_NAME[name].default for name in group("tiers")}


# the role options that carry a run variable under a name of their own, with the values the catalog allows
ROLE_CHOICES = {"run_workload": [*WORKLOADS, WORKLOAD_DIR], "mysql_innodb_page_size": list(PAGE_SIZES),
                "mysql_innodb_flush_method": list(BY_NAME["flush_method"].kind.values)}


def test_the_roles_argument_specs_allow_what_the_catalog_allows():
    checked = []
    for specs in ROLES.glob("*/meta/argument_specs.yml"):
        for entry in _yaml(specs)["argument_specs"].values():
            for name, option in (entry.get("options") or {}).items():
                if name in BY_NAME and isinstance(BY_NAME[name].kind, Choice):
                    assert tuple(option["choices"]) == BY_NAME[name].kind.values, (specs, name)
                    checked.append(name)
                if name in ROLE_CHOICES:
                    assert option["choices"] == ROLE_CHOICES[name], (specs, name)
                    checked.append(name)
    assert sorted(checked) == ["mysql_innodb_flush_method", "mysql_innodb_page_size", "run_workload",
                               "tiers_emulation", "tiers_filesystem"]


def test_every_workload_has_its_playbook_and_every_query_its_sql_in_every_dialect():
    assert _yaml(ROOT / playbook(WORKLOAD_DIR))[0]["vars"]["run_workload"] == WORKLOAD_DIR
    for workload in WORKLOADS.values():
        assert _yaml(ROOT / workload.playbook)[0]["vars"]["run_workload"] == workload.name
        if workload.kind == "timed":
            continue
        for query in workload.queries:
            for dialect in {engine.dialect for engine in ENGINES.values()}:
                assert any((ROOT / path).is_file() for path in workload.query_files(query, dialect)), (query, dialect)


def test_the_same_sql_is_written_once():
    texts = {}
    for path in (ROOT / "queries").rglob("*.sql"):
        texts.setdefault(path.read_text(), []).append(str(path.relative_to(ROOT)))
    assert [paths for paths in texts.values() if len(paths) > 1] == []


def test_every_engine_has_its_role_schemas_and_host_agent_module():
    for engine in ENGINES.values():
        assert (ROLES / engine.family / "tasks" / "main.yml").is_file()
        assert HOST_ENGINES[engine.name].__module__ == f"tierlab_host.engines.{engine.family.replace('mysql', 'mysql_family')}"
        for workload in WORKLOADS.values():
            if workload.kind == "queries":
                assert (ROOT / "schemas" / workload.name / f"{engine.dialect}.sql").is_file()


def test_a_variable_given_for_an_engine_it_does_not_apply_to_is_refused_naming_those_it_applies_to():
    with pytest.raises(InputError) as err:
        validate({"engine": "postgresql", "io_threads": "8"})
    assert str(err.value) == ("io_threads='8' means nothing for engine=postgresql; it applies to engine mariadb and "
                              "mysql only. Leave it unset for postgresql")


def test_the_variables_reference_is_current():
    assert (ROOT / "docs" / "variables.md").read_text() == markdown(), \
        "docs/variables.md is not the catalog's: write it with `.venv/bin/tierlab variables > docs/variables.md`"


# Jinja expressions in role files: inside {{ }} and {% %}, and the bare ones of conditions
_TEMPLATED = re.compile(r"\{\{(.*?)\}\}|\{%(.*?)%\}", re.S)
_CONDITION = re.compile(r"^\s*-?\s*(?:when|that|failed_when|changed_when|until):\s*([^\n]+)$", re.M)


def test_no_role_reads_another_role_s_variables_but_the_one_fact_it_publishes():
    roles = sorted(path.name for path in ROLES.iterdir())
    read = []
    for role in roles:
        for path in (ROLES / role).rglob("*"):
            if path.suffix not in (".yml", ".j2"):
                continue
            text = path.read_text()
            for match in [*_TEMPLATED.finditer(text), *_CONDITION.finditer(text)]:
                expression = next(part for part in match.groups() if part)
                for name in re.findall(r"(?<![\w.'\"])([a-z]+(?:_[a-z]+)+)\b", expression):
                    owner = max((r for r in roles if name.startswith(r + "_")), key=len, default=None)
                    if owner not in (None, role) and name != f"{owner}_result":
                        read.append(f"{path.relative_to(ROLES)} reads {name}")
    assert read == []


@pytest.mark.parametrize(("value", "text"), [(0.115, "0.115"), (53.44, "53.4"), (930.4, "930"), (999.7, "1000"),
                                             (1004.2, "1004"), (3316.9, "3317"), (-1500.0, "-1500")])
def test_a_figure_is_written_with_three_significant_digits_and_whole_from_1000(value, text):
    assert figure(value) == text
