"""An observation's variables checked before anything runs (playbooks/observe.yml), into a run's settings whose steps
are the window's intervals."""

import pytest

from tierlab.errors import InputError
from tierlab.runs.observing import validate_observe

POSTGRESQL = {"engine": "postgresql", "conninfo": "host=/run/postgresql port=5432 user=observer passfile=/root/o.pgpass"}
MARIADB = {"engine": "mariadb", "client_file": "/root/observer.cnf"}


def test_the_window_is_cut_into_intervals_every_other_one_untraced_from_the_second():
    settings = validate_observe({**POSTGRESQL, "window_s": "50", "interval_s": "10", "untraced_intervals": "2"})
    assert settings["queries"] == ["i0001", "i0002", "i0003", "i0004", "i0005"]
    assert settings["untraced"] == ["i0002", "i0004"]
    assert (settings["workload"], settings["layout"], settings["placement"], settings["tries"], settings["cold"],
            settings["query_timeout_s"]) == ("observed", "observed", None, 1, False, 10)


def test_the_defaults_watch_ten_minutes_in_intervals_of_a_minute_every_database():
    settings = validate_observe(MARIADB)
    assert (len(settings["queries"]), settings["interval_s"], settings["databases"], settings["index_pages"]) == \
        (10, 60, [], True)


def test_a_last_interval_shorter_than_the_others_still_counts_and_the_default_leaves_one_of_three_untraced():
    settings = validate_observe({**MARIADB, "window_s": "25", "interval_s": "10"})
    assert (settings["queries"], settings["untraced"]) == (["i0001", "i0002", "i0003"], ["i0002"])


def test_databases_are_names_joined_by_commas():
    assert validate_observe({**MARIADB, "databases": "app, crm"})["databases"] == ["app", "crm"]


@pytest.mark.parametrize(("values", "said"), [
    ({"engine": "postgresql"}, "conninfo is empty: give how psql reaches the instance"),
    ({**POSTGRESQL, "conninfo": "host=/run/postgresql password=secret"}, "conninfo has a password: keep it in a passfile"),
    ({**MARIADB, "client_file": "observer.cnf"}, "client_file='observer.cnf' is not allowed; allowed: the absolute path"),
    ({**MARIADB, "conninfo": "host=/x"}, "conninfo='host=/x' means nothing for engine=mariadb"),
    ({**POSTGRESQL, "index_pages": "false"}, "index_pages='false' means nothing for engine=postgresql"),
    ({**MARIADB, "window_s": "20", "interval_s": "30"}, "interval_s=30 is longer than window_s=20"),
    ({**MARIADB, "window_s": "40", "interval_s": "10", "untraced_intervals": "3"},
     "untraced_intervals=3: the window has 4 intervals, and at most half of them"),
    ({**MARIADB, "databases": "app;DROP DATABASE app"}, "databases='app;DROP DATABASE app' is not allowed"),
    ({**MARIADB, "window_s": "5"}, "window_s='5' is not allowed; allowed: a whole number from 10 to 604800"),
])
def test_bad_values_are_refused_with_what_is_allowed(values, said):
    with pytest.raises(InputError, match=said.replace("(", r"\(").replace(")", r"\)")):
        validate_observe(values)
