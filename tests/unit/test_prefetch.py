"""Work handed between threads: nothing lost, nothing reordered, and a failure reaches the caller."""

import pytest

from tierlab.traces.prefetch import prefetched, sink_on_thread


def test_prefetched_items_come_in_order():
    assert list(prefetched(iter(range(100)))) == list(range(100))


def test_a_sink_on_a_thread_has_every_item_in_order_when_the_caller_leaves():
    got = []
    with sink_on_thread(got.append) as sink:
        for item in range(100):
            sink(item)
    assert got == list(range(100))


def test_the_error_of_a_sink_on_a_thread_is_raised_to_the_caller():
    def sink(item):
        if item == 3:
            raise ValueError("item 3 is bad")

    with pytest.raises(ValueError, match="item 3 is bad"):
        with sink_on_thread(sink) as put:
            for item in range(10):
                put(item)
