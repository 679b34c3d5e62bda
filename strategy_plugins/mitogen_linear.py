"""Mitogen for Ansible's linear strategy, loaded from the `mitogen` package that requirements.txt pins.

ansible.cfg names this directory in `strategy_plugins`, so the strategy resolves from a checkout
whatever the virtual environment's path is. Mitogen keeps one Python interpreter per host for the
whole run and sends modules to it, instead of an SSH command and a fresh interpreter per task and
host; see docs/benchmarks.md for what that changes. `ANSIBLE_STRATEGY=linear` runs without it.

Two changes to it. Mitogen looks up every installed collection's directory (a walk of the
collection paths that reads each collection's metadata) in each task's worker that runs a
collection's module, and a worker is a fresh fork, so nothing it learns is kept. With the `ansible`
package's hundred collections installed that was half of a worker's time on a no-op rerun. The
directories cannot change during a run: they are looked up once, in the controller's process
before it forks workers, and every worker inherits the list.

And before it queues a task for a host, Mitogen looks up the task's module, action and connection
plugins in the controller's process, so that the forked worker inherits the loaders' caches warm.
It does so for every host: the controller's one thread, which queues the hosts one after the other,
spent about 6 ms per task and host on lookups that only the first host of a task needs (py-spy, a
no-op rerun of 8 GPU nodes). The lookups are made once per action and connection.
"""

from __future__ import annotations

from typing import Any

import ansible.collections.list
import ansible_mitogen.planner
from ansible_mitogen.plugins.strategy.mitogen_linear import StrategyModule as MitogenLinear
from ansible_mitogen.strategy import StrategyMixin

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


_warmed: set[tuple[str, object]] = set()


class StrategyModule(MitogenLinear):
    def run(self, iterator: Any, play_context: Any) -> Any:
        collection_dirs()  # in this process, before any worker forks
        return super().run(iterator, play_context)

    def _queue_task(self, host: Any, task: Any, task_vars: dict, play_context: Any) -> Any:
        """Mitogen's _queue_task, whose plugin lookups run once per action and connection."""
        key = (task.action, play_context.connection)
        if key not in _warmed:
            _warmed.add(key)
            return super()._queue_task(host, task, task_vars, play_context)
        # Ansible's own _queue_task, after Mitogen's in the method resolution order.
        return super(StrategyMixin, self)._queue_task(host, task, task_vars, play_context)
