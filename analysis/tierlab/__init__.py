"""tierlab: block-trace analysis of database workloads on tiered storage (controller side)."""

from .run_io import Run, analyze, load_run

__all__ = ["Run", "analyze", "load_run"]
