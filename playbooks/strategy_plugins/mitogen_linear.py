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
`taskset -c 1 yes`; 0.45 s and 0.36-0.43 s unpinned). Its base policy pins nothing."""

import ansible_mitogen.affinity
from ansible.utils.display import Display
from ansible_mitogen.plugins.strategy.mitogen_linear import StrategyModule as MitogenLinear

# a worker holds the lock for the microseconds of one write
QUEUE_LOCK_WAIT_S = 10

display = Display()

ansible_mitogen.affinity.policy = ansible_mitogen.affinity.Policy()


class StrategyModule(MitogenLinear):
    def cleanup(self):
        lock = self._final_q._wlock
        if lock.acquire(timeout=QUEUE_LOCK_WAIT_S):
            lock.release()
            super().cleanup()
            return
        # the results thread, left waiting on the queue, is a daemon thread: it ends with the process
        display.warning(f"a worker stopped while writing to the results queue, whose lock is still taken after "
                        f"{QUEUE_LOCK_WAIT_S} s: ending without waiting for the results thread")
