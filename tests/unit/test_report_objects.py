"""Where a run's I/O time goes, object by object: summed over its steps, a step's tries by their median; and the
capacity tier's objects that hold the most of it per GiB."""

from object_frames import CAPACITY, GIB, SIZED, TWO_STEPS, metrics

from tierlab.report.objects import capacity_candidates, object_io, object_sizes


def test_objects_are_ranked_by_their_io_time_summed_over_the_steps_with_the_requests_of_no_object_last():
    objects = object_io(TWO_STEPS, {})
    assert objects[["object", "tier", "io_time_s", "share_pct", "steps"]].values.tolist() == [
        ["lineitem", "nand", 5.0, 50.0, 2], ["orders", "optane", 3.0, 30.0, 2], ["customer", "optane", 1.0, 10.0, 1],
        ["other", "nand", 1.0, 10.0, 1]]


def test_a_step_counts_the_median_of_its_tries_a_try_without_the_object_counting_zero():
    objects = object_io(metrics(("q1", 1, "lineitem", "nand", 1.0), ("q1", 2, "lineitem", "nand", 2.0),
                                ("q1", 3, "lineitem", "nand", 9.0), ("q1", 3, "orders", "optane", 3.0)), {})
    assert objects[["object", "io_time_s", "read_requests"]].values.tolist() == [["lineitem", 2.0, 10.0],
                                                                                 ["orders", 0.0, 0.0]]


def test_an_object_s_sequential_share_is_over_the_pages_it_read_in_every_step():
    objects = object_io(metrics(("q1", 1, "lineitem", "nand", 1.0, 100, 100.0, "3 sequential"),
                                ("q2", 1, "lineitem", "nand", 1.0, 300, 0.0, "2 random")), {})
    assert objects[["read_pages", "sequential_pct"]].values.tolist() == [[400, 25.0]]


def test_an_object_s_pattern_is_the_category_of_the_steps_that_hold_most_of_its_io_time():
    objects = object_io(metrics(("q1", 1, "lineitem", "nand", 3.0, 100, 0.0, "1 random repeated"),
                                ("q2", 1, "lineitem", "nand", 1.0, 100, 100.0, "3 sequential")), {})
    assert objects[["pattern", "pattern_pct"]].values.tolist() == [["random repeated", 75.0]]


def test_an_object_s_size_sums_its_files_and_is_unknown_where_one_file_s_is():
    sizes = object_sizes({"tables": {
        "lineitem": {"files": [{"object": "lineitem", "size_bytes": GIB}, {"object": "lineitem", "size_bytes": GIB},
                               {"object": "l_idx", "size_bytes": 2**20}]},
        "orders": {"files": [{"object": "orders", "size_bytes": 2**20}, {"object": "orders", "size_bytes": None}]},
        "nation": {"size_bytes": 4096}}})
    assert sizes == {"lineitem": 2 * GIB, "l_idx": 2**20, "nation": 4096}


def test_the_candidates_are_the_capacity_tier_s_objects_by_io_time_per_gib_those_of_unknown_size_last():
    candidates = capacity_candidates(object_io(CAPACITY, SIZED), {"nand"}, SIZED)
    assert candidates[["object", "io_time_s", "share_pct"]].values.tolist() == [
        ["partsupp", 2.0, 20.0], ["lineitem", 6.0, 60.0], ["part", 1.0, 10.0]]
    assert candidates["io_s_per_gib"].tolist()[:2] == [8.0, 6.0] and candidates["io_s_per_gib"].isna().tolist()[2]


def test_an_object_under_one_percent_of_the_io_time_is_no_candidate():
    candidates = capacity_candidates(object_io(CAPACITY, SIZED), {"nand"}, SIZED)
    assert "nation" not in candidates["object"].tolist()
