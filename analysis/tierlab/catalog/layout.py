"""The layout grammar: which tables sit on the fast tier.

A layout is `None` (nothing on the fast tier), `ALL` (everything on it), or
table codes joined by `+` (`C+O`: customer and orders on the fast tier; a
workload directory's codes are its table names: `orders+customers`).
Every table not named sits on the capacity tier.
"""

from ..errors import InputError
from .workloads import Workload

FAST = "fast"
CAPACITY = "capacity"


def _allowed(workload: Workload) -> str:
    return "None, ALL, or codes " + " ".join(workload.codes) + " joined by '+'"


def parse_layout(text: str, workload: Workload) -> dict[str, str]:
    """{table: 'fast' | 'capacity'} for every table of the workload."""
    codes = workload.codes
    text = str(text).strip()
    if text == "None":
        fast = set()
    elif text == "ALL":
        fast = set(codes.values())
    else:
        given = text.split("+")
        unknown = [code for code in given if code not in codes]
        if unknown:
            raise InputError(
                f"layout {text!r}: unknown table code(s) {', '.join(repr(c) for c in unknown)}; allowed: {_allowed(workload)}"
            )
        repeated = sorted({code for code in given if given.count(code) > 1})
        if repeated:
            raise InputError(
                f"layout {text!r}: table code(s) {', '.join(repeated)} given more than once; name each table once"
            )
        fast = {codes[code] for code in given}
    return {table: FAST if table in fast else CAPACITY for table in codes.values()}


def layout_name(placement: dict[str, str], workload: Workload) -> str:
    """The canonical layout text of a placement (codes in the workload's order)."""
    fast = [code for code, table in workload.codes.items() if placement[table] == FAST]
    if not fast:
        return "None"
    if len(fast) == len(placement):
        return "ALL"
    return "+".join(fast)
