"""Files written whole or not at all: a reader (a test, `tierlab study --resume`, the next window) finds the old
file or the new one, never half of one."""

from pathlib import Path


def replace_text(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    partial.replace(path)
