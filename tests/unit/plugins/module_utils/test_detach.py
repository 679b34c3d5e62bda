"""Detached jobs: the worker outlives its caller in its own session, records itself and its end,
and a reader tells a live worker from a dead one (pid reuse included)."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

from ansible_collections.glm.fleet.plugins.module_utils import _detach


def wait_for(job_file: Path, state: str, timeout: float = 10) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = _detach.read_json(str(job_file))
        if job and job.get("state") == state:
            return job
        time.sleep(0.05)
    raise AssertionError(f"{job_file} never reached {state}: {_detach.read_json(str(job_file))}")


def test_a_worker_runs_detached_and_records_its_result(tmp_path: Path) -> None:
    job_file = tmp_path / "state" / "job.json"
    gate = tmp_path / "go"

    def work(record: dict) -> dict:
        while not gate.exists():
            time.sleep(0.02)
        return {"pid_seen": os.getpid(), "sid": os.getsid(0), "reference": record["reference"]}

    first = _detach.spawn(str(job_file), {"reference": "r"}, work)
    assert first["state"] == "running"
    assert first["pid"] != os.getpid()
    assert _detach.alive(first)
    assert stat.S_IMODE(job_file.stat().st_mode) == 0o600
    assert json.loads(job_file.read_text())["pid"] == first["pid"]
    gate.touch()
    done = wait_for(job_file, "done")
    assert done["result"]["pid_seen"] == first["pid"]
    # a session of its own, which it does not lead: it can never get a controlling terminal
    assert done["result"]["sid"] not in (os.getsid(0), first["pid"])
    assert done["result"]["reference"] == "r"
    deadline = time.monotonic() + 5
    while _detach.alive(first) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _detach.alive(first)


def test_a_failing_job_records_the_error(tmp_path: Path) -> None:
    job_file = tmp_path / "job.json"

    def work(record: dict) -> dict:
        raise OSError("No space left on device: /var/lib/docker")

    _detach.spawn(str(job_file), {"reference": "r"}, work)
    failed = wait_for(job_file, "failed")
    assert failed["msg"] == "No space left on device: /var/lib/docker"
    assert "result" not in failed


def test_a_reused_pid_is_not_the_worker() -> None:
    me = {"pid": os.getpid(), "start_ticks": _detach.start_ticks(os.getpid())}
    assert _detach.alive(me)
    assert not _detach.alive({**me, "start_ticks": me["start_ticks"] + 1})
    assert not _detach.alive({"pid": 2**22 + 7, "start_ticks": 1})
    assert not _detach.alive({"pid": "1", "start_ticks": 1})


def test_start_ticks_are_read_after_a_command_name_with_parentheses() -> None:
    fields = " ".join(str(n) for n in range(4, 30))  # field N holds N
    assert _detach.parse_start_ticks(f"42 (evil) name) 1 2) S {fields}") == 22
    assert _detach.parse_start_ticks("42 (short) S 1") is None
