"""Ansible's linear strategy run by Mitogen (the mitogen package): each host keeps one Python interpreter that
runs every module, instead of a new Python per task, which cost each task about half a second on a two-core host
and made a run's fixed cost a minute."""

from ansible_mitogen.plugins.strategy.mitogen_linear import StrategyModule

__all__ = ["StrategyModule"]
