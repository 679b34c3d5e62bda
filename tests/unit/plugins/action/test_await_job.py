"""glm.fleet.await_job's action plugin: how the wait tells a running pull from a finished or killed one."""

from __future__ import annotations

import pytest

from ansible_collections.glm.fleet.plugins.action.await_job import observe, outcome
from ansible_collections.glm.fleet.plugins.module_utils import _detach

RUNNING = {"state": "running", "pid": 10, "start_ticks": 500, "reference": "r"}
STAT = "10 (python3) S " + " ".join(["0"] * 18) + " 500 0"


@pytest.mark.parametrize(
    ("job", "stat_text", "expected"),
    [
        (RUNNING, STAT, None),
        (RUNNING, None, "ended without a result: it was killed or the host rebooted"),
        (RUNNING, STAT.replace(" 500 ", " 501 "), "ended without a result"),
        ({**RUNNING, "state": "failed", "msg": "unauthorized"}, None, "pull x: unauthorized"),
    ],
)
def test_the_wait_tells_running_from_ended(job: dict, stat_text: str | None, expected: str | None) -> None:
    assert _detach.parse_start_ticks(STAT) == 500
    ended = outcome(job, stat_text, "pull x", "/var/lib/job.json")
    if expected is None:
        assert ended is None
    else:
        assert ended is not None
        assert ended["failed"]
        assert expected in ended["msg"]


def test_a_finished_job_returns_its_result() -> None:
    job = {**RUNNING, "state": "done", "result": {"image_id": "sha256:1", "repo_digests": ["a@sha256:2"]}}
    ended = outcome(job, None, "pull x", "/f")
    assert ended == {"changed": True, "pulled": True, "job": RUNNING | {"state": "done"},
                     "image_id": "sha256:1", "repo_digests": ["a@sha256:2"]}  # fmt: skip


def test_a_result_written_while_the_worker_exits_is_not_taken_for_a_killed_worker() -> None:
    """The wait reads the job (running), the worker writes its result and exits, the wait finds the
    pid gone: it reads the job again and returns the result."""
    done = {**RUNNING, "state": "done", "result": {"image_id": "sha256:1"}}
    reads = iter([RUNNING, done])
    job, stat = observe(lambda: next(reads), lambda _pid: None)
    assert (job, stat) == (done, None)
    assert outcome(job, stat, "pull x", "/f")["image_id"] == "sha256:1"


def test_a_worker_gone_with_the_job_still_running_is_gone() -> None:
    job, stat = observe(lambda: RUNNING, lambda _pid: None)
    ended = outcome(job, stat, "pull x", "/f")
    assert ended is not None
    assert "ended without a result" in ended["msg"]
    assert observe(lambda: RUNNING, lambda _pid: STAT) == (RUNNING, STAT)  # alive: read once
