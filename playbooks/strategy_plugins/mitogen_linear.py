"""Ansible's linear strategy run by Mitogen (the mitogen package): each host keeps one Python interpreter that
runs every module, instead of a new Python per task, which cost each task about half a second on a two-core host
and made a run's fixed cost a minute.

On Ctrl-C (or SIGTERM) Ansible passes the signal on to its worker, which dies at once; a worker that was writing
to the results queue then leaves the queue's lock taken for ever, and the strategy's cleanup, which writes to that
queue, waits on it: ansible-playbook said "User interrupted execution" and hung (ansible/ansible#29124; about one
Ctrl-C in four during a load here). The cleanup here waits for the lock a while, then lets the process end without
it.

Mitogen also pins the processes it starts to CPUs of its choosing: on a host of two or three CPUs, every one of
them to every CPU but CPU 0, which its multiplexer keeps. Everything a run starts (the emulators, the database
server, the query client, the generators) then shared CPU 1 of two, and beside a CPU-bound process there each
wake-up waited for its turn (5,000 reads of the emulated nand device in a row: 0.93 s idle, 13.6 s beside
`taskset -c 1 yes`; 0.45 s and 0.36-0.43 s unpinned). Its base policy pins nothing.

And Mitogen's planner lists every installed collection's directory (the ansible package bundles about a hundred,
each read from its meta/runtime.yml) the first time a worker runs a module from a collection. Ansible forks a new
worker for every task, so each such task paid for the whole list again: 0.25 s a task, 2.3 s of a run's 27 s
here. The list is made once, in the controller before a play forks its workers, which inherit it."""

import ansible.collections.list
import ansible_mitogen.affinity
import ansible_mitogen.planner
from ansible.utils.display import Display
from ansible_mitogen.plugins.strategy.mitogen_linear import StrategyModule as MitogenLinear

# a worker holds the lock for the microseconds of one write
QUEUE_LOCK_WAIT_S = 10

display = Display()

ansible_mitogen.affinity.policy = ansible_mitogen.affinity.Policy()

COLLECTION_DIRS: list[str] = []


def _load_collections(invocation):
    invocation._extra_sys_paths.update(COLLECTION_DIRS)


ansible_mitogen.planner._load_collections = _load_collections


class StrategyModule(MitogenLinear):
    def run(self, iterator, play_context):
        if not COLLECTION_DIRS:
            COLLECTION_DIRS.extend(path.decode() for path in ansible.collections.list.list_collection_dirs())
        return super().run(iterator, play_context)

    def cleanup(self):
        lock = self._final_q._wlock
        if lock.acquire(timeout=QUEUE_LOCK_WAIT_S):
            lock.release()
            super().cleanup()
            return
        # the results thread, left waiting on the queue, is a daemon thread: it ends with the process
        display.warning(f"a worker stopped while writing to the results queue, whose lock is still taken after "
                        f"{QUEUE_LOCK_WAIT_S} s: ending without waiting for the results thread")
