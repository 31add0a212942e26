"""How each kind of value a user gives is read: checked, normalised, and refused with what was given and what is
allowed. A kind reads a value as given with -e (text, or what YAML made of it) and says in words what it allows,
for the errors and for the variables' reference alike. And how a measured figure is written for a reader."""

import math
import re
from dataclasses import dataclass

from ..errors import InputError
from .engines import Engine
from .layout import layout_name, parse_layout
from .workloads import Workload

SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def figure(value: float) -> str:
    """A measured figure in text: three significant digits, and from 1000 on the whole number (1004 tps, not the
    1e+03 that three significant digits write)."""
    return f"{value:.3g}" if abs(value) < 999.5 else f"{value:.0f}"


def refusal(name: str, value, allowed: str, todo: str = "") -> InputError:
    """The error for a value that is not allowed: what was given, what is allowed and, where it helps, what to do."""
    message = f"{name}={value!r} is not allowed; allowed: {allowed}"
    return InputError(message + (f". {todo}" if todo else ""))


def parse_bytes(name: str, value) -> int:
    match = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)i?B?\s*", str(value), re.IGNORECASE)
    if not match or int(match.group(1)) == 0:
        raise refusal(name, value, Size.allowed)
    return int(match.group(1)) * SIZE_UNITS[match.group(2).upper()]


@dataclass(frozen=True)
class Context:
    """What a value may depend on: the run's engine and workload."""
    engine: Engine
    workload: Workload


@dataclass(frozen=True)
class Choice:
    values: tuple[str, ...]

    @property
    def allowed(self) -> str:
        return ", ".join(self.values)

    def parse(self, name: str, value, context: Context | None = None) -> str:
        if value not in self.values:
            raise refusal(name, value, self.allowed)
        return value


@dataclass(frozen=True)
class Bool:
    allowed = "true or false"

    def parse(self, name: str, value, context: Context | None = None) -> bool:
        text = str(value).strip().lower()
        if text in ("true", "yes", "1", "on"):
            return True
        if text in ("false", "no", "0", "off"):
            return False
        raise refusal(name, value, self.allowed)


@dataclass(frozen=True)
class Int:
    low: int
    high: int | None = None

    @property
    def allowed(self) -> str:
        return f"a whole number from {self.low}" + (f" to {self.high}" if self.high is not None else " up")

    def parse(self, name: str, value, context: Context | None = None) -> int:
        try:
            number = int(str(value))
        except ValueError:
            raise refusal(name, value, self.allowed) from None
        if number < self.low or (self.high is not None and number > self.high):
            raise refusal(name, value, self.allowed)
        return number


@dataclass(frozen=True)
class Number:
    """A number above `above` (and below `below`, where given)."""
    above: float
    below: float | None = None
    example: str = ""

    @property
    def allowed(self) -> str:
        return f"a number > {self.above:g}" + (f" and < {self.below:g}" if self.below is not None else "") + \
            (f" ({self.example})" if self.example else "")

    def parse(self, name: str, value, context: Context | None = None) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise refusal(name, value, self.allowed) from None
        if not (number > self.above and (self.below is None or number < self.below) and math.isfinite(number)):
            raise refusal(name, value, self.allowed)
        return number


@dataclass(frozen=True)
class Size:
    allowed = "a positive size in bytes, with an optional K, M, G or T suffix (e.g. 128M)"

    def parse(self, name: str, value, context: Context | None = None) -> int:
        return parse_bytes(name, value)


@dataclass(frozen=True)
class SizeOrNone:
    """A size, or none: what was given, normalised to `none` for none."""
    allowed = "none, or a positive size in bytes with an optional K, M, G or T suffix (e.g. 1G)"

    def parse(self, name: str, value, context: Context | None = None) -> str:
        text = str(value).strip()
        if text.lower() == "none":
            return "none"
        parse_bytes(name, text)
        return text


@dataclass(frozen=True)
class SizeOrShare:
    """A size ({'bytes': N}) or a percentage of the data's estimated size ({'percent': P})."""
    allowed = "a size (e.g. 256M) or a percentage of the data from 0 to 100 (e.g. 5%)"

    def parse(self, name: str, value, context: Context | None = None) -> dict:
        text = str(value).strip()
        if text.endswith("%"):
            try:
                percent = float(text[:-1])
            except ValueError:
                percent = -1.0
            if not 0 < percent <= 100:
                raise refusal(name, value, self.allowed)
            return {"percent": percent}
        try:
            return {"bytes": parse_bytes(name, value)}
        except InputError:
            raise refusal(name, value, self.allowed) from None


@dataclass(frozen=True)
class SizeShareOrNone:
    """A size or a percentage (SizeOrShare), or none: what was given, normalised to `none` for none."""
    allowed = f"none, or {SizeOrShare.allowed}"

    def parse(self, name: str, value, context: Context | None = None) -> str:
        text = str(value).strip()
        if text.lower() == "none":
            return "none"
        try:
            SizeOrShare().parse(name, text, context)
        except InputError:
            raise refusal(name, value, self.allowed) from None
        return text


@dataclass(frozen=True)
class SizeShareOrUnbounded:
    """A size or a percentage (SizeOrShare), or `unbounded`: no bound at all, chosen by the user."""
    allowed = f"{SizeOrShare.allowed}, or unbounded"

    def parse(self, name: str, value, context: Context | None = None) -> dict | str:
        if str(value).strip().lower() == "unbounded":
            return "unbounded"
        try:
            return SizeOrShare().parse(name, value, context)
        except InputError:
            raise refusal(name, value, self.allowed) from None


@dataclass(frozen=True)
class PageSize:
    """A page size by name or in bytes; those of the run's engine."""
    sizes: dict

    @property
    def allowed(self) -> str:
        return ", ".join(self.sizes) + " (or the same in bytes)"

    def parse(self, name: str, value, context: Context | None = None) -> str:
        text = str(value).strip().lower()
        by_bytes = {str(v): k for k, v in self.sizes.items()}
        size = text if text in self.sizes else by_bytes.get(text)
        if size is None:
            raise refusal(name, value, self.allowed)
        if context is not None and size not in context.engine.page_sizes:
            engine = context.engine
            raise refusal(name, value, f"{', '.join(engine.page_sizes)} for engine={engine.name}",
                          "PostgreSQL's block size is fixed when it is built, and Debian's packages have 8 KiB blocks"
                          if engine.family == "postgresql" else "")
        return size


@dataclass(frozen=True)
class Layout:
    allowed = "None, ALL, or the workload's table codes joined by '+' (C+O)"

    def parse(self, name: str, value, context: Context) -> str:
        return layout_name(parse_layout(value, context.workload), context.workload)


@dataclass(frozen=True)
class Queries:
    """'all' or the workload's queries joined by commas ('3,10,16' for TPC-H, '1.1,3.2' for SSB): their ids."""
    allowed = "all, or the workload's queries joined by commas (3,10,16; 1.1,3.2; read_write)"

    def parse(self, name: str, value, context: Context) -> list[str]:
        workload = context.workload
        text = str(value).strip().lower()
        aliases = workload.query_aliases()
        shortest = {query: min((a for a, q in aliases.items() if q == query), key=len) for query in workload.queries}
        first, *_, last = shortest.values()
        steps = "tests" if workload.kind == "timed" else "queries"
        allowed = f"all, or {workload.name} {steps} {first} to {last} joined by commas (e.g. {first},{last})"
        if text == "all":
            return list(workload.queries)
        parts = [p.strip() for p in text.split(",")]
        if not all(p in aliases for p in parts):
            raise refusal(name, value, allowed)
        queries = [aliases[p] for p in parts]
        repeated = sorted({q for q in queries if queries.count(q) > 1})
        if repeated:
            raise refusal(name, value, allowed, f"Query {', '.join(repeated)} is given more than once")
        return queries


@dataclass(frozen=True)
class Corun:
    """'none', 'writer' (a concurrent writer: CORUN_WRITER), or the id of the one query of the workload that runs
    beside every query of the run."""
    allowed = "none, writer, or one query of the workload (q1.1)"

    def parse(self, name: str, value, context: Context) -> str:
        if str(value).strip().lower() in ("none", "writer"):
            return str(value).strip().lower()
        workload = context.workload
        try:
            (query,) = Queries().parse(name, value, context)
        except (InputError, ValueError):
            first, last = workload.queries[0], workload.queries[-1]
            raise refusal(name, value, f"none, writer, or one {workload.name} query from {first} to {last} "
                                       f"(e.g. {last})") from None
        return query


@dataclass(frozen=True)
class RunId:
    """The id of a run under results_dir, or empty for none: a name, never a path."""
    allowed = "empty, or the id of a run under results_dir (its directory's name: letters, digits, . _ + -)"

    def parse(self, name: str, value, context: Context | None = None) -> str:
        text = str(value).strip()
        if text and (not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", text) or ".." in text):
            raise refusal(name, value, self.allowed)
        return text


@dataclass(frozen=True)
class Text:
    allowed: str = "a path"

    def parse(self, name: str, value, context: Context | None = None) -> str:
        return str(value)


@dataclass(frozen=True)
class Dilation:
    """auto (the least factor the host needs, chosen when the tiers come up) or a number from 1 to `most`."""
    most: int

    @property
    def allowed(self) -> str:
        return f"auto, or a number from 1 to {self.most} (modelled time stretched that many times on every tier)"

    def parse(self, name: str, value, context: Context | None = None) -> str | float:
        if str(value) == "auto":
            return "auto"
        try:
            dilation = float(value)
        except (TypeError, ValueError):
            raise refusal(name, value, self.allowed) from None
        if not 1 <= dilation <= self.most:
            raise refusal(name, value, self.allowed)
        return dilation
