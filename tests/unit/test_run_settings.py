import json
import re

import pytest

from tierlab.catalog.variables import FAST_CACHE_POLICIES
from tierlab.devices import cost_model
from tierlab.errors import InputError
from tierlab.runs.settings import (
    buffer_pool_bytes,
    check_fit,
    connections,
    memory_limit_bytes,
    resume_conflicts,
    validate,
)

# a run as `make tpch` starts it: layout C+O, every other variable left unset
MAKE_TPCH = {"layout": "C+O"}


def settings(**changes):
    return validate({**MAKE_TPCH, **changes})


def test_defaults_normalize_to_typed_values():
    result = settings()
    assert result["scale_factor"] == 0.1
    assert result["layout"] == "C+O"
    assert result["queries"][0] == "q01" and result["queries"][-1] == "q22" and len(result["queries"]) == 22
    assert result["page_size_bytes"] == 16384
    assert result["cold"] is True
    assert result["buffer_pool"] == {"percent": 5.0}


@pytest.mark.parametrize("value", ["2k", "16", "128k", "16kb"])
def test_bad_page_size_names_the_allowed_sizes(value):
    with pytest.raises(InputError) as err:
        settings(page_size=value)
    assert str(err.value) == f"page_size={value!r} is not allowed; allowed: 4k, 8k, 16k, 32k, 64k (or the same in bytes)"


def test_page_size_in_bytes_is_accepted():
    assert settings(page_size="8192")["page_size"] == "8k"


@pytest.mark.parametrize("value", ["0", "-1", "abc", "nan"])
def test_scale_factor_must_be_positive(value):
    with pytest.raises(InputError, match=r"scale_factor=.* is not allowed; allowed: a number > 0"):
        settings(scale_factor=value)


def test_queries_subset_keeps_the_given_order():
    assert settings(queries="3,10,16")["queries"] == ["q03", "q10", "q16"]


@pytest.mark.parametrize("value", ["0", "23", "3,x", ","])
def test_queries_out_of_range_are_refused(value):
    with pytest.raises(InputError) as err:
        settings(queries=value)
    assert str(err.value) == (f"queries={value!r} is not allowed; allowed: all, or tpch queries 1 to 22 joined by commas "
                              "(e.g. 1,22)")


def test_a_variable_given_empty_is_left_unset():
    assert settings(queries="", tries="", page_size="") == settings()


def test_ssb_queries_are_named_by_flight_and_number():
    assert settings(workload="ssb", layout="LO+D", queries="1.1,q3.2, 4.3")["queries"] == ["q1.1", "q3.2", "q4.3"]


def test_a_tpch_query_number_is_refused_for_ssb():
    with pytest.raises(InputError) as err:
        settings(workload="ssb", layout="LO", queries="5")
    assert str(err.value) == "queries='5' is not allowed; allowed: all, or ssb queries 1.1 to 4.3 joined by commas (e.g. 1.1,4.3)"


def test_ssb_layouts_name_its_tables_by_their_codes():
    assert settings(workload="ssb", layout="D+LO")["layout"] == "LO+D"


def test_repeated_query_is_refused():
    with pytest.raises(InputError, match="Query q03 is given more than once"):
        settings(queries="3,10,3")


def test_buffer_pool_takes_a_size():
    assert settings(buffer_pool="256M")["buffer_pool"] == {"bytes": 256 << 20}


@pytest.mark.parametrize("value", ["0%", "101%", "lots", "0"])
def test_bad_buffer_pool_is_refused(value):
    with pytest.raises(InputError, match="buffer_pool="):
        settings(buffer_pool=value)


def test_buffer_pool_percentage_has_a_floor_of_256_pages():
    assert buffer_pool_bytes(settings(buffer_pool="1%", scale_factor="0.01", page_size="64k")) == 256 * 65536


def test_unknown_engine_is_refused():
    with pytest.raises(InputError) as err:
        settings(engine="postgres")
    assert str(err.value) == "engine='postgres' is not allowed; allowed: mariadb, mysql, postgresql"


def test_each_engine_gets_its_own_defaults_and_none_for_the_other_engines_variables():
    mariadb, postgresql = settings(), settings(engine="postgresql")
    assert (mariadb["page_size"], mariadb["io_threads"], mariadb["flush_method"], mariadb["os_cache"]) == (
        "16k", 4, "O_DIRECT", None)
    assert (postgresql["page_size"], postgresql["io_threads"], postgresql["os_cache"],
            postgresql["fast_effective_io_concurrency"], postgresql["parallel_workers"],
            postgresql["fast_random_page_cost"]) == ("8k", None, {"bytes": 64 << 20}, 1, 2, 4.0)


def test_an_innodb_variable_given_for_postgresql_is_refused():
    with pytest.raises(InputError) as err:
        settings(engine="postgresql", io_threads="8")
    assert str(err.value) == ("io_threads='8' means nothing for engine=postgresql; it applies to engine mariadb and "
                              "mysql only. Leave it unset for postgresql")


def test_a_postgresql_variable_given_for_mariadb_is_refused():
    with pytest.raises(InputError, match="^fast_random_page_cost='1.1' means nothing for engine=mariadb; it "
                                              "applies to engine postgresql only"):
        settings(fast_random_page_cost="1.1")


@pytest.mark.parametrize("engine", ["mariadb", "mysql", "postgresql"])
def test_a_join_plan_is_the_optimizer_s_own_or_forced_to_hash_or_index_joins(engine):
    assert settings(engine=engine)["join_plan"] == "optimizer"
    assert settings(engine=engine, join_plan="hash")["join_plan"] == "hash"
    assert settings(engine=engine, join_plan="index")["join_plan"] == "index"
    with pytest.raises(InputError) as err:
        settings(engine=engine, join_plan="merge")
    assert str(err.value) == "join_plan='merge' is not allowed; allowed: optimizer, hash, index"


def test_a_run_has_no_co_runner_unless_one_query_is_named():
    assert settings()["corun"] == "none"
    assert settings(corun="None")["corun"] == "none"
    assert settings(corun="3")["corun"] == "q03"
    assert settings(workload="ssb", layout="LO", corun="q2.1")["corun"] == "q2.1"
    assert settings()["corun_writer"] is None


def test_a_writer_co_runner_is_sysbench_s_write_only_test_on_four_tables_of_its_own_with_four_threads():
    writer = settings(corun="Writer")
    assert writer["corun"] == "writer"
    assert writer["corun_writer"] == {"test": "oltp_write_only", "database": "tierlab_writer", "tables": 4,
                                      "table_size": 100000, "threads": 4, "report_interval_s": 1}
    assert connections(writer) == 5


@pytest.mark.parametrize("value", ["all", "3,5", "23", "q1.1"])
def test_a_co_runner_other_than_one_query_of_the_workload_is_refused(value):
    with pytest.raises(InputError) as err:
        settings(corun=value)
    assert str(err.value) == (f"corun={value!r} is not allowed; allowed: none, writer, or one tpch query from q01 "
                              "to q22 (e.g. q22)")


def test_ssb_queries_are_split_by_their_driving_dimension_s_keys_only_when_asked():
    assert settings(workload="ssb", layout="LO", queries="1.1,3.4")["subquery_keys"] == {}
    split = settings(workload="ssb", layout="LO", queries="1.1,2.1,3.4", subqueries="4")
    assert split["subqueries"] == 4
    assert split["subquery_keys"] == {"q1.1": ["date", "d_datekey"], "q2.1": ["part", "p_partkey"],
                                      "q3.4": ["customer", "c_custkey"]}


def test_under_hash_joins_subqueries_split_lineorder_s_pages_by_its_blocks_or_its_clustered_key():
    on = {"workload": "ssb", "layout": "LO", "queries": "1.1,3.4", "subqueries": "4", "join_plan": "hash"}
    assert settings(engine="postgresql", **on)["subquery_keys"] == {"q1.1": ["lineorder", "ctid"],
                                                                    "q3.4": ["lineorder", "ctid"]}
    assert settings(engine="mariadb", **on)["subquery_keys"] == {"q1.1": ["lineorder", "lo_orderkey"],
                                                                 "q3.4": ["lineorder", "lo_orderkey"]}


def test_subqueries_are_refused_for_tpch_and_beyond_64():
    with pytest.raises(InputError) as err:
        settings(subqueries="2")
    assert str(err.value) == ("subqueries='2' means nothing for workload=tpch; it applies to workload ssb only. "
                              "Leave it unset for tpch")
    with pytest.raises(InputError) as err:
        settings(workload="ssb", layout="LO", subqueries="65")
    assert str(err.value) == "subqueries='65' is not allowed; allowed: a whole number from 1 to 64"


def test_postgresql_refuses_a_block_size_other_than_8k():
    with pytest.raises(InputError) as err:
        settings(engine="postgresql", page_size="16k")
    assert str(err.value) == ("page_size='16k' is not allowed; allowed: 8k for engine=postgresql. PostgreSQL's block "
                              "size is fixed when it is built, and Debian's packages have 8 KiB blocks")


@pytest.mark.parametrize("value", ["0", "-1", "cheap"])
def test_a_page_cost_must_be_a_positive_number(value):
    with pytest.raises(InputError, match=f"capacity_random_page_cost='{value}' is not allowed; allowed: a number > 0"):
        settings(engine="postgresql", capacity_random_page_cost=value)


def test_postgresql_s_memory_bound_is_shared_buffers_and_os_cache_and_its_processes_memory():
    postgresql = settings(engine="postgresql", buffer_pool="256M", os_cache="128M", parallel_workers="0")
    assert memory_limit_bytes(postgresql) == (256 << 20) + (128 << 20) + (64 << 20)


def test_postgresql_s_os_cache_unbounded_is_a_choice_of_no_memory_bound():
    postgresql = settings(engine="postgresql", os_cache="unbounded")
    assert (postgresql["os_cache"], memory_limit_bytes(postgresql)) == ("unbounded", None)


@pytest.mark.parametrize("value", ["none", "0", "lots"])
def test_an_os_cache_neither_a_size_nor_a_share_nor_unbounded_is_refused(value):
    with pytest.raises(InputError) as err:
        settings(engine="postgresql", os_cache=value)
    assert str(err.value) == (f"os_cache={value!r} is not allowed; allowed: a size (e.g. 256M) or a percentage of the "
                              "data from 0 to 100 (e.g. 5%), or unbounded")


def test_postgresql_s_memory_bound_allows_24_mib_more_for_each_further_busy_process():
    def bound(**changes):
        postgresql = settings(engine="postgresql", buffer_pool="256M", os_cache="128M", **changes)
        return (memory_limit_bytes(postgresql) - (256 << 20) - (128 << 20) - (64 << 20)) >> 20

    assert bound(parallel_workers="2") == 2 * 24
    assert bound(parallel_workers="0", corun="1") == 24
    assert bound(workload="ssb", layout="LO", parallel_workers="0", subqueries="16") == 15 * 24
    # the subqueries' workers are bounded by max_parallel_workers (the parallel workers, 8 at the least)
    assert bound(workload="ssb", layout="LO", parallel_workers="2", subqueries="16") == (15 + 8) * 24
    # sysbench's short statements start no parallel workers
    assert bound(workload="sysbench", layout="None", scale_factor="", parallel_workers="2", threads="8") == 7 * 24


def test_a_run_s_connections_are_sysbench_s_threads_or_its_subqueries_and_co_runner():
    assert connections(settings()) == 1
    assert connections(settings(corun="6")) == 2
    assert connections(settings(workload="ssb", layout="LO", subqueries="16", corun="1.1")) == 17
    assert connections(sysbench(threads="64")) == 64


def test_layout_that_does_not_fit_shows_the_sizes():
    with pytest.raises(InputError) as err:
        check_fit(settings(layout="L+O", scale_factor="10"), 6 << 30)
    assert str(err.value) == (
        "layout 'O+L' at scale_factor=10 needs about 15.87 GiB on the fast tier (lineitem 13.23 GiB, orders 2.64 GiB), "
        "but the fast tier holds 5.40 GiB usable of 6.00 GiB; choose fewer tables, a smaller scale_factor, "
        "or a larger fast tier"
    )


def test_a_layout_fits_where_it_needs_no_more_than_nine_tenths_of_the_fast_tier():
    # every table at scale factor 1 needs about 1.93 GiB: 2 GiB holds 1.80 GiB usable, 2.25 GiB 2.03 GiB
    with pytest.raises(InputError, match=r"needs about 1\.93 GiB .* holds 1\.80 GiB usable of 2\.00 GiB"):
        check_fit(settings(layout="ALL", scale_factor="1"), 2 << 30)
    assert check_fit(settings(layout="ALL", scale_factor="1"), 9 << 28) is None


def test_validate_checks_the_fit_when_the_fast_tier_size_is_known():
    with pytest.raises(InputError, match="does not fit|needs about"):
        validate({**MAKE_TPCH, "layout": "ALL", "scale_factor": "100"}, 6 << 30)


@pytest.mark.parametrize(("page_size", "compression"), [("16k", "zlib8"), ("16k", "zlib4"), ("8k", "zlib4"),
                                                        ("64k", "page"), ("4k", "none")])
def test_innodb_compresses_pages_larger_than_its_blocks_up_to_16k(page_size, compression):
    assert settings(page_size=page_size, compression=compression)["compression"] == compression


@pytest.mark.parametrize(("page_size", "compression", "why", "allowed"), [
    ("32k", "zlib8", "InnoDB refuses ROW_FORMAT=COMPRESSED with pages larger than 16k", "none, page, zstd"),
    ("8k", "zlib8", "its 8 KiB blocks would not be smaller than the pages", "none, zlib4, page, zstd"),
    ("4k", "zlib4", "its 4 KiB blocks would not be smaller than the pages", "none, page, zstd"),
])
def test_a_compression_innodb_cannot_apply_to_the_page_size_is_refused_with_why(page_size, compression, why, allowed):
    with pytest.raises(InputError) as err:
        settings(page_size=page_size, compression=compression)
    assert str(err.value) == (f"compression={compression!r} cannot be used with page_size={page_size}: {why}; "
                              f"allowed with page_size={page_size}: {allowed}")


def test_innodb_s_compression_is_refused_for_postgresql():
    with pytest.raises(InputError) as err:
        settings(engine="postgresql", compression="zlib8")
    assert str(err.value).startswith("compression='zlib8' is not allowed; allowed: none, zstd for engine=postgresql. "
                                     "PostgreSQL compresses only values over 2 kB (TOAST)")


BTRFS_TIERS = {"fast": "btrfs", "capacity": "btrfs"}


@pytest.mark.parametrize("engine", ["mariadb", "mysql", "postgresql"])
def test_every_engine_takes_the_file_system_s_compression_on_btrfs_tiers(engine):
    result = validate({**MAKE_TPCH, "engine": engine, "compression": "zstd"}, None, BTRFS_TIERS)
    assert (result["compression"], result["database"]) == ("zstd", "tpch_sf0_1_zstd")


def test_with_the_file_system_s_compression_innodb_writes_through_the_page_cache():
    assert validate({**MAKE_TPCH, "compression": "zstd"}, None, BTRFS_TIERS)["flush_method"] == "fsync"
    assert validate({**MAKE_TPCH, "compression": "zstd", "flush_method": "O_DSYNC"}, None, BTRFS_TIERS)[
        "flush_method"] == "O_DSYNC"


def test_o_direct_is_refused_with_the_file_system_s_compression():
    with pytest.raises(InputError) as err:
        validate({**MAKE_TPCH, "compression": "zstd", "flush_method": "O_DIRECT"}, None, BTRFS_TIERS)
    assert str(err.value) == ("flush_method='O_DIRECT' cannot be used with compression='zstd': btrfs writes O_DIRECT "
                              "writes uncompressed; allowed with it: fsync, O_DSYNC (fsync when flush_method is left "
                              "unset)")


def test_the_file_system_s_compression_is_refused_where_a_tier_is_not_btrfs():
    with pytest.raises(InputError) as err:
        validate({**MAKE_TPCH, "compression": "zstd"}, None, {"fast": "btrfs", "capacity": "ext4"})
    assert str(err.value) == (
        "compression='zstd' is btrfs's, on the database's directories of every tier, but the capacity tier's is "
        "ext4; set tiers_filesystem=btrfs (or the tiers' own 'filesystem: btrfs') on a tierlab_root whose tiers "
        "are not made yet, or choose another compression")


def test_a_mounted_tier_must_declare_btrfs_for_the_file_system_s_compression():
    with pytest.raises(InputError, match="the fast tier's is not declared"):
        validate({**MAKE_TPCH, "compression": "zstd"}, None, {"fast": None, "capacity": "btrfs"})


def sysbench(**changes):
    return settings(**{"workload": "sysbench", "layout": "None", "scale_factor": "", **changes})


def test_sysbench_defaults_place_its_numbered_tables_together():
    result = sysbench(layout="SB", tables="3")
    assert result["placement"] == {"sbtest1": "fast", "sbtest2": "fast", "sbtest3": "fast"}
    assert result["layout"] == "ALL"
    assert result["load_order"] == ["sbtest1", "sbtest2", "sbtest3"]
    assert result["queries"] == ["oltp_read_only", "oltp_read_write", "oltp_write_only"]
    assert (result["table_size"], result["threads"], result["duration_s"], result["warmup_s"],
            result["report_interval_s"]) == (100000, 4, 60, 10, 1)
    assert result["scale_factor"] is None
    assert result["database"] == "sysbench_3x100000"


def test_sysbench_tests_are_chosen_by_their_names_with_or_without_oltp():
    assert sysbench(queries="write_only,oltp_read_only")["queries"] == ["oltp_write_only", "oltp_read_only"]


def test_an_unknown_sysbench_test_is_refused_naming_the_tests():
    with pytest.raises(InputError) as err:
        sysbench(queries="point_select")
    assert str(err.value) == ("queries='point_select' is not allowed; allowed: all, or sysbench tests read_only to "
                              "write_only joined by commas (e.g. read_only,write_only)")


def test_a_scale_factor_is_refused_for_sysbench():
    with pytest.raises(InputError) as err:
        sysbench(scale_factor="1")
    assert str(err.value) == ("scale_factor='1' means nothing for workload=sysbench; it applies to workload tpch, ssb "
                              "and workload_dir only. Leave it unset for sysbench")


def test_a_co_runner_is_refused_for_sysbench():
    with pytest.raises(InputError) as err:
        sysbench(corun="read_only")
    assert str(err.value) == ("corun='read_only' means nothing for workload=sysbench; it applies to workload tpch, "
                              "ssb and workload_dir only. Leave it unset for sysbench")


def test_sysbench_variables_are_refused_for_a_query_workload():
    with pytest.raises(InputError) as err:
        settings(threads="8")
    assert str(err.value).startswith("threads='8' means nothing for workload=tpch; it applies to workload sysbench")


@pytest.mark.parametrize(("name", "value", "allowed"), [("tables", "0", "a whole number from 1 to 1024"),
                                                        ("threads", "x", "a whole number from 1 to 1024"),
                                                        ("duration_s", "0", "a whole number from 1 to 86400")])
def test_sysbench_counts_out_of_range_are_refused(name, value, allowed):
    with pytest.raises(InputError) as err:
        sysbench(**{name: value})
    assert str(err.value) == f"{name}={value!r} is not allowed; allowed: {allowed}"


def test_a_sysbench_layout_that_does_not_fit_names_its_tables_and_rows():
    with pytest.raises(InputError) as err:
        validate({**MAKE_TPCH, "workload": "sysbench", "layout": "ALL", "scale_factor": "", "tables": "8",
                  "table_size": "10000000"}, 6 << 30)
    assert str(err.value).startswith("layout 'ALL' at tables=8 x table_size=10000000 needs about 24.21 GiB on the fast "
                                     "tier (sbtest1 3.03 GiB, ")
    assert str(err.value).endswith("and 4 more), but the fast tier holds 5.40 GiB usable of 6.00 GiB; choose fewer "
                                   "tables, a smaller table_size, or a larger fast tier")


MODELLED = {"fast": "model", "capacity": "model"}


def test_no_fast_cache_by_default():
    result = settings()
    assert (result["fast_cache"], result["fast_cache_bytes"], result["fast_cache_policy"]) == ("none", 0, "admitting")


def test_a_fast_cache_takes_a_size_and_a_policy_on_modelled_tiers_with_every_table_on_the_capacity_tier():
    result = validate({**MAKE_TPCH, "layout": "None", "fast_cache": "256M", "fast_cache_policy": "lru"},
                      fast_tier_bytes=1 << 30, tier_emulations=MODELLED)
    assert (result["fast_cache"], result["fast_cache_bytes"], result["fast_cache_policy"]) == ("256M", 256 << 20, "lru")


def test_a_fast_cache_with_tables_on_the_fast_tier_is_refused():
    with pytest.raises(InputError, match=r"fast_cache=1G makes the fast tier a cache of the capacity tier, which "
                                              r"then holds every table: give layout=None \(got layout=C\+O\)"):
        settings(fast_cache="1G")


def test_a_fast_cache_on_real_devices_is_refused_with_what_to_do_instead():
    with pytest.raises(InputError, match="both tiers must have emulation: model .*fast: none, capacity: none.*"
                                              "lvmcache, dm-cache or bcache"):
        validate({**MAKE_TPCH, "layout": "None", "fast_cache": "1G"}, tier_emulations={"fast": "none", "capacity": "none"})


def test_a_fast_cache_larger_than_the_fast_tier_is_refused():
    with pytest.raises(InputError, match=r"fast_cache=2G is larger than the fast tier \(1.00 GiB\)"):
        validate({**MAKE_TPCH, "layout": "None", "fast_cache": "2G"}, fast_tier_bytes=1 << 30, tier_emulations=MODELLED)


@pytest.mark.parametrize(("changes", "said"), [
    ({"fast_cache": "lots"}, "fast_cache='lots' is not allowed"),
    ({"fast_cache": "1G", "fast_cache_policy": "fifo"}, "fast_cache_policy='fifo' is not allowed; allowed: admitting, lru"),
    ({"fast_cache_policy": "fifo"}, "fast_cache_policy='fifo' is not allowed; allowed: admitting, lru"),
])
def test_a_bad_fast_cache_setting_is_refused(changes, said):
    with pytest.raises(InputError, match=re.escape(said)):
        settings(layout="None", **changes)


def test_the_fast_cache_policies_are_the_cost_model_s():
    assert set(FAST_CACHE_POLICIES) == set(cost_model.CACHE_POLICIES)


def recorded(**changes) -> dict:
    """A run's settings as its config/run.json keeps them."""
    return json.loads(json.dumps(settings(**changes)))


def test_a_run_is_resumed_with_the_variables_it_was_started_with():
    assert resume_conflicts(recorded(layout="C+O"), {**MAKE_TPCH, "layout": "C+O", "resume": "20261125T141345Z"}) == {}


def test_a_run_resumed_with_other_variables_names_each_with_its_value_then_and_now():
    assert resume_conflicts(recorded(layout="C+O"), {**MAKE_TPCH, "layout": "None", "tries": "2"}) == {
        "layout": ("C+O", "None"), "tries": (1, 2)}


def test_a_run_of_an_earlier_tierlab_ran_with_the_variables_added_since_left_unset():
    before_fast_cache = {k: v for k, v in recorded(layout="None").items() if not k.startswith("fast_cache")}
    assert resume_conflicts(before_fast_cache, {**MAKE_TPCH, "layout": "None"}) == {}
    assert resume_conflicts(before_fast_cache, {**MAKE_TPCH, "layout": "None", "fast_cache": "64M"}) == {
        "fast_cache": ("none", "64M")}


def test_retrying_failed_tries_is_for_a_run_being_resumed():
    with pytest.raises(InputError, match=r"^retry_failed=true retries the failed tries of a run being resumed: give "
                                         r"resume=RUN_ID too$"):
        settings(retry_failed="true")
    resumed = settings(retry_failed="yes", resume="20261125T141345Z_mariadb_tpch-sf0.1_C+O")
    assert (resumed["retry_failed"], settings()["retry_failed"]) == (True, False)


def test_a_fast_cache_may_be_a_share_of_the_data_as_the_buffer_pool_may():
    result = validate({**MAKE_TPCH, "layout": "None", "fast_cache": "25%", "buffer_pool": "25%"},
                      tier_emulations=MODELLED)
    assert result["fast_cache"] == "25%"
    # a quarter of SF 0.1's estimated 156 MiB of data, in whole MiB
    assert result["fast_cache_bytes"] == buffer_pool_bytes(result) == 39 << 20


def test_a_fast_cache_share_that_comes_to_less_than_a_mib_is_refused_and_a_size_stays_exact():
    with pytest.raises(InputError, match=r"^fast_cache=0.1% is less than 1 MiB of this run's data: give a larger "):
        validate({**MAKE_TPCH, "layout": "None", "fast_cache": "0.1%", "scale_factor": "0.01"},
                 tier_emulations=MODELLED)
    result = validate({**MAKE_TPCH, "layout": "None", "fast_cache": "1536K"}, tier_emulations=MODELLED)
    assert result["fast_cache_bytes"] == 1536 << 10
