"""An iterator whose next items are produced on a thread of their own."""

import queue
import threading


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
