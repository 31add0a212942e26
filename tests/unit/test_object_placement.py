"""Placement at the grain of objects: units ranked by saving per byte, the fast tier filled in that order (a unit
that does not fit left out, the next tried), and the placements to replay whole."""

import pytest

from tierlab.errors import InputError
from tierlab.placement.objects import (
    candidates,
    fill,
    parse_placement,
    placement_name,
    postgresql_units,
    ranking,
    savings_s,
    unit_kinds,
)
from tierlab.placement.predict import TracedQuery

MIB = 1 << 20
BYTES = {"app.hot_k": 32 * MIB, "app.hot": 86 * MIB, "app.cold": 70 * MIB, "app.tiny": MIB}


def test_units_are_ranked_by_saving_per_byte_and_those_that_save_nothing_left_out():
    saving = {"app.hot_k": 0.6, "app.hot": 0.9, "app.cold": 0.0, "app.tiny": 0.05}
    assert ranking(saving, BYTES) == ["app.tiny", "app.hot_k", "app.hot"]


def test_the_fast_tier_is_filled_in_rank_order_skipping_a_unit_that_does_not_fit():
    assert fill(["app.hot_k", "app.hot", "app.tiny"], BYTES, 40 * MIB) == frozenset({"app.hot_k", "app.tiny"})


def test_the_placements_replayed_are_every_prefix_and_each_capacity_s_fill():
    order = ["app.hot_k", "app.hot", "app.tiny"]
    assert candidates(order, BYTES, [40 * MIB]) == [
        frozenset({"app.hot_k"}), frozenset({"app.hot_k", "app.hot"}), frozenset({"app.hot_k", "app.hot", "app.tiny"}),
        frozenset({"app.hot_k", "app.tiny"})]


def test_a_placement_is_named_by_its_units_and_none_by_none():
    assert placement_name(frozenset({"b.t", "a.i"})) == "a.i+b.t"
    assert placement_name(frozenset()) == "None"


def test_a_unit_s_kind_is_that_of_its_own_file():
    tables = {"app.public.hot": {"files": [{"object": "app.public.hot.toast", "kind": "toast"},
                                           {"object": "app.public.hot", "kind": "table"}]},
              "app.public.hot_k": {"files": [{"object": "app.public.hot_k", "kind": "index"}]},
              "pg_wal": {"files": [{"object": "pg_wal", "kind": "wal"}]}}
    assert unit_kinds(tables) == {"app.public.hot": "table", "app.public.hot_k": "index", "pg_wal": "wal"}


def test_a_unit_s_saving_is_its_step_time_with_it_alone_on_the_fast_tier_the_logs_staying_put():
    # one step of 10 s, 1 s of it I/O: 100 us modelled with nothing fast, 40 us with app.hot_k fast
    step = TracedQuery("r", "i0001", 2.0, 10.0, 1.0, {"app.hot_k": "capacity", "pg_wal": "capacity"},
                       {frozenset(): 100.0, frozenset({"app.hot_k"}): 40.0, frozenset({"app.hot_k", "pg_wal"}): 30.0}, None)
    assert savings_s([step], ["app.hot_k", "pg_wal"], ["app.hot_k"]) == {"app.hot_k": pytest.approx(2.0 * 0.6)}


def test_a_postgresql_run_s_tables_split_into_each_table_with_its_toast_and_maps_and_each_index_with_its_forks():
    tables = {"orders": {"tier": "fast", "files": [
        {"object": "orders", "kind": "table", "tier": "optane", "size_bytes": 8192, "stored_bytes": 8192},
        {"object": "orders.fsm", "kind": "table", "tier": "optane", "size_bytes": 24576, "stored_bytes": 4096},
        {"object": "orders.toast", "kind": "toast", "tier": "optane", "size_bytes": 0, "stored_bytes": 0},
        {"object": "orders_pkey", "kind": "index", "tier": "optane", "size_bytes": 16384, "stored_bytes": 16384},
        {"object": "orders_pkey.fsm", "kind": "index", "tier": "optane", "size_bytes": 24576, "stored_bytes": 4096},
        {"object": "orders_customer", "kind": "index", "tier": "nand", "size_bytes": 40960, "stored_bytes": 40960}]}}
    units = postgresql_units(tables, {"optane": "fast", "nand": "capacity"})
    assert {u: ([f["object"] for f in v["files"]], v["tier"], v["size_bytes"], v["stored_bytes"])
            for u, v in units.items()} == {
        "orders": (["orders", "orders.fsm", "orders.toast"], "fast", 32768, 12288),
        "orders_pkey": (["orders_pkey", "orders_pkey.fsm"], "fast", 40960, 20480),
        "orders_customer": (["orders_customer"], "capacity", 40960, 40960)}
    assert unit_kinds(units) == {"orders": "table", "orders_pkey": "index", "orders_customer": "index"}


def test_a_placement_to_start_from_names_units_joined_by_plus_or_none():
    units = {"orders": {}, "orders_pkey": {}}
    assert parse_placement("orders_pkey+orders", units) == frozenset({"orders", "orders_pkey"})
    assert parse_placement("None", units) == frozenset()
    with pytest.raises(InputError, match="--from-layout 'O': 'O' is not a unit of these runs; give units joined by "
                                         r"\+ \(or None\) from: orders, orders_pkey"):
        parse_placement("O", units)
