"""A PostgreSQL run's report says how the server's OS page cache was bounded, or that it was not."""

from tierlab.report.run import run_context


def test_the_report_says_the_page_cache_above_os_cache_was_dropped_while_the_queries_ran_and_names_the_cgroup():
    context = dict(run_context({
        "settings": {"engine": "postgresql", "os_cache": {"bytes": 64 << 20}},
        "engine": {"name": "postgresql", "memory_limit_bytes": 184 << 20, "page_cache_bytes": 64 << 20,
                   "memory_cgroup": {"version": 1, "path": "/sys/fs/cgroup/memory/tierlab-postgresql-8k"}}}))
    assert context["OS page cache"] == (
        "os_cache 64 MiB: the page cache above it dropped while the queries ran, the server's processes bounded to "
        "184 MiB, page cache included, cgroup v1 /sys/fs/cgroup/memory/tierlab-postgresql-8k")


def test_the_report_of_a_run_whose_page_cache_had_a_fixed_bound_gives_that_bound():
    context = dict(run_context({
        "settings": {"engine": "postgresql", "os_cache": {"bytes": 64 << 20}},
        "engine": {"name": "postgresql", "memory_limit_bytes": 184 << 20,
                   "memory_cgroup": {"version": 2, "path": "/sys/fs/cgroup/tierlab-tierlab/postgresql-8k"}}}))
    assert context["OS page cache"] == ("os_cache 64 MiB: the server's processes bounded to 184 MiB, page cache "
                                        "included, cgroup v2 /sys/fs/cgroup/tierlab-tierlab/postgresql-8k")


def test_the_report_says_an_unbounded_page_cache_was_the_run_s_choice():
    context = dict(run_context({"settings": {"engine": "postgresql", "os_cache": "unbounded"},
                                "engine": {"name": "postgresql", "memory_limit_bytes": None, "memory_cgroup": None}}))
    assert context["OS page cache"] == "unbounded (os_cache=unbounded): it may have held the whole database"


def test_a_run_of_an_engine_without_os_cache_has_no_page_cache_line():
    context = dict(run_context({"settings": {"engine": "mariadb", "os_cache": None}, "engine": {"name": "mariadb"}}))
    assert "OS page cache" not in context
