# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wait for a detached job (glm.fleet.image_pull with job_file), printing its progress as it grows.

The job runs in a worker process on the host, so neither an SSH drop nor a task timeout kills it;
this action reads the job file the worker rewrites, shows every change of its progress, checks
that the worker still runs (same pid, same start time), and returns the job's own result."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.glm.fleet.plugins.module_utils._detach import parse_start_ticks
from ansible_collections.glm.fleet.plugins.module_utils._progress import human_bytes, human_seconds

display = Display()


def describe(progress: dict, elapsed: float) -> str:
    """One line for a progress dict with layers/bytes (image pulls) or bytes/size (files)."""
    parts = []
    if "layers" in progress:
        parts.append(f"layers {progress.get('layers_done', 0)}/{progress['layers']}")
    done = progress.get("bytes", 0)
    total = progress.get("bytes_total") or progress.get("size") or 0
    if total:
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = (total - done) / rate if rate > 0 else 0.0
        parts.append(f"{human_bytes(done)} / {human_bytes(total)}, {human_bytes(rate)}/s, ETA {human_seconds(eta)}")
    return "; ".join(parts) or "started"


def outcome(job: dict, worker_stat: str | None, what: str, job_file: str) -> dict | None:
    """The task's result once the job has ended (done, failed, or its worker gone); None while it runs."""
    if job.get("state") == "done":
        return {"changed": True, "pulled": True, "job": strip(job), **job.get("result", {})}
    if job.get("state") == "failed":
        return {"failed": True, "msg": f"{what}: {job.get('msg', 'failed')}", "job": strip(job)}
    if worker_stat is None or parse_start_ticks(worker_stat) != job.get("start_ticks"):
        return {
            "failed": True,
            "job": strip(job),
            "msg": f"{what}: its worker (pid {job.get('pid')}) ended without a result: it was killed or the "
            f"host rebooted ({job_file} is left as it was); run the play again to start over",
        }
    return None


def observe(
    read_job: Callable[[], dict | None], read_stat: Callable[[object], str | None]
) -> tuple[dict | None, str | None]:
    """The job record and, while it runs, its worker's /proc stat line. The worker writes its result
    before it exits, so a worker found gone is read about once more: a result written between the
    two reads wins over "gone"."""
    job = read_job()
    if not isinstance(job, dict) or job.get("state") != "running":
        return job, None
    stat = read_stat(job.get("pid"))
    if stat is None or parse_start_ticks(stat) != job.get("start_ticks"):
        again = read_job()
        if isinstance(again, dict) and again.get("state") != "running":
            return again, None
    return job, stat


def strip(job: dict) -> dict:
    return {k: v for k, v in job.items() if k != "result"}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("job_file", "timeout", "interval", "what"))

    def slurp(self, path: str, task_vars: dict) -> str | None:
        read = self._execute_module(module_name="ansible.legacy.slurp", module_args={"src": path}, task_vars=task_vars)
        if read.get("failed"):
            return None
        return base64.b64decode(read["content"]).decode(errors="replace")

    def run(self, tmp: str | None = None, task_vars: dict | None = None) -> dict:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        args = self._task.args
        job_file = args.get("job_file")
        if not job_file:
            raise AnsibleActionFail("job_file is required: the job file of a glm.fleet.image_pull task")
        timeout = float(args.get("timeout", 86400))
        interval = float(args.get("interval", 5))
        what = args.get("what", "job")
        host = task_vars.get("inventory_hostname", "?")
        started = time.monotonic()
        shown = None

        def read_job() -> dict | None:
            text = self.slurp(job_file, task_vars)
            try:
                job = json.loads(text) if text else None
            except ValueError:
                return None
            return job if isinstance(job, dict) else None

        while True:
            job, stat = observe(read_job, lambda pid: self.slurp(f"/proc/{pid}/stat", task_vars))
            if job is None:
                result.update(failed=True, msg=f"{what}: no readable job file {job_file} on the host")
                return result
            ended = outcome(job, stat, what, job_file)
            if ended is not None:
                result.update(ended)
                result["waited_s"] = round(time.monotonic() - started, 1)
                return result
            if time.monotonic() - started > timeout:
                result.update(failed=True, msg=f"{what} did not finish in {timeout:.0f} s (its worker, pid "
                              f"{job.get('pid')}, goes on)")  # fmt: skip
                return result
            progress = job.get("progress")
            if isinstance(progress, dict) and progress != shown:
                display.display(f"{host}: {what}: {describe(progress, time.monotonic() - started)}")
                shown = progress
            time.sleep(interval)
