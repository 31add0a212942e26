"""A query's answer as each engine's client wrote it, read so that engines can be compared."""

import math
from pathlib import Path


def read_answer(path: Path) -> list[list]:
    """A query's rows with each engine's spelling taken out: CHAR padding, and numbers as numbers (every
    engine's client writes NULL as NULL)."""
    rows = []
    for line in path.read_text().splitlines():
        fields = []
        for text in line.split("\t"):
            try:
                fields.append(float(text))
            except ValueError:
                fields.append(text.rstrip())
        rows.append(fields)
    return rows


def same_answer(left: list[list], right: list[list]) -> bool:
    # averages differ in their last digits: MariaDB keeps 4 more decimals than the operand, PostgreSQL 16 or more
    return len(left) == len(right) and all(
        len(a) == len(b) and all(math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-5) if isinstance(x, float) else x == y
                                 for x, y in zip(a, b, strict=True))
        for a, b in zip(left, right, strict=True))
