"""Mitogen for Ansible's linear strategy, loaded from the `mitogen` package that requirements.txt pins.

ansible.cfg names this directory in `strategy_plugins`, so the strategy resolves from a checkout
whatever the virtual environment's path is. Mitogen keeps one Python interpreter per host for the
whole run and sends modules to it, instead of an SSH command and a fresh interpreter per task and
host; see docs/benchmarks.md for what that changes. `ANSIBLE_STRATEGY=linear` runs without it.

One change to it: Mitogen looks up every installed collection's directory (a walk of the
collection paths that reads each collection's metadata) in each task's worker that runs a
collection's module, and a worker is a fresh fork, so nothing it learns is kept. With the `ansible`
package's hundred collections installed that was half of a worker's time on a no-op rerun. The
directories cannot change during a run: they are looked up once, in the controller's process
before it forks workers, and every worker inherits the list.
"""

from __future__ import annotations

from typing import Any

import ansible.collections.list
import ansible_mitogen.planner
from ansible_mitogen.plugins.strategy.mitogen_linear import StrategyModule as MitogenLinear

__all__ = ["StrategyModule"]

_collection_dirs: list[str] | None = None


def collection_dirs() -> list[str]:
    """The installed collections' directories, looked up on the first call."""
    global _collection_dirs  # noqa: PLW0603 - one lookup per run, inherited by the forked workers
    if _collection_dirs is None:
        _collection_dirs = [path.decode("utf-8") for path in ansible.collections.list.list_collection_dirs()]
    return _collection_dirs


def load_collections(invocation: Any) -> None:
    """ansible_mitogen.planner._load_collections, from the list looked up once."""
    invocation._extra_sys_paths.update(collection_dirs())


ansible_mitogen.planner._load_collections = load_collections


class StrategyModule(MitogenLinear):
    def run(self, iterator: Any, play_context: Any) -> Any:
        collection_dirs()  # in this process, before any worker forks
        return super().run(iterator, play_context)
