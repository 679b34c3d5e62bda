"""glm.fleet.hf_snapshot's action plugin: how it splits a fetch into module runs."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ansible_collections.glm.fleet.plugins.action.hf_snapshot import ActionModule, batches, snapshot_diff


def test_batches_group_small_files_and_keep_big_ones_alone() -> None:
    gib = 1024**3
    items = [{"size": 10}, {"size": 20}, {"size": 5 * gib}, {"size": 5 * gib}, {"size": 1}]
    assert [len(b) for b in batches(items)] == [3, 2]  # the last small file rides with the shard before it
    shards = [{"size": 5 * gib} for _shard in range(3)]
    assert [len(b) for b in batches([*shards, {"size": gib // 2}])] == [1, 1, 1, 1]


def test_a_repository_of_about_one_batch_is_one_module_run() -> None:
    # The lab's 1 GB repository: two small files, four 256 MiB shards, three small files after them.
    small = [{"size": 300}, {"size": 60}]
    shards = [{"size": 256 * 1024**2 + 152} for _shard in range(4)]
    tail = [{"size": 381}, {"size": 1_774_213}, {"size": 72}]
    assert [len(b) for b in batches(small + shards + tail)] == [9]


class Steps(ActionModule):
    """The action with its module runs replaced by answers from a table, each run recorded."""

    def __init__(self, plan: dict, check_mode: bool = False, diff: bool = False) -> None:  # only fetch() runs
        self.plan, self.runs = plan, []
        self._task = SimpleNamespace(check_mode=check_mode)
        self._play_context = SimpleNamespace(diff=diff)

    def step(self, args: dict, task_vars: dict, **extra: Any) -> dict:
        del args, task_vars
        self.runs.append({k: v for k, v in extra.items() if k != "manifest"})
        if extra["step"] == "plan":
            return self.plan
        final = {"changed": True, "manifest_file": "/m", "manifest_sha256": "f" * 64}
        if extra["step"] == "fetch":
            fetched = [{"bytes": 10, "stalls": 0, "corrupt": 0} for _path in extra["files"]]
            return {"fetched": fetched, **(final if extra["finalize"] else {"changed": True})}
        return final


def plan(to_fetch: list[dict], recorded: bool = False) -> dict:
    return {
        "snapshot": "/s", "files": 3, "total_bytes": 30, "to_fetch": to_fetch, "manifest": {},
        "free_bytes": 10 * 1024**4, "recorded": recorded, "manifest_file": "/m", "manifest_sha256": "e" * 64,
    }  # fmt: skip


def test_a_complete_recorded_snapshot_costs_the_plan_alone() -> None:
    action = Steps(plan([], recorded=True))
    result = action.fetch({}, {}, {})
    assert action.runs == [{"step": "plan"}]
    assert result["changed"] is False
    assert result["manifest_sha256"] == "e" * 64


def test_the_last_fetch_verifies_and_records_in_its_own_module_run() -> None:
    gib = 1024**3
    action = Steps(plan([{"path": "a", "size": gib}, {"path": "b", "size": gib}]))
    result = action.fetch({}, {}, {})
    assert action.runs == [
        {"step": "plan"},
        {"step": "fetch", "files": ["a"], "finalize": False},
        {"step": "fetch", "files": ["b"], "finalize": True},
    ]
    assert result["changed"] is True
    assert result["manifest_sha256"] == "f" * 64


def test_nothing_to_fetch_but_records_to_write_runs_finalize() -> None:
    action = Steps(plan([], recorded=False))
    result = action.fetch({}, {}, {})
    assert action.runs == [{"step": "plan"}, {"step": "finalize"}]
    assert result["manifest_sha256"] == "f" * 64


def test_check_mode_runs_the_plan_alone() -> None:
    action = Steps(plan([{"path": "a", "size": 10}]), check_mode=True)
    result = action.fetch({}, {}, {})
    assert action.runs == [{"step": "plan"}]
    assert result["changed"] is True
    assert "diff" not in result
    with_diff = Steps(plan([{"path": "a", "size": 10, "reason": "missing"}]), check_mode=True, diff=True)
    assert with_diff.fetch({}, {}, {})["diff"]["before"] == "a: missing\n"


def test_the_diff_names_each_file_to_fetch_and_why() -> None:
    planned = {"snapshot": "/hf/snapshots/eb9e", "to_fetch": [
        {"path": "model-00001.safetensors", "size": 5 * 1024**3, "reason": "missing"},
        {"path": "config.json", "size": 10, "reason": "sha256 differs from the manifest"}]}  # fmt: skip
    diff = snapshot_diff(planned)
    assert diff["before"] == "model-00001.safetensors: missing\nconfig.json: sha256 differs from the manifest\n"
    assert diff["after"].splitlines() == [
        "model-00001.safetensors: 5.0 GiB, verified against the manifest",
        "config.json: 10 B, verified against the manifest",
    ]
