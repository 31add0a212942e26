"""The documents stand alone: no tracked file names a document or a path of the repository that is not in it,
nor the documents the project was specified in, which its users do not have."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP = ("docs", "playbooks", "emulator", "analysis", "tests", "benchmarks", "schemas", "queries", "tracing", "results",
       ".ci")
PATH = re.compile(rf"(?<![\w/.<>-])((?:{'|'.join(map(re.escape, TOP))})/[\w./+-]*[\w/])")
DOCUMENT = re.compile(r"(?<![\w/.-])([\w-]+\.md)\b")
# the documents the project was specified in, outside the repository
OUTSIDE = re.compile(r"\b(?:STUDY|DESIGN|FACTS)\.md\b|\bshared/")
# what may be named though it is not in the repository, and why
NOT_IN_THE_REPOSITORY = {
    "summary.md": "a report tierlab writes into a run's (or a study's) directory",
    "playbooks/inventory/real.yml": "the user's own copy of playbooks/inventory/real.example.yml",
}
# what the emulator's Makefile builds
BUILT = {"emulator/tierlab-emu", "emulator/libtierlab-model.so", "emulator/libtierlab-trace.so"}
# a run's or a study's directory under results/, which tierlab writes: its id begins with the time it started, or
# make findings' studies under results/findings/ and results/findings-quick/
OUTPUT = re.compile(r"results/(?:\d{8}T\d{6}Z_|findings/|findings-quick/|findings$|findings-quick$)")
# the changelog names what was renamed or removed
HISTORY = ("CHANGELOG.md",)


def _repository_files() -> list[str]:
    """The files of the repository, as git lists them: not what a run, a build or an install left beside them."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True, timeout=120).stdout.split()
    return [name for name in listed if (ROOT / name).is_file()]


def _text_files() -> list[Path]:
    files = [ROOT / name for name in _repository_files()]
    return [path for path in files if path.suffix not in (".parquet", ".png", ".so") and b"\0" not in path.read_bytes()]


def _named_paths(text: str) -> set[str]:
    """Paths of the repository a text names: not those with a placeholder (<run_id>, in HTML &lt;run_id&gt;) or a
    pattern (*) in them."""
    found = set()
    for match in PATH.finditer(text):
        path = match.group(1).rstrip("/.")
        rest = re.match(r"\S*", text[match.end():]).group(0)
        if not any(mark in rest for mark in ("<", "&lt;", "*", "{")):
            found.add(path)
    return found


def test_no_file_names_the_documents_the_project_was_specified_in():
    named = [f"{path.relative_to(ROOT)}:{n}" for path in _text_files()
             for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1) if OUTSIDE.search(line)]
    assert named == []


def test_every_path_a_file_names_is_in_the_repository():
    missing = []
    files = _repository_files()
    # the repository's files, the directories that hold them, and what a build makes of them
    present = set(files) | {str(parent) for name in files for parent in Path(name).parents} | BUILT
    documents = {Path(name).name for name in files if name.endswith(".md")}
    for path in _text_files():
        if path.name in HISTORY:
            continue
        text = path.read_text(errors="replace")
        missing += [f"{path.relative_to(ROOT)} names {named}" for named in sorted(_named_paths(text))
                    if named not in present and named not in NOT_IN_THE_REPOSITORY and not OUTPUT.match(named)]
        missing += [f"{path.relative_to(ROOT)} names {name}" for name in sorted(set(DOCUMENT.findall(text)))
                    if name not in documents and name not in NOT_IN_THE_REPOSITORY]
    assert missing == []
