"""The settings of an observation (playbooks/observe.yml): an instance tierlab did not start, watched for a window
of intervals while it serves its own traffic. Checked before anything runs, as a run's are (settings.validate), into
settings of a run's shape, so that the manifest, analyze and recommend read an observation as the run it is: its
steps are the intervals, its objects come from the instance's catalog (placement None: no layout was asked for), its
workload is `observed`."""

import math
import re

from ..catalog.engines import ENGINES
from ..catalog.values import Context, parse_bytes, refusal
from ..catalog.variables import BY_NAME, group
from ..errors import InputError
from .settings import typed

OBSERVED = "observed"
# the names databases go by in `databases` (each engine allows more, quoted; these are the ones compared as given)
DATABASE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$-]*")
PASSWORD_KEYWORD = re.compile(r"(^|\s)password\s*=")


def interval_labels(count: int) -> list[str]:
    return [f"i{number:04d}" for number in range(1, count + 1)]


def _databases(text: str) -> list[str]:
    if text == "all":
        return []
    names = [name.strip() for name in text.split(",")]
    for name in names:
        if not DATABASE_NAME.fullmatch(name):
            raise refusal("databases", text, "all, or database names (letters, digits, _, $ and -) joined by commas")
    return names


def _connection(settings: dict) -> None:
    if settings["engine"] == "postgresql":
        conninfo = settings["conninfo"]
        if not conninfo:
            raise InputError("conninfo is empty: give how psql reaches the instance on its host, e.g. -e "
                             "'conninfo=host=/var/run/postgresql port=5432 user=observer passfile=/root/.pgpass'")
        if PASSWORD_KEYWORD.search(conninfo):
            raise InputError("conninfo has a password: keep it in a passfile (passfile=PATH in the conninfo, a line "
                             "host:port:database:user:password, mode 0600) so that it is never written into the run's "
                             "settings or logs")
        return
    client_file = settings["client_file"]
    if not client_file.startswith("/"):
        raise refusal("client_file", client_file, "the absolute path, on the database host, of a client option file "
                      "with a [client] group (user, password, and socket or host and port)")


def validate_observe(values: dict) -> dict:
    """An observation's settings from raw -e values (see the module's doc)."""
    engine = ENGINES[BY_NAME["engine"].kind.parse("engine", values.get("engine") or BY_NAME["engine"].default)]
    names = (*group("observe"), "trace_backend", "resume")
    settings = {"engine": engine.name, "workload": OBSERVED, **typed(values, Context(engine, None), names, OBSERVED)}
    _connection(settings)
    settings["databases"] = _databases(settings["databases"])
    if settings["interval_s"] > settings["window_s"]:
        raise InputError(f"interval_s={settings['interval_s']} is longer than window_s={settings['window_s']}: "
                         "an interval is a part of the window; give a shorter interval or a longer window")
    labels = interval_labels(math.ceil(settings["window_s"] / settings["interval_s"]))
    if values.get("untraced_intervals") in (None, ""):
        # the default leaves a window of fewer than four intervals half traced
        settings["untraced_intervals"] = min(settings["untraced_intervals"], len(labels) // 2)
    if 2 * settings["untraced_intervals"] > len(labels):
        raise InputError(f"untraced_intervals={settings['untraced_intervals']}: the window has {len(labels)} "
                         f"intervals, and at most half of them ({len(labels) // 2}) can be left untraced (every other "
                         "one from the second)")
    limit = settings["raw_trace_limit"]
    settings["raw_trace_limit_bytes"] = 0 if limit == "none" else parse_bytes("raw_trace_limit", limit)
    settings.update(queries=labels, untraced=labels[1:2 * settings["untraced_intervals"]:2], tries=1, cold=False,
                    query_timeout_s=settings["interval_s"], layout=OBSERVED, placement=None, trace=True)
    return settings
