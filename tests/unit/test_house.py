"""The house: tierlab's packages in layers (a lower layer never imports a higher one), files and functions of a
readable size, and docs/architecture.md naming what exists."""

import ast
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "analysis" / "tierlab"
# lowest first; the modules at the package's top (errors, checkout, files) are below every layer, the CLI above them all
LAYERS = ("catalog", "metrics", "traces", "devices", "runs", "placement", "studies", "report")
BOTTOM = ("errors", "checkout", "files")
TOP = ("cli", "__main__", "__init__")
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 100
# the files and functions allowed to be larger, each with its reason
LARGE_FILES: dict[str, str] = {}
LARGE_FUNCTIONS = {
    "analysis/tierlab/traces/ftrace.py:_scan": "one compiled pass (numba) over a chunk's bytes: a call per line "
                                               "to a helper would cost the scan its speed",
}


def _layer(module: str) -> int:
    """A module's layer by its dotted name under tierlab (catalog.layout -> 1)."""
    first = module.split(".")[0]
    if first in BOTTOM:
        return 0
    if first in TOP:
        return len(LAYERS) + 1
    return LAYERS.index(first) + 1


def _imports(path: Path) -> list[str]:
    """The tierlab modules a module imports, as dotted names under tierlab."""
    here = path.relative_to(PACKAGE).with_suffix("").parts
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = list(here[:len(here) - node.level])
            target = base + (node.module.split(".") if node.module else [])
            names = [target + [alias.name] for alias in node.names] if not node.module else [target]
            found += [".".join(name) for name in names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tierlab."):
            found.append(node.module.removeprefix("tierlab."))
    return found


def test_every_package_is_a_layer_of_the_house():
    packages = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    modules = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert packages == sorted(LAYERS)
    assert modules == sorted(BOTTOM + TOP)


def test_no_package_imports_a_higher_one():
    upward = []
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        for target in _imports(path):
            if _layer(target) > _layer(module):
                upward.append(f"{module} imports {target}")
    assert upward == []


def test_each_package_says_what_it_holds_and_what_it_may_import():
    for layer, name in enumerate(LAYERS, 1):
        doc = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text()))
        allowed = [*BOTTOM, *LAYERS[:layer - 1]]
        assert doc.splitlines()[-1] == "Imports: " + ", ".join(allowed) + ".", name


def _tracked(*patterns: str) -> list[Path]:
    listed = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120)
    return [ROOT / line for line in listed.stdout.split()]


def test_no_file_is_longer_than_600_lines_but_those_allowed_with_a_reason():
    long = {str(p.relative_to(ROOT)) for p in _tracked("*.py", "*.c", "*.h")
            if p.exists() and p.read_text().count("\n") > MAX_FILE_LINES}
    assert long == set(LARGE_FILES)


def test_no_function_is_longer_than_100_lines_but_those_allowed_with_a_reason():
    long = set()
    for path in _tracked("*.py"):
        if not path.exists():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and \
                    node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES:
                long.add(f"{path.relative_to(ROOT)}:{node.name}")
    assert long == set(LARGE_FUNCTIONS)


def test_the_architecture_names_only_packages_and_modules_that_exist():
    text = (ROOT / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`(tierlab/[a-z_/]+(?:\.py)?)`", text))
    assert named, "docs/architecture.md names no tierlab package"
    assert sorted(n for n in named if not (PACKAGE.parent / n).exists()) == []
    assert {f"tierlab/{name}" for name in LAYERS} <= {n.rstrip("/") for n in named}
