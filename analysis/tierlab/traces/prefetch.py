"""Work handed between threads: an iterator whose next items are produced on a thread of their own, and a
sink whose items are consumed on one."""

import queue
import threading
from contextlib import contextmanager

_END = object()


def prefetched(items, depth: int = 2):
    """The items of an iterator, produced by a worker thread while the caller works on the
    previous ones (numpy and compiled code let go of the interpreter lock); at most `depth`
    wait. The worker's exceptions are raised here; closing this generator stops the worker."""
    handover: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                handover.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def work():
        try:
            for item in items:
                if not put(("item", item)):
                    return
            put(("end", None))
        except BaseException as error:  # handed to the caller, who raises it
            put(("error", error))

    worker = threading.Thread(target=work, name="tierlab-prefetch", daemon=True)
    worker.start()
    try:
        while True:
            kind, item = handover.get()
            if kind == "end":
                return
            if kind == "error":
                raise item
            yield item
    finally:
        stop.set()
        worker.join()


@contextmanager
def sink_on_thread(sink, depth: int = 2):
    """A sink (a callable given items one by one) that works on a thread of its own, so that the caller
    makes the next item meanwhile; at most `depth` wait. The sink's exception is raised at the next call or
    on leaving, which waits until the sink has had every item."""
    handover: queue.Queue = queue.Queue(maxsize=depth)
    failed: list[BaseException] = []

    def work():
        while (item := handover.get()) is not _END:
            if failed:
                continue
            try:
                sink(item)
            except BaseException as error:  # raised on the caller's side
                failed.append(error)

    def put(item) -> None:
        if failed:
            raise failed[0]
        handover.put(item)

    worker = threading.Thread(target=work, name="tierlab-sink", daemon=True)
    worker.start()
    try:
        yield put
    finally:
        handover.put(_END)
        worker.join()
    if failed:
        raise failed[0]
