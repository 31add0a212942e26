"""The playbooks' strategy (Ansible's linear one run by Mitogen): its cleanup after Ctrl-C ends even when a worker
stopped in the middle of a write left the results queue's lock taken (ansible/ansible#29124)."""

import importlib.util
import multiprocessing
import time
from pathlib import Path

PLUGIN = Path(__file__).resolve().parents[2] / "playbooks" / "strategy_plugins" / "mitogen_linear.py"


def load_plugin():
    spec = importlib.util.spec_from_file_location("tierlab_strategy", PLUGIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_cleanup_whose_results_queue_a_stopped_worker_left_locked_ends_after_its_wait(monkeypatch, capsys):
    plugin = load_plugin()
    monkeypatch.setattr(plugin, "QUEUE_LOCK_WAIT_S", 0.5)
    queue = multiprocessing.SimpleQueue()
    # a worker that took the queue's lock to write and was gone before it let go of it
    worker = multiprocessing.Process(target=queue._wlock.acquire)
    worker.start()
    worker.join(timeout=30)
    strategy = plugin.StrategyModule.__new__(plugin.StrategyModule)
    strategy._final_q = queue
    started = time.monotonic()
    strategy.cleanup()
    assert 0.5 <= time.monotonic() - started < 5
    assert "whose lock is still taken after 0.5 s" in capsys.readouterr().err
