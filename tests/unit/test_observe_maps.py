"""An observation's two extent maps, taken before its first interval and after its last, made one: what either map
gives an object is attributed to it, sectors the two maps give to different objects to neither, and every object
whose extents changed is listed with how."""

from tierlab_host.observe import merge_maps

MIB = 1 << 20


def entry(obj: str, extents: list[list[int]], path: str = "", offset: int = 0) -> dict:
    return {"object": obj, "table": obj, "path": path or f"/d/{obj}", "offset_bytes": offset, "device": "7:0",
            "extents": extents}


def extents_of(files: list[dict]) -> dict[str, list[list[int]]]:
    return {f["object"]: f["extents"] for f in files}


def test_objects_whose_extents_did_not_change_are_mapped_as_they_were_and_not_listed():
    start = [entry("a", [[0, 10 * MIB, MIB]]), entry("b", [[0, 20 * MIB, MIB]])]
    files, changed = merge_maps(start, [dict(f) for f in start])
    assert extents_of(files) == {"a": [[0, 10 * MIB, MIB]], "b": [[0, 20 * MIB, MIB]]}
    assert changed == []


def test_a_file_grown_in_place_keeps_its_whole_extent_and_is_listed_as_grown():
    files, changed = merge_maps([entry("a", [[0, 10 * MIB, MIB]])], [entry("a", [[0, 10 * MIB, 3 * MIB]])])
    assert extents_of(files) == {"a": [[0, 10 * MIB, 3 * MIB]]}
    assert changed == [{"object": "a", "change": "grew", "bytes_before": MIB, "bytes_after": 3 * MIB,
                        "ambiguous_bytes": 0}]


def test_an_object_dropped_during_the_window_keeps_the_extents_it_had_and_is_listed_as_dropped():
    files, changed = merge_maps([entry("a", [[0, 10 * MIB, MIB]]), entry("gone", [[0, 30 * MIB, MIB]])],
                                [entry("a", [[0, 10 * MIB, MIB]])])
    assert extents_of(files)["gone"] == [[0, 30 * MIB, MIB]]
    assert [(c["object"], c["change"]) for c in changed] == [("gone", "dropped")]


def test_an_object_created_during_the_window_is_mapped_from_the_last_map():
    files, changed = merge_maps([], [entry("new", [[0, 40 * MIB, MIB]])])
    assert extents_of(files) == {"new": [[0, 40 * MIB, MIB]]}
    assert [(c["object"], c["change"]) for c in changed] == [("new", "created")]


def test_space_a_dropped_object_left_and_another_took_is_attributed_to_neither():
    start = [entry("old", [[0, 50 * MIB, 2 * MIB]]), entry("a", [[0, 10 * MIB, MIB]])]
    end = [entry("taker", [[0, 51 * MIB, 2 * MIB]]), entry("a", [[0, 10 * MIB, MIB]])]
    files, changed = merge_maps(start, end)
    assert extents_of(files) == {"old": [], "taker": [], "a": [[0, 10 * MIB, MIB]]}
    assert {c["object"]: (c["change"], c["ambiguous_bytes"]) for c in changed} == {
        "old": ("ambiguous", 2 * MIB), "taker": ("ambiguous", 2 * MIB)}


def test_a_file_moved_elsewhere_on_the_disk_is_mapped_at_both_places_and_listed_as_moved():
    files, changed = merge_maps([entry("a", [[0, 10 * MIB, MIB]])], [entry("a", [[0, 60 * MIB, MIB]])])
    assert extents_of(files) == {"a": [[0, 10 * MIB, MIB], [0, 60 * MIB, MIB]]}
    assert [(c["object"], c["change"]) for c in changed] == [("a", "moved")]


def test_space_three_objects_held_over_the_window_is_attributed_to_none_of_them():
    start = [entry("old", [[0, 50 * MIB, 2 * MIB]])]
    end = [entry("taker", [[0, 51 * MIB, 2 * MIB]]), entry("third", [[0, 52 * MIB, 2 * MIB]])]
    files, changed = merge_maps(start, end)
    assert extents_of(files) == {"old": [], "taker": [], "third": []}
    assert sorted(c["object"] for c in changed if c["change"] == "ambiguous") == ["old", "taker", "third"]
