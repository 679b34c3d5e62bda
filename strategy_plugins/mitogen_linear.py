"""Mitogen for Ansible's linear strategy, loaded from the `mitogen` package that requirements.txt pins.

ansible.cfg names this directory in `strategy_plugins`, so the strategy resolves from a checkout
whatever the virtual environment's path is. Mitogen keeps one Python interpreter per host for the
whole run and sends modules to it, instead of an SSH command and a fresh interpreter per task and
host; see docs/benchmarks.md for what that changes. `ANSIBLE_STRATEGY=linear` runs without it.
"""

from ansible_mitogen.plugins.strategy.mitogen_linear import StrategyModule

__all__ = ["StrategyModule"]
