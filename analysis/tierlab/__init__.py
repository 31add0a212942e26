"""tierlab: block-trace analysis of database workloads on tiered storage (controller side)."""

__all__ = ["Run", "analyze", "load_run"]


def __getattr__(name: str):
    # these import pandas and the compiled metrics (about a second); the playbooks' filters import
    # tierlab.runs.settings in every task's worker process and need none of it
    if name == "analyze":
        from .runs.analyze import analyze
        return analyze
    if name in __all__:
        from .runs import results
        return getattr(results, name)
    raise AttributeError(f"module 'tierlab' has no attribute {name!r}")
