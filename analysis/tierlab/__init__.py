"""tierlab: block-trace analysis of database workloads on tiered storage (controller side)."""

__all__ = ["Run", "analyze", "load_run"]


def __getattr__(name: str):
    # run_io imports pandas and the compiled metrics (about a second); the playbooks' filters import
    # tierlab.run_settings in every task's worker process and need none of it
    if name in __all__:
        from . import run_io
        return getattr(run_io, name)
    raise AttributeError(f"module 'tierlab' has no attribute {name!r}")
