"""glm.fleet.hf_snapshot's action plugin: how it splits a fetch into module runs."""

from __future__ import annotations

from ansible_collections.glm.fleet.plugins.action.hf_snapshot import batches


def test_batches_group_small_files_and_keep_big_ones_alone() -> None:
    gib = 1024**3
    items = [{"size": 10}, {"size": 20}, {"size": 5 * gib}, {"size": 5 * gib}, {"size": 1}]
    assert [len(b) for b in batches(items)] == [3, 1, 1]
