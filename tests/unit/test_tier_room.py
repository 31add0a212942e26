"""Which other databases move off a tier that lacks room for a run's layout."""

import json
from pathlib import Path

import pytest

from tierlab_host import record
from tierlab_host.system import HostError
from tierlab_host.tier_room import Holding, _holdings, evictions, note_use, uses

MIB = 2**20


def holding(instance: str, database: str, mib: int, used_at: float = 0.0) -> Holding:
    return Holding({"instance": instance}, database, ("sbtest1",), mib * MIB, used_at)


# E4's page-size sweep with every table on the fast tier: the 4k and 8k points' databases are there
SWEEP = [holding("mariadb-4k", "sysbench_8x1000000", 2100), holding("mariadb-8k", "sysbench_8x1000000", 2200),
         holding("mariadb-16k", "tpch_sf0_1", 40)]


def test_a_tier_that_lacks_nothing_moves_nothing_off():
    assert evictions(0, SWEEP) == []


def test_the_largest_database_moves_off_first_and_only_as_many_as_make_the_room():
    assert evictions(1500 * MIB, SWEEP) == [SWEEP[1]]


def test_a_room_one_database_cannot_make_takes_the_next_largest_too():
    assert evictions(2300 * MIB, SWEEP) == [SWEEP[1], SWEEP[0]]


def test_the_database_a_run_used_least_recently_moves_off_first_whatever_its_size():
    # E4's page-size sweep at its first MySQL point with every table on the fast tier: MariaDB's databases are
    # those of a finished loop, and the mysql-8k database used a minute ago is the next point's
    used = [holding("mariadb-64k", "sysbench_8x1000000", 2000, used_at=1000.0),
            holding("mysql-8k", "sysbench_8x1000000", 2200, used_at=5000.0),
            holding("mariadb-16k", "sysbench_8x1000000", 1900, used_at=900.0)]
    assert evictions(2500 * MIB, used) == [used[2], used[0]]


def test_a_database_with_no_recorded_use_counts_as_used_longest_ago(tmp_path):
    note_use(tmp_path, "sysbench_8x1000000", 5000.0)
    note_use(tmp_path, "tpch_sf1", 6000.0)
    note_use(tmp_path, "sysbench_8x1000000", 7000.0)
    assert uses(tmp_path) == {"sysbench_8x1000000": 7000.0, "tpch_sf1": 6000.0}
    assert uses(tmp_path / "never-used") == {}
    old = [holding("mariadb-16k", "sysbench_8x1000000", 100, used_at=7000.0), holding("mariadb-16k", "ssb_sf1", 50)]
    assert evictions(10 * MIB, old) == [old[1]]


def test_equal_sizes_move_off_in_the_order_of_their_instances_and_databases():
    twins = [holding("mysql-4k", "b", 100), holding("mariadb-4k", "b", 100), holding("mariadb-4k", "a", 100)]
    assert evictions(150 * MIB, twins) == [twins[2], twins[1]]


def test_a_room_all_of_them_cannot_make_is_refused_naming_what_they_hold_and_moves_nothing():
    with pytest.raises(HostError) as err:
        evictions(5000 * MIB, SWEEP)
    assert str(err.value) == ("the other databases tierlab made hold only 4340.0 MiB there "
                              "(mariadb-8k/sysbench_8x1000000 2200.0 MiB, mariadb-4k/sysbench_8x1000000 2100.0 MiB, "
                              "mariadb-16k/tpch_sf0_1 40.0 MiB), and the layout lacks 5000.0 MiB")


def test_no_other_database_on_the_tier_is_refused_as_holding_nothing():
    with pytest.raises(HostError) as err:
        evictions(MIB, [])
    assert str(err.value) == ("the other databases tierlab made hold only 0.0 MiB there (nothing), and the layout "
                              "lacks 1.0 MiB")


def instance(instances, name: str, tiers) -> dict:
    """An instance's engine spec as the mysql role writes it, its server a program that does not exist: starting
    it fails the test."""
    spec = {"name": "mariadb", "instance": name, "server": str(tiers / "no-such-server"), "chroot": "",
            "defaults_file": str(instances / name / "my.cnf"), "client_file": str(instances / name / "client.cnf"),
            "port": 3999, "log_file": str(instances / name / "mysqld.log"), "stop_signals": ["SIGTERM"],
            "tier_dirs": {role: str(tiers / role / name / "tables") for role in ("fast", "capacity")}}
    (instances / name).mkdir(parents=True)
    (instances / name / "engine.json").write_text(json.dumps(spec))
    return spec


def test_an_instance_with_no_file_on_the_tier_is_neither_asked_nor_started(tmp_path, monkeypatch):
    """Teardown keeps the instances' directories, and tiers brought up again are empty: E4's resumed sweep found
    mariadb-4k's directory with its data gone, and starting it failed the run."""
    monkeypatch.setattr(record, "STATE_DIR", tmp_path / "state")
    monkeypatch.setattr(record, "RECORD_PATH", tmp_path / "state" / "created.json")
    instances, tiers = tmp_path / "instances", tmp_path / "tiers"
    gone = instance(instances, "mariadb-4k", tiers)
    instance(instances, "mariadb-8k", tiers)
    Path(gone["tier_dirs"]["capacity"], "sysbench_8x1000000").mkdir(parents=True)
    Path(gone["tier_dirs"]["capacity"], "sysbench_8x1000000", "sbtest1.ibd").write_bytes(bytes(16384))
    assert _holdings(str(instances), "fast") == []
