from tierlab.report.run import run_context
from tierlab.runs.manifest import layout_files

# two files of lineitem: its table, half of it stored compressed, and its primary key, stored as it is
EXTENTS = {"files": [
    {"object": "lineitem", "table": "lineitem", "kind": "table", "path": "/t/nand/db/lineitem", "tier": "nand",
     "offset_bytes": 0, "size_bytes": 262144, "device": "7:1",
     "extents": [[0, 1 << 20, 32768], [131072, 2 << 20, 131072]]},
    {"object": "lineitem_pkey", "table": "lineitem", "kind": "index", "path": "/t/nand/db/lineitem_pkey", "tier": "nand",
     "offset_bytes": 0, "size_bytes": 65536, "device": "7:1", "extents": [[0, 3 << 20, 65536]]},
]}


def test_a_table_s_stored_bytes_are_what_its_files_extents_hold_on_the_device():
    lineitem = layout_files({"placement": {"lineitem": "capacity"}}, EXTENTS)["lineitem"]
    assert (lineitem["size_bytes"], lineitem["stored_bytes"]) == (262144 + 65536, 32768 + 131072 + 65536)
    assert [f["stored_bytes"] for f in lineitem["files"]] == [32768 + 131072, 65536]


def test_the_report_says_what_the_data_holds_on_the_devices_against_its_files():
    layout = {"tables": layout_files({"placement": {"lineitem": "capacity"}}, EXTENTS)}
    context = dict(run_context({"layout": layout, "tiers": [{"name": "nand", "role": "capacity", "emulated": True,
                                                              "fs": "btrfs"}]}))
    assert context["data on the devices"] == "0.2 MiB stored for 0.3 MiB of files (70%)"
    assert context["tiers"] == "nand (capacity, emulated, btrfs)"
